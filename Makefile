# fleetq — see README.md. Every target sets itself up: Go fetches modules on
# first use; nothing else needs installing.

GO        ?= go
FUNCTIONS := $(notdir $(wildcard functions/*))
STAGE     ?= dev
BENCHTIME ?= 1s

.PHONY: dev serve test build bench lint synth deploy clean

## dev: the demo on the local stack: a burst of jobs on an empty fleet, scaled 0 → N → 0 (about a minute)
dev:
	$(GO) run ./cmd/fleetq dev --demo $(ARGS)

## serve: the local stack, kept running (embedded AWS APIs, the API, dispatch, scaler, local fleet)
serve:
	$(GO) run ./cmd/fleetq dev $(ARGS)

## test: every test, race detector on, integration tests included
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

## build: one bootstrap per Lambda function (linux/arm64) in bin/<function>/, plus the CLI
build:
	@for f in $(FUNCTIONS); do \
		echo "build bin/$$f/bootstrap"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags "-s -w" -o bin/$$f/bootstrap ./functions/$$f || exit 1; \
	done
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o bin/fleetq ./cmd/fleetq

## synth: the CDK cloud assembly of $(STAGE) in cdk.out/, offline (no AWS account needed)
synth:
	$(GO) run ./infra/cdk -stage $(STAGE) -out cdk.out

## deploy: build the functions, then deploy $(STAGE) with the CDK CLI (needs AWS credentials and npx)
deploy: build
	npx --yes aws-cdk@2 deploy -c stage=$(STAGE) --require-approval broadening

## bench: the benchmarks recorded in docs/benchmarks.md
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

## lint: go vet and gofmt
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

clean:
	rm -rf bin cdk.out
