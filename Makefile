# fourlanes: the targets people and CI use (CI runs `make test` through .ci/run).
# `make` alone lists them. Non-Go tools live in .cache/ (scripts/deps.sh installs them on demand).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
CDK := $(CURDIR)/.cache/npm/node_modules/.bin/cdk
CDK_FLAGS ?=
# The end-to-end suite (./test/, the longest package) first, so it starts at once and the rest
# share the other slot beside it, instead of starting last after every other package.
# Every module of the workspace (go.work): the runtime, infra, twin, cmd/fourlanes, the examples,
# test and bench.
ALL_PKGS := github.com/fourlanes/fourlanes/...
TEST_PKGS ?= ./test/ $(ALL_PKGS)
TESTFLAGS ?=
# Benchmarks: the runner in bench/ measures everything side by side in one run and writes
# bench/RESULTS.md (scratch builds in bench/out/, which git ignores). Runs under with-servers.sh.
BENCH_CMD ?= $(GO) run ./bench

# make dev: the orders example's build of the CLI, and flags for its dev command.
DEV_BIN := $(CURDIR)/.cache/bin/orders
DEV_FLAGS ?=

# The application make builds and deploys: the orders example. Every Lambda
# is a folder under its functions/ with a main.go.
APP_DIR := examples/orders
FUNCTIONS := $(patsubst $(APP_DIR)/functions/%/main.go,%,$(wildcard $(APP_DIR)/functions/*/main.go))
# Go sources to format-check, wherever they are, but not vendored tools or fixtures.
GO_FILES = $(shell find . -name '*.go' -not -path './.cache/*' -not -path './build/*' \
	-not -path './cdk.out/*' -not -path '*/node_modules/*' -not -path '*/testdata/*')

# CI=true turns every skipped integration test into a failure (internal/localaws).
ifdef CI
export CI
endif
# Tools that tests (infra, the twin) may run; absolute, so they work from any package folder.
export FOURLANES_CDK := $(CDK)
export FOURLANES_CFN_LINT := $(CURDIR)/.cache/venv/bin/cfn-lint
# Node: the CDK CLI and jsii (which the CDK's Go bindings run) need a Node LTS the AWS CDK
# supports, 22 or 24 today (docs/cli.md); on an older one jsii says so, and nothing here hides it.

.PHONY: help deps build test bench lint synth diff deploy dev catalog clean distclean

help:
	@echo 'make deps     install ElasticMQ, cfn-lint, boto3 and the CDK CLI into .cache/ (DynamoDB is our own: nothing to install)'
	@echo 'make build    cross-compile $(APP_DIR)/functions/* to build/<fn>/bootstrap (linux/arm64)'
	@echo 'make test     lint, build, then go test ./... against one fresh DynamoDB (fourlanes dynamodb) + ElasticMQ'
	@echo 'make bench    every benchmark side by side in one run -> bench/RESULTS.md'
	@echo 'make lint     gofmt check and go vet'
	@echo 'make synth | diff | deploy   build, then the CDK CLI (CDK_FLAGS=... passes flags)'
	@echo 'make dev      run the local twin with the orders example (builds its CLI and this machine'"'"'s functions only; DEV_FLAGS=... passes flags)'
	@echo 'make catalog  regenerate examples/orders/CATALOG.md and the examples'"'"' schemas/ from the module declarations (the gate checks they are fresh)'
	@echo 'make clean    remove build/, cdk.out/, bench/out/ (make distclean: .cache/ too)'

deps:
	@bash scripts/deps.sh

build:
ifeq ($(FUNCTIONS),)
	@echo 'build: no $(APP_DIR)/functions/*/main.go yet; nothing to build'
else
	@echo 'build: $(words $(FUNCTIONS)) function(s) for linux/arm64 -> build/<fn>/bootstrap'
	@for fn in $(FUNCTIONS); do \
		echo "  build/$$fn/bootstrap"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags '-s -w' \
			-o build/$$fn/bootstrap ./$(APP_DIR)/functions/$$fn; \
	done
endif

lint:
	@echo 'lint: gofmt -l'
	@bad=$$(gofmt -l $(GO_FILES)); if [[ -n $$bad ]]; then \
		echo "lint: these files need gofmt -w:"; echo "$$bad" | sed 's/^/  /'; exit 1; fi
	@echo 'lint: go vet (every module of the workspace)'
	@$(GO) vet $(ALL_PKGS)

test: lint build
	@bash scripts/deps.sh elasticmq cfn-lint boto3 cdk
	@echo 'test: go test $(TEST_PKGS) (fuzz seed corpora included) with one DynamoDB (fourlanes dynamodb) and one ElasticMQ for the run'
	bash scripts/with-servers.sh $(GO) test $(TEST_PKGS) -count=1 -timeout 40m $(TESTFLAGS)

bench:
	@bash scripts/deps.sh elasticmq cdk
	@echo 'bench: benchmarks with one DynamoDB (fourlanes dynamodb) and one ElasticMQ for the run (the chaos soak synthesizes the stack: CDK)'
	bash scripts/with-servers.sh $(BENCH_CMD)

synth diff deploy: build
	@bash scripts/deps.sh cdk
	@echo '$@: cdk $@ (app from cdk.json)'
	$(CDK) $@ $(CDK_FLAGS)

# dev builds only what the twin runs: the example's CLI here, then dev builds the functions for this
# machine (not the linux/arm64 Lambda build, which the twin never runs) and says how far it is.
dev:
	@bash scripts/deps.sh elasticmq
	@echo 'dev: building the orders example'"'"'s CLI (go build ./examples/orders/cmd/orders -> $(DEV_BIN))'
	@$(GO) build -o $(DEV_BIN) ./examples/orders/cmd/orders
	@echo 'dev: the local twin starts its own DynamoDB (in-process, state kept in .cache/twin/dynamodb) and ElasticMQ'
	$(DEV_BIN) dev $(DEV_FLAGS)

catalog:
	$(GO) test ./examples/orders -run '^TestCatalogUpToDate$$' -update -count=1
	$(GO) test ./examples/library -run '^TestLibraryPassesTheGate$$' -update -count=1

clean:
	rm -rf build cdk.out bench/out

distclean: clean
	rm -rf .cache
