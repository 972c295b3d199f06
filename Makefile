# Platform: a Kubernetes-style API server split into services. See README.md.
SHELL := /bin/bash
GO ?= go
# Every package of every module in go.work (a new module joins by being added there).
PKGS = $(shell $(GO) list -m -f '{{.Dir}}/...')
BIN := $(CURDIR)/bin
DATA_DIR ?= $(CURDIR)/.platform
# Pinned code generators: `make proto` must produce the committed files byte for byte.
BUF_VERSION := v1.73.0
PROTOC_GEN_GO_VERSION := v1.36.11
PROTOC_GEN_GO_GRPC_VERSION := v1.6.1

.PHONY: run test bench load proto lint build tools images up down

## run: the whole system on this machine (the all-in-one: every service in one process, embedded
## storage, no Redis or Docker needed) on https://127.0.0.1:6443; it prints how to use kubectl.
run:
	$(GO) build -o $(BIN)/platform ./services/allinone
	$(BIN)/platform --data-dir=$(DATA_DIR) $(ARGS)

## test: every test of every module (race detector on), against real redis-servers the tests start;
## then the end-to-end suite a second time in the kubernetes naming profile, and one request's trace
## fetched from Jaeger in the compose stack (its own step: a machine with cold Go caches first
## downloads and compiles Jaeger, minutes; docs/operations.md, "Jaeger's cost").
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout=15m $(PKGS)
	PLATFORM_NAMING_PROFILE=kubernetes $(GO) test -race -count=1 -timeout=15m ./test/e2e/...
	$(GO) test -tags jaeger -count=1 -timeout=45m -run TestComposeJaeger ./test/compose/

## bench: the Go benchmarks (storage gRPC API and backends, gateway hot paths, authn, authz and admission).
bench:
	$(GO) test -run='^$$' -bench=. -benchtime=$${BENCHTIME:-5s} -count=$${COUNT:-1} ./services/storage/... ./services/gateway/... ./services/authn/... ./services/authz/... ./services/admission/... ./services/certificates/...

## load: the API load tool against a split stack and the all-in-one (see docs/benchmarks.md).
load:
	$(GO) run ./test/load/apiload --start=split --scenario=create,get,list --clients=1,16 --duration=10s
	$(GO) run ./test/load/apiload --start=allinone --scenario=create,get,list --clients=1,16 --duration=10s
	$(GO) run ./test/load/apiload --start=split --kind=custom --scenario=create,get,patch,apply --clients=1,16 --duration=10s

## build: every binary into ./bin (storage, authn, authz, admission, certificates, controllers, gateway, and the all-in-one as platform).
build:
	$(GO) build -o $(BIN)/ ./services/storage ./services/authn ./services/authz ./services/admission ./services/certificates ./services/controllers ./services/gateway
	$(GO) build -o $(BIN)/platform ./services/allinone

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

# Container images and the compose stack (build/images/README.md, docs/operations.md "Compose").
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Compose v2 (`docker compose`) where installed, else v1 (Debian's docker-compose).
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
COMPOSE_PROJECT ?= platform
IMAGES ?= storage authn authz admission certificates controllers gateway platform redis $(if $(TRACING),jaeger)
COMPOSE_ENV = PLATFORM_VERSION=$(VERSION) $(if $(TRACING),COMPOSE_PROFILES=tracing PLATFORM_OTLP_ENDPOINT=http://jaeger:4317)

## images: the container images, nothing pulled: platform/<service>:$(VERSION) and :latest for every service and the
## all-in-one (static binaries FROM scratch, user 65532), and redis:7 from Debian's packages when no such image exists;
## TRACING=1 adds jaegertracing/jaeger:2.13.0 compiled from its Go source (minutes the first time). See build/images/README.md.
images:
	VERSION=$(VERSION) GO=$(GO) IMAGES="$(IMAGES)" build/images/build.sh

## up: the split stack in containers (compose.yaml) on https://127.0.0.1:6443, waiting until it is ready; then
## kubectl --kubeconfig .compose/admin.kubeconfig get ns. TRACING=1 adds Jaeger (UI on http://127.0.0.1:16686).
up: images
	mkdir -p .compose
	$(COMPOSE_ENV) $(COMPOSE) -p $(COMPOSE_PROJECT) up -d --remove-orphans
	build/compose-wait.sh $(COMPOSE_PROJECT) 180
	@echo "ready: kubectl --kubeconfig .compose/admin.kubeconfig get ns"

## down: stop and remove the stack's containers; ARGS=-v also removes its volumes (Redis data, the PKI).
down:
	$(COMPOSE_ENV) $(COMPOSE) -p $(COMPOSE_PROJECT) --profile tracing down --remove-orphans $(ARGS)
