# fleetq — see README.md. Every target sets itself up: Go fetches modules on
# first use; nothing else needs installing.

GO        ?= go
# One build configuration for everything make lint and make test compile: the race detector's
# (-race, which needs cgo) with -trimpath. go vet, every package's tests (the CDK app's included), the
# dynalite run and the binaries the tests build themselves (testenv.BuildBinary) then share one
# compile of the SDK and of the CDK module, the two largest compiles of the tree. It is set for those
# targets only (TEST_GOFLAGS below): make build and make release build what ships in their own
# configuration, static (CGO_ENABLED=0), linux/arm64 for the functions; make dev and make serve build
# bin/fleetq as go run builds it (DEV_CLI), once, and the README's commands run that binary.
#
# The race detector also turns on checkptr, which checks every conversion of an unsafe.Pointer as it
# runs: fleetq has none (no package imports unsafe), so all it checked were the standard library's and
# the dependencies' own (encoding/json, reflect, maps), 8-10% of the store suite's CPU under -race. It is
# off (-d=checkptr=0), in GOFLAGS so that go vet, go test and testenv.BuildBinary keep sharing one compile.
#
# The embedded emulators (minidyn for DynamoDB, goaws for SQS, gofakes3 for S3: EMULATORS) are compiled
# without the race detector's instrumentation (-race=false for their packages; the latest -gcflags
# pattern a package matches wins). They are third-party servers the tests reach through the AWS SDK
# over loopback HTTP, or through localaws's guard as request and answer bytes: no memory of fleetq's
# is ever theirs, so no race in fleetq can run through them. Instrumented, they took about 8% of make
# test's CPU. fleetq's own packages, the standard library and the AWS SDK stay instrumented.
RACE      := -race
EMULATORS := github.com/truora/minidyn/... github.com/Admiral-Piett/goaws/... github.com/johannesboyne/gofakes3/...
TEST_GOFLAGS := -trimpath -gcflags=all=-d=checkptr=0 $(foreach m,$(EMULATORS),-gcflags=$(m)=-race=false)
# make test runs make test-dynalite, which finds them in GOFLAGS already: filter-out keeps them once.
lint test test-dynalite busy-test: export GOFLAGS := $(strip $(filter-out $(TEST_GOFLAGS),$(GOFLAGS)) $(TEST_GOFLAGS))
lint test test-dynalite busy-test: export CGO_ENABLED := 1
# The race detector's runtime sleeps a second before every process it instruments exits
# (atexit_sleep_ms, 1000 by default): a second per test binary and per binary a test runs. Go
# reports a race where it happens, and go test fails the test it happened in, so nothing waits for it.
export GORACE ?= atexit_sleep_ms=0
FUNCTIONS := $(notdir $(wildcard functions/*))
STAGE     ?= dev
# ON_CI is true in a shell when CI is set (not to false or 0), as CI systems and .ci/run set it: a
# test tool that is missing (npm, Chromium, python3) then fails the run instead of being skipped.
ON_CI     := [ -n "$$CI" ] && [ "$$CI" != false ] && [ "$$CI" != 0 ]
BENCHTIME ?= 1s
# VERSION is stamped into every binary (fleetq version); git describe when
# the tree is a git checkout.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/fleetq/fleetq/pkg/lib/version.Version=$(VERSION)
AGENT_ARCHES   := amd64 arm64
RELEASE_OSES   := linux darwin

.PHONY: dev serve wheel test busy-test test-dynalite nag-deps dynalite-deps browser-deps shellcheck-deps build build-arm64 build-amd64 bench bench-capacity lint synth deploy release release-fixtures clean

# The CLI for this machine, built as `go run ./cmd/fleetq` builds it: make dev and make serve run it, and
# so do the README's commands, with no second compile and with fleetq's own exit codes. go run compiles a
# main package without debug information, which no go build flag asks for, and records its build flags
# in the binary (so also in its compile); -exec cp hands the binary go run built to cp instead of running
# it, so a go run ./cmd/fleetq after make dev finds every package, main included, compiled. The binary says
# version dev, as go run's do; make build's bin/fleetq is stamped (FLEETQ_CLI).
DEV_CLI    = mkdir -p bin && $(GO) run -exec cp ./cmd/fleetq bin/fleetq
FLEETQ_CLI = $(GO) build -ldflags "$(LDFLAGS)" -o bin/fleetq ./cmd/fleetq

## dev: build bin/fleetq, then the demo on the local stack: a burst of jobs on an empty fleet, scaled 0 → N → 0 (about a minute)
dev:
	@echo "build bin/fleetq"
	@$(DEV_CLI)
	bin/fleetq dev --demo $(ARGS)

## serve: build bin/fleetq, then the local stack, kept running (embedded AWS APIs, the API, dispatch, scaler,
## local fleet; ARGS=--no-local-fleet for workers started by hand); its state is in memory, lost when it stops
serve:
	@echo "build bin/fleetq"
	@$(DEV_CLI)
	bin/fleetq dev $(ARGS)

## wheel: the Python client's wheel, dist/fleetq-<version>-py3-none-any.whl, built with Python's standard library
## alone (clients/python/build_wheel.py: no setuptools, no network); pip install --no-index installs it
wheel:
	python3 clients/python/build_wheel.py --out dist

## test: go vet, then every test, integration tests included, under the race detector (RACE, the one
## build configuration above): cdk-nag's rule packs on the synthesized templates (npm packages from
## scripts/nag's lockfile), the console in Chromium, the Python client; beside them test-dynalite (its
## output follows theirs). The soak runs once: at full size in test-dynalite, or, without dynalite, at its
## default size in the -race run.
## go test's own vet checks are off: go vet ./... has just run them all.
test: nag-deps browser-deps dynalite-deps shellcheck-deps
	$(GO) vet $(RACE) ./...
	@log=$$(mktemp); $(MAKE) --no-print-directory test-dynalite >"$$log" 2>&1 & dyn=$$!; \
	skip=; if [ -f $(DYNALITE_STAMP) ]; then skip='-skip=^TestSoakNothingLostUnderFaults$$'; fi; \
	$(GO) test $(RACE) -vet=off -count=1 -timeout 30m $$skip ./...; tests=$$?; \
	wait $$dyn; dynalite=$$?; cat "$$log"; rm -f "$$log"; \
	if [ $$tests != 0 ]; then echo "make test: the tests failed"; fi; \
	if [ $$dynalite != 0 ]; then echo "make test: test-dynalite failed"; fi; \
	[ $$tests = 0 ] && [ $$dynalite = 0 ]

DYNALITE_STAMP := scripts/dynalite/node_modules/.package-lock.json

SOAK_JOBS    ?= 500
SOAK_WORKERS ?= 50

## test-dynalite: the store and API suites once more, against dynalite (a second implementation of the DynamoDB
## API, from scripts/dynalite's lockfile, its transactions added by scripts/dynalite/transact.js), -short; beside them the soak
## at full size (SOAK_JOBS jobs, SOAK_WORKERS workers, faults on every AWS API) on dynalite, printing its figures
## (each test process starts its own dynalite; the suites' output follows the soak's)
test-dynalite: dynalite-deps
	@if [ -f $(DYNALITE_STAMP) ]; then \
		echo "the store and API suites, and the soak ($(SOAK_JOBS) jobs, $(SOAK_WORKERS) workers), against dynalite"; \
		log=$$(mktemp); FLEETQ_TEST_DYNALITE=1 $(GO) test $(RACE) -vet=off -count=1 -short ./pkg/aws/store/ ./pkg/service/api/ >"$$log" 2>&1 & suites=$$!; \
		FLEETQ_TEST_DYNALITE=1 FLEETQ_SOAK_JOBS=$(SOAK_JOBS) FLEETQ_SOAK_WORKERS=$(SOAK_WORKERS) \
			$(GO) test $(RACE) -vet=off -count=1 -v -timeout 15m -run TestSoakNothingLostUnderFaults ./pkg/local/soak/; soak=$$?; \
		wait $$suites; ok=$$?; cat "$$log"; rm -f "$$log"; [ $$soak = 0 ] && [ $$ok = 0 ]; \
	elif $(ON_CI); then echo "dynalite not installed (no npm): under CI the dynalite run must happen"; exit 1; \
	else echo "dynalite not installed (no npm): the dynalite run is skipped"; fi

## dynalite-deps: scripts/dynalite's npm packages from its lockfile, when missing or stale; skipped without npm
dynalite-deps: $(DYNALITE_STAMP)
$(DYNALITE_STAMP): scripts/dynalite/package-lock.json
	@if command -v npm >/dev/null; then cd scripts/dynalite && npm ci --no-audit --no-fund; \
	elif $(ON_CI); then echo "npm not found: under CI the dynalite tests must run"; exit 1; \
	else echo "npm not found: the dynalite tests will be skipped"; fi

NAG_STAMP := scripts/nag/node_modules/.package-lock.json

## nag-deps: scripts/nag's npm packages (cdk-nag, aws-cdk-lib), from its lockfile, when missing or stale;
## skipped without npm (infra's nag test then skips and says why)
nag-deps: $(NAG_STAMP)
$(NAG_STAMP): scripts/nag/package-lock.json
	@if command -v npm >/dev/null; then cd scripts/nag && npm ci --no-audit --no-fund; \
	elif $(ON_CI); then echo "npm not found: under CI the cdk-nag test must run"; exit 1; \
	else echo "npm not found: the cdk-nag test will be skipped"; fi

## browser-deps: Debian's chromium for the operator console's browser test (pkg/service/console),
## installed with apt-get when no Chromium is on PATH and we are root; otherwise the test skips and says why
BROWSERS := chromium chromium-browser google-chrome google-chrome-stable
browser-deps:
	@for b in $(BROWSERS); do if command -v $$b >/dev/null; then exit 0; fi; done; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing chromium for the console's browser test"; \
		export DEBIAN_FRONTEND=noninteractive; (apt-get install -y --no-install-recommends chromium || (apt-get update && apt-get install -y --no-install-recommends chromium)) >/dev/null || exit 1; \
	elif $(ON_CI); then echo "no Chromium and no root apt-get: under CI the console's browser test must run"; exit 1; \
	else echo "no Chromium and no root apt-get: the console's browser test will be skipped"; fi

## shellcheck-deps: Debian's shellcheck for the worker image's install scripts (infra/image), installed
## with apt-get when missing and we are root; otherwise the test skips (and fails under CI=true)
shellcheck-deps:
	@if command -v shellcheck >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing shellcheck for the image scripts' test"; \
		export DEBIAN_FRONTEND=noninteractive; (apt-get install -y --no-install-recommends shellcheck || (apt-get update && apt-get install -y --no-install-recommends shellcheck)) >/dev/null || exit 1; \
	elif $(ON_CI); then echo "no shellcheck and no root apt-get: under CI the image scripts' shellcheck test must run"; exit 1; \
	else echo "no shellcheck and no root apt-get: the image scripts' shellcheck test will be skipped"; fi

## build: one bootstrap per Lambda function (linux/arm64) in bin/<function>/, the agent
## (fleetq, linux/amd64 and linux/arm64) in bin/agent/<arch>/ for the stack to ship, plus the CLI.
## The agent is cmd/fleetq built with the agent tag: its worker and version commands only, none
## of the control plane, the dev stack or the simulator (docs/benchmarks.md, "Binary sizes").
## The arm64 and the amd64 binaries build side by side (-j2): each architecture compiles the SDK
## once, its functions in one go build, and the two compiles overlap
build:
	@$(MAKE) --no-print-directory -j2 build-arm64 build-amd64

# Every Lambda function in one go build (bin/.functions/<function>), then the arm64 agent.
build-arm64:
	@echo "build bin/{$(shell echo $(FUNCTIONS) | tr ' ' ,)}/bootstrap and bin/agent/arm64/fleetq"
	@rm -rf bin/.functions && mkdir -p bin/.functions
	@CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags "$(LDFLAGS)" -o bin/.functions/ ./functions/...
	@for f in $(FUNCTIONS); do mkdir -p bin/$$f && mv bin/.functions/$$f bin/$$f/bootstrap || exit 1; done; rmdir bin/.functions
	@CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags agent -trimpath -ldflags "$(LDFLAGS)" -o bin/agent/arm64/fleetq ./cmd/fleetq

# The amd64 agent, then the CLI for this machine (the agent's compiled packages reused when it is linux/amd64).
build-amd64:
	@echo "build bin/agent/amd64/fleetq and bin/fleetq"
	@CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -tags agent -trimpath -ldflags "$(LDFLAGS)" -o bin/agent/amd64/fleetq ./cmd/fleetq
	@$(FLEETQ_CLI)

## release: versioned fleetq binaries for linux and darwin on amd64 and arm64 in dist/, with SHA256SUMS;
## at a release tag vX.Y.Z, the Python client's __version__ must be X.Y.Z, and the tag's commit is
## recorded in releases.txt (the previous release the upgrade tests build)
release:
	@case "$(VERSION)" in *-*) ;; v*) py=$$(sed -n 's/^__version__ = "\(.*\)"$$/\1/p' clients/python/fleetq/__init__.py); \
		if [ "v$$py" != "$(VERSION)" ]; then echo "release $(VERSION): the Python client says $$py (clients/python/fleetq/__init__.py)"; exit 1; fi;; esac
	rm -rf dist && mkdir -p dist
	@for os in $(RELEASE_OSES); do for a in $(AGENT_ARCHES); do \
		echo "build dist/fleetq-$(VERSION)-$$os-$$a"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$a $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o dist/fleetq-$(VERSION)-$$os-$$a ./cmd/fleetq || exit 1; \
	done; done
	cd dist && sha256sum fleetq-* > SHA256SUMS && cat SHA256SUMS
	@case "$(VERSION)" in *-*) ;; v*) grep -q '^$(VERSION) ' releases.txt || echo "$(VERSION) $$(git rev-parse HEAD)" >> releases.txt; \
		grep '^$(VERSION) ' releases.txt;; esac

## release-fixtures: record what release $(VERSION) (vX.Y.Z) leaves behind for the next releases' compatibility
## tests, each in a new testdata/release-$(VERSION)/: its store's items (pkg/aws/store), its agent's protocol
## transcript (pkg/domain/wire) and its templates' stateful shapes (infra); docs/deploy.md, "Releasing"
release-fixtures:
	FLEETQ_RELEASE_FIXTURES=$(VERSION) $(GO) test -count=1 -run '^TestWriteReleaseFixtures$$' ./pkg/aws/store/
	FLEETQ_RELEASE_FIXTURES=$(VERSION) $(GO) test -count=1 -run '^TestPreviousAgentTranscriptReplays$$' ./pkg/service/api/
	FLEETQ_RELEASE_FIXTURES=$(VERSION) $(GO) test -count=1 -run '^TestTemplateUpgradesInPlace$$' ./infra/

## synth: build, then the CDK cloud assembly of $(STAGE) in cdk.out/, offline (no AWS account needed); prints the agent assets and their SHA-256
synth: build
	$(GO) run ./infra/cdk -stage $(STAGE) -out cdk.out

## deploy: build the functions, then deploy $(STAGE) with the CDK CLI (needs AWS credentials and npx)
deploy: build
	npx --yes aws-cdk@2 deploy -c stage=$(STAGE) --require-approval broadening

## busy-test: the tests of BUSY_PKGS (those that wait on loops driven by a fake clock, and the store's),
## BUSY_COUNT times each, in make test's build configuration, beside BUSY_LOOPS CPU-bound loops at low
## priority, as on a busy machine; RUN narrows it to the tests it matches (go test -run). The loops end
## with the run. Not part of make test: see docs/testing.md, "On a busy machine".
BUSY_PKGS  ?= ./pkg/local/devstack/ ./pkg/service/agent/ ./pkg/service/scaler/ ./pkg/aws/store/
BUSY_COUNT ?= 20
BUSY_LOOPS ?= 2
busy-test:
	@pids=; for i in $$(seq $(BUSY_LOOPS)); do nice -n 10 sh -c 'while :; do :; done' & pids="$$pids $$!"; done; \
	trap 'kill $$pids' EXIT INT TERM; \
	$(GO) test $(RACE) -vet=off -count=$(BUSY_COUNT) -timeout 3h $(if $(RUN),-run '$(RUN)') $(BUSY_PKGS)

## bench: the benchmarks recorded in docs/benchmarks.md
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

## bench-capacity: the store's benchmarks under DynamoDB's capacity model, each once (docs/benchmarks.md,
## "A fleet of 10,000 workers on a lagging index"); CAPACITY narrows them (go test -bench), e.g.
## make bench-capacity CAPACITY='CapacityFleet$'
CAPACITY ?= BenchmarkCapacity
bench-capacity:
	$(GO) test -run '^$$' -bench '$(CAPACITY)' -benchtime 1x -timeout 3h ./pkg/aws/store/

## lint: go vet (in the tests' build configuration, so make test reuses its compile) and gofmt
lint:
	$(GO) vet $(RACE) ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

clean:
	rm -rf bin cdk.out dist
