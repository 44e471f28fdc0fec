# Waiting room: build, check, run and deploy. `make` alone lists the targets.
#
# `make test` sets itself up: `make setup` installs what the checks need
# and is missing (see setup below), pinned, into .tools/, and stops at
# once with the command to run where it cannot. `sam` is needed only for
# deploy.

# Tool versions.
STATICCHECK_VERSION := v0.8.2
RIE_VERSION         := v0.0.0-20261030222936-bef5c4ba774d
REDOCLY_VERSION     := 2.77.0
DYNALITE_VERSION    := 4.0.0
MOTO_VERSION        := 5.2.1
CFN_LINT_VERSION    := 1.51.0

GO       ?= go
CFN_LINT ?= cfn-lint
TOOLS    := $(CURDIR)/.tools
STATICCHECK := $(TOOLS)/staticcheck/$(STATICCHECK_VERSION)/staticcheck
RIE         := $(TOOLS)/aws-lambda-rie/$(RIE_VERSION)/aws-lambda-rie
DYNALITE    := $(TOOLS)/dynalite/$(DYNALITE_VERSION)/node_modules/.bin/dynalite
REDOCLY     := $(TOOLS)/redocly/$(REDOCLY_VERSION)/node_modules/.bin/redocly
VENV        := $(TOOLS)/venv

# The tools in .tools/ come first on the PATH of every recipe, and of the
# tests they run (the DynamoDB tests start dynalite and moto_server from it).
export PATH := $(dir $(DYNALITE)):$(VENV)/bin:$(PATH)

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
# unit-others runs the others, and queue again: under the detector its
# property tests try a quarter of their seeds (internal/queue/race_test.go).
RACE_PKGS := ./internal/queue/... ./internal/httpapi/... ./internal/tools/memstore/... ./internal/polling/... ./internal/app/...
RACE_ONLY := ./internal/httpapi/... ./internal/tools/memstore/... ./internal/polling/... ./internal/app/...
# The longest-running test packages, started first so that the others run
# beside them rather than after them.
SLOW_PKGS := ./internal/dynamostore/... ./cmd/audit/... ./cmd/local/... ./internal/waitpage/... ./internal/tools/bench/simulate/...

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
.PHONY: build-QueueFunction build-AdminFunction build-PushSenderFunction build-ReporterFunction
build-QueueFunction: ## (sam build) The queue function's bootstrap into $(ARTIFACTS_DIR).
	$(call need,ARTIFACTS_DIR)
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/queue
build-AdminFunction: ## (sam build) The admin function's bootstrap into $(ARTIFACTS_DIR).
	$(call need,ARTIFACTS_DIR)
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/admin
build-PushSenderFunction: ## (sam build) The push sender's bootstrap into $(ARTIFACTS_DIR).
	$(call need,ARTIFACTS_DIR)
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/pushsender
build-ReporterFunction: ## (sam build) The reporter's bootstrap into $(ARTIFACTS_DIR).
	$(call need,ARTIFACTS_DIR)
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/reporter

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
# ends (-O); a failing step fails the target. Every go test runs its tests
# in an order shuffled by one seed per make test, which it prints first:
# make test SHUFFLE=that seed repeats the order (SHUFFLE=off: none).
ifndef SHUFFLE
SHUFFLE := $(shell date +%s)
endif
GOTEST  := $(GO) test -count=1 -shuffle=$(SHUFFLE)

.PHONY: test
test: setup ## Everything CI runs, side by side: lint, unit-others and race (together every package once), emulator.
	@echo "make test: tests shuffled with seed $(SHUFFLE) (make test SHUFFLE=$(SHUFFLE) repeats the order)"
	@$(MAKE) -j4 -O --no-print-directory lint unit-others race emulator SHUFFLE=$(SHUFFLE)

# N runs of make test, each beside two busy loops (yes > /dev/null) on a
# loaded machine; every failing run's log and the shuffle seeds of its
# failing packages are kept in STRESS_DIR and listed at the end.
N ?= 10
STRESS_DIR ?= /tmp/waitingroom-stress
.PHONY: test-stress
test-stress: setup ## make test N times (N=10) beside two busy loops; reports each failure with its seeds and log.
	@mkdir -p $(STRESS_DIR); rm -f $(STRESS_DIR)/*.log; pass=0; \
	yes >/dev/null & b1=$$!; yes >/dev/null & b2=$$!; \
	trap 'kill $$b1 $$b2 2>/dev/null' EXIT INT TERM; \
	for i in $$(seq $(N)); do \
	  start=$$(date +%s); \
	  if $(MAKE) --no-print-directory test >$(STRESS_DIR)/run-$$i.log 2>&1; then \
	    pass=$$((pass + 1)); echo "run $$i: pass in $$(( $$(date +%s) - start )) s"; rm $(STRESS_DIR)/run-$$i.log; \
	  else \
	    echo "run $$i: FAIL in $$(( $$(date +%s) - start )) s: $(STRESS_DIR)/run-$$i.log"; \
	    awk '/^-test.shuffle /{seed=$$2} /^--- FAIL/{print "    " $$0 " (shuffle seed " seed ")"} /^FAIL\t/{print "    " $$0 " (SHUFFLE=" seed ")"}' $(STRESS_DIR)/run-$$i.log; \
	  fi; \
	done; \
	echo "$$pass of $(N) runs passed"; [ $$pass -eq $(N) ]

.PHONY: lint
lint: $(STATICCHECK) lint-openapi ## gofmt, go vet, staticcheck, go mod tidy check, cfn-lint, Redocly.
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet -tags $(CHECK_TAGS) ./...
	$(STATICCHECK) -tags $(CHECK_TAGS) ./...
	$(GO) mod tidy -diff
	$(CFN_LINT) template.yaml template-waf.yaml

.PHONY: lint-openapi
lint-openapi: $(REDOCLY) ## Lint docs/openapi.yaml with Redocly's recommended rules.
	$(REDOCLY) lint docs/openapi.yaml

.PHONY: unit
unit: setup ## go test ./...: every package once, without the race detector.
	$(GOTEST) ./...

# The go list calls must succeed: an empty list would test only the root.
.PHONY: unit-others
unit-others: ## go test of every package but RACE_ONLY, which race runs: SLOW_PKGS first.
	@pkgs=$$($(GO) list $(SLOW_PKGS) ./...) && race=$$($(GO) list $(RACE_ONLY)) && \
	  echo "$(GOTEST) <./... but RACE_ONLY, SLOW_PKGS first>" && \
	  $(GOTEST) $$(echo "$$pkgs" | grep -vxF "$$race")

.PHONY: race
race: ## The core packages under the race detector.
	$(GOTEST) -race $(RACE_PKGS)

.PHONY: emulator integration
emulator: $(RIE) ## The real bootstraps under aws-lambda-rie, against moto_server, with events/*.json, the push sender's runs, and `make invoke`.
	AWS_LAMBDA_RIE=$(RIE) $(GOTEST) -tags $(CHECK_TAGS) -run 'TestFunctions|TestInvoke|TestPushSenderFunction|TestReporterFunction' -v ./internal/tools/lambdaemu/ ./cmd/invoke/
integration: emulator ## Same as emulator.

# Every fuzz target, each for FUZZTIME; CI runs a short pass.
FUZZTIME ?= 30s
FUZZ_TARGETS := ./internal/httpapi:FuzzHandler ./internal/polling:FuzzParseTiers ./internal/pace:FuzzSegment

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

# npm packages, pinned, each in a prefix of its own.
$(DYNALITE):
	npm install --prefix $(TOOLS)/dynalite/$(DYNALITE_VERSION) --no-fund --no-audit --loglevel=error dynalite@$(DYNALITE_VERSION)
$(REDOCLY):
	npm install --prefix $(TOOLS)/redocly/$(REDOCLY_VERSION) --no-fund --no-audit --loglevel=error @redocly/cli@$(REDOCLY_VERSION)

# What make test needs, installed when missing: Debian's packages first
# (Node.js, Chromium and its headless shell, and a Korean font for the page's
# screenshots, with apt-get as root or with sudo), then moto and cfn-lint
# into a virtualenv (from PyPI), dynalite and Redocly with npm, and the Go
# tools. Where it cannot install, it stops with the command to run.
.PHONY: setup
setup: ## Install what make test needs and is missing (into .tools/; apt-get for Chromium and Node.js).
	@$(SETUP_APT)
	@$(SETUP_PY)
	@$(MAKE) --no-print-directory $(DYNALITE) $(REDOCLY) $(STATICCHECK) $(RIE)

# The browsers internal/testing/browser looks for, in its order; and those
# that show notifications, for its NotifyingTab (the headless shell cannot).
BROWSERS := chromium-headless-shell headless-shell chromium chromium-browser google-chrome google-chrome-stable
NOTIFYING := chromium chromium-browser google-chrome google-chrome-stable
define SETUP_APT
set -e; pkgs=""; \
have() { command -v "$$1" >/dev/null 2>&1; }; \
browser=""; for b in $(BROWSERS); do have $$b && browser=$$b && break; done; \
[ -n "$$browser$$CHROMIUM" ] || pkgs="chromium-headless-shell"; \
shows=""; for b in $(NOTIFYING); do have $$b && shows=$$b && break; done; \
[ -n "$$shows$$CHROMIUM_NOTIFYING" ] || pkgs="$$pkgs chromium"; \
have npm || pkgs="$$pkgs nodejs npm"; \
if ! have moto_server || ! have cfn-lint; then python3 -c 'import ensurepip, venv' 2>/dev/null || pkgs="$$pkgs python3-venv"; fi; \
if [ -n "$$pkgs" ] && have fc-list && [ -z "$$(fc-list :lang=ko 2>/dev/null)" ]; then pkgs="$$pkgs fonts-nanum"; fi; \
[ -n "$$pkgs" ] || exit 0; \
sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo -n"; \
if ! have apt-get || ! $$sudo true 2>/dev/null; then \
  echo "make setup: missing$$pkgs; install them (Debian: sudo apt-get install -y$$pkgs), then run make test again" >&2; exit 1; \
fi; \
echo "make setup: apt-get install$$pkgs"; \
$$sudo apt-get update -qq; \
$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkgs >/dev/null
endef

define SETUP_PY
set -e; command -v moto_server >/dev/null && command -v cfn-lint >/dev/null && exit 0; \
pkgs="'moto[server]==$(MOTO_VERSION)' cfn-lint==$(CFN_LINT_VERSION)"; \
echo "make setup: pip install $$pkgs into $(VENV)"; \
if ! { [ -x $(VENV)/bin/pip ] || python3 -m venv $(VENV); } || ! $(VENV)/bin/pip install -q --retries 0 --timeout 15 "moto[server]==$(MOTO_VERSION)" cfn-lint==$(CFN_LINT_VERSION); then \
  echo "make setup: moto_server or cfn-lint is missing and PyPI cannot be reached from here; where it can:" >&2; \
  echo "  python3 -m venv $(VENV) && $(VENV)/bin/pip install $$pkgs" >&2; exit 1; \
fi
endef

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
