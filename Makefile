# Platform: a Kubernetes-style API server split into services. See README.md.
SHELL := /bin/bash
GO ?= go
# Every package of every module in go.work (a new module joins by being added there).
PKGS = $(shell $(GO) list -m -f '{{.Dir}}/...')
BIN := $(CURDIR)/bin
DATA_DIR ?= $(CURDIR)/.data
# Pinned code generators: `make proto` must produce the committed files byte for byte.
BUF_VERSION := v1.73.0
PROTOC_GEN_GO_VERSION := v1.36.11
PROTOC_GEN_GO_GRPC_VERSION := v1.6.1

.PHONY: run test bench proto lint build tools

## run: the whole system on this machine, embedded storage, no Redis or Docker needed.
run:
	$(GO) run ./services/storage --backend=embedded --data-dir=$(DATA_DIR)/storage --listen=127.0.0.1:7001 --metrics-bind-address=127.0.0.1:7091

## test: every test of every module (race detector on), against real redis-servers the tests start.
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout=15m $(PKGS)

## bench: the storage benchmarks (gRPC API, Redis and embedded backends).
bench:
	$(GO) test -run='^$$' -bench=. -benchtime=$${BENCHTIME:-5s} -count=$${COUNT:-1} ./services/storage/...

build:
	$(GO) build -o $(BIN)/ ./services/storage

tools:
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

## proto: regenerate the committed Go code from proto/ with the pinned generators.
proto: tools
	cd proto && PATH=$(BIN):$$PATH buf lint && PATH=$(BIN):$$PATH buf generate

## lint: formatting, vet and the proto lint.
lint:
	@out=$$(gofmt -l $$($(GO) list -m -f '{{.Dir}}')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
