module github.com/turnwise/turnwise

go 1.26

require (
	github.com/spf13/pflag v1.0.10 // indirect
	github.com/x448/float16 v0.8.4 // indirect
)
