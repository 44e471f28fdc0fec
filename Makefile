# Waiting room: build, check, run and deploy. `make` alone lists the targets.
#
# Nothing needs installing by hand: the Go tools below are pinned and
# installed into .tools/ by `make tools` (and by the targets that need
# them). moto_server (pip install 'moto[server]') and cfn-lint
# (pip install cfn-lint) come from the machine; `sam` only for deploy.

# Tool versions.
STATICCHECK_VERSION := v0.8.2
RIE_VERSION         := v0.0.0-20261030222936-bef5c4ba774d
REDOCLY_VERSION     := 2.77.0

GO       ?= go
CFN_LINT ?= cfn-lint
TOOLS    := $(CURDIR)/.tools
STATICCHECK := $(TOOLS)/staticcheck/$(STATICCHECK_VERSION)/staticcheck
RIE         := $(TOOLS)/aws-lambda-rie/$(RIE_VERSION)/aws-lambda-rie

# Build tags of every build and check: lambda.norpc drops aws-lambda-go's
# unused net/rpc mode; emulator adds the tests that run the bootstraps.
LAMBDA_TAGS := lambda.norpc
CHECK_TAGS  := lambda.norpc,emulator

# The functions for Lambda (provided.al2023, arm64): what `sam build` runs.
LAMBDA_BUILD := CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags $(LAMBDA_TAGS) -trimpath -ldflags='-s -w'
# The same for this machine, for the emulator; with the default cgo
# setting and without -trimpath, so that it reuses what go test compiled
# (on a fresh machine that saves recompiling the AWS SDK twice).
HOST_BUILD := $(GO) build -tags $(LAMBDA_TAGS)

# Core packages for the race detector (slow on 2 cores, so not ./...).
RACE_PKGS := ./internal/queue/... ./internal/httpapi/... ./internal/memstore/... ./internal/polling/... ./internal/app/...
# The longest-running test packages, started first so that the others run
# beside them rather than after them.
SLOW_PKGS := ./internal/dynamostore/... ./cmd/local/... ./internal/waitpage/... ./internal/bench/simulate/...

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Compile every package.
	$(GO) build ./...

# sam build (BuildMethod: makefile) runs these in the CodeUri directory
# with ARTIFACTS_DIR set; template_test.go checks that each function of
# template.yaml has one and that it builds the right package.
.PHONY: build-QueueFunction build-AdminFunction
build-QueueFunction: ## (sam build) The queue function's bootstrap into $(ARTIFACTS_DIR).
	$(call need,ARTIFACTS_DIR)
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/queue
build-AdminFunction: ## (sam build) The admin function's bootstrap into $(ARTIFACTS_DIR).
	$(call need,ARTIFACTS_DIR)
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/admin

.PHONY: bootstrap
bootstrap: ## Both bootstraps for this machine, into bin/{queue,admin}/bootstrap.
	$(HOST_BUILD) -o bin/queue/bootstrap ./functions/queue
	$(HOST_BUILD) -o bin/admin/bootstrap ./functions/admin

# Built, then exec'd: the server is make's own child, so stopping make
# (kill %1, Ctrl-C) stops it; `go run` would leave its child holding the
# port.
.PHONY: run
run: ## Serve the API and the waiting-room page locally on an in-memory store (ADDR=host:port, default 127.0.0.1:3000; ARGS=more flags, e.g. -dynamo moto).
	$(GO) build -o bin/local ./cmd/local
	exec bin/local $(if $(ADDR),-addr $(ADDR)) $(ARGS)

# The steps run side by side (-j4), each one's output printed whole when it
# ends (-O); a failing step fails the target.
.PHONY: test
test: ## Everything CI runs, side by side: lint, unit-others and race (together every package once), emulator.
	@$(MAKE) -j4 -O --no-print-directory lint unit-others race emulator

.PHONY: lint
lint: $(STATICCHECK) lint-openapi ## gofmt, go vet, staticcheck, go mod tidy check, cfn-lint, Redocly.
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags $(CHECK_TAGS) ./...
	$(STATICCHECK) -tags $(CHECK_TAGS) ./...
	$(GO) mod tidy -diff
	$(CFN_LINT) template.yaml template-waf.yaml

# Redocly's CLI from npm, run by npx (needs node).
.PHONY: lint-openapi
lint-openapi: ## Lint docs/openapi.yaml with Redocly's recommended rules.
	npx --yes @redocly/cli@$(REDOCLY_VERSION) lint docs/openapi.yaml

.PHONY: unit
unit: ## go test ./...: includes the DynamoDB store tests (moto_server) and template_test.go.
	$(GO) test -count=1 ./...

# The go list calls must succeed: an empty list would test only the root.
.PHONY: unit-others
unit-others: ## go test of every package but RACE_PKGS, which race runs: SLOW_PKGS first.
	@pkgs=$$($(GO) list $(SLOW_PKGS) ./...) && race=$$($(GO) list $(RACE_PKGS)) && \
	  echo "$(GO) test -count=1 <./... but RACE_PKGS, SLOW_PKGS first>" && \
	  $(GO) test -count=1 $$(echo "$$pkgs" | grep -vxF "$$race")

.PHONY: race
race: ## The core packages under the race detector.
	$(GO) test -race -count=1 $(RACE_PKGS)

.PHONY: emulator integration
emulator: $(RIE) ## The real bootstraps under aws-lambda-rie, against moto_server, with events/*.json; and `make invoke`.
	AWS_LAMBDA_RIE=$(RIE) $(GO) test -count=1 -tags $(CHECK_TAGS) -run 'TestFunctions|TestInvoke' -v ./internal/lambdaemu/ ./cmd/invoke/
integration: emulator ## Same as emulator.

# Every fuzz target, each for FUZZTIME; CI runs a short pass.
FUZZTIME ?= 30s
FUZZ_TARGETS := ./internal/httpapi:FuzzHandler ./internal/polling:FuzzParseTiers ./internal/queue:FuzzSegment

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 30s), seeded from events/.
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "== $${t##*:} ($(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime $(FUZZTIME) $${t%%:*}; \
	done

.PHONY: invoke
invoke: bootstrap $(RIE) ## Run EVENT=events/<name>.json through its function under the emulator (DYNAMODB_ENDPOINT=url: that API instead of a fresh moto_server).
	$(GO) run ./cmd/invoke -rie $(RIE) $(EVENT)

.PHONY: bench-freeze
bench-freeze: ## A 300-user bench burst on cmd/local over dynalite frozen 3 s mid-run, then the audit (docs/bench/bench-freeze.sh).
	docs/bench/bench-freeze.sh

.PHONY: tools
tools: $(STATICCHECK) $(RIE) ## Install the pinned Go tools into .tools/.

$(STATICCHECK):
	GOBIN=$(dir $@) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(RIE):
	GOBIN=$(dir $@) $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

.PHONY: deploy
deploy: ## sam build && sam deploy --guided (needs the SAM CLI and AWS credentials).
	sam build && sam deploy --guided

.PHONY: clean
clean: ## Remove build output (not the tools in .tools/).
	rm -rf bin .aws-sam coverage.out coverage.html

ifneq ($(filter invoke,$(MAKECMDGOALS)),)
ifeq ($(EVENT),)
$(error EVENT is required, e.g. make invoke EVENT=events/enter.json)
endif
endif

# need,VAR: stop with a message when VAR is empty.
need = $(if $($(1)),,$(error $(1) is required, e.g. make $@ $(1)=...))
