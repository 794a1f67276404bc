module github.com/turnwise/turnwise

go 1.26

require (
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/klauspost/compress v1.20.3
	github.com/spf13/pflag v1.0.10
	github.com/x448/float16 v0.8.4
	go.yaml.in/yaml/v3 v3.0.6
	gorgonia.org/cu v0.9.6
)

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/google/uuid v1.1.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
)
