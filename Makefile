# turnwise — the README's commands are targets here.
#
#   make run     set up, build, and run the main job on its built-in default
#   make test    set up, build, and run every test (what CI runs)
#   make bench   op benchmarks (go test -bench) on the CPU backend

GO      ?= go
BIN     := bin/train

.PHONY: all setup build run test vet race bench clean

all: build

setup:
	@./scripts/setup.sh

build: setup
	$(GO) build -o $(BIN) ./cmd/train

# The main job. Until the model lands it is the op benchmark on the 24.4M
# reference shapes.
run: build
	./$(BIN) bench

vet: setup
	$(GO) vet ./...

race: setup
	$(GO) test -race -count=1 ./engine/...

test: setup vet
	$(GO) test -count=1 ./...
	$(GO) test -race -count=1 ./engine/...

bench: setup
	$(GO) test -run '^$$' -bench . ./engine/cpu/

clean:
	rm -rf bin
