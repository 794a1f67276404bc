module github.com/turnwise/turnwise

go 1.26

require (
	github.com/klauspost/compress v1.20.3
	github.com/spf13/pflag v1.0.10
	github.com/x448/float16 v0.8.4
	go.yaml.in/yaml/v3 v3.0.6
	gorgonia.org/cu v0.9.6
)

require (
	github.com/google/uuid v1.1.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
)
