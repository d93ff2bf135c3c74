GO ?= go
GOFMT ?= $(shell $(GO) env GOROOT)/bin/gofmt
HERALD_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test?sslmode=disable
export HERALD_TEST_DATABASE_URL

.PHONY: help build test vet run fmt bench chaos fuzz screenshots image

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

# VERSION names the release in `herald version` (empty: "devel"); the
# commit comes from the build's own VCS stamp.
VERSION ?=
VERSION_LDFLAGS = $(if $(VERSION),-ldflags "-X github.com/heraldhooks/herald/internal/cli.buildVersion=$(VERSION)")
build: ## Build bin/herald (VERSION=v1.2.3 names the release in herald version)
	$(GO) build -buildvcs=auto $(VERSION_LDFLAGS) -o bin/herald ./cmd/herald

# The container image: a static binary (CGO off: Herald's SQLite is pure
# Go) with -trimpath, and the host's CA bundle, staged in IMAGE_CONTEXT and
# packaged FROM scratch by the Dockerfile (no base image to pull).
IMAGE ?= heraldhooks/herald:latest
IMAGE_CONTEXT ?= bin/image
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt
# IMAGE_BINARY: package this static binary instead of building one (the
# tests pass the one they built the same way).
IMAGE_BINARY ?=
image: ## Build the container image IMAGE (heraldhooks/herald:latest): a static bin/image/herald, FROM scratch, non-root
	rm -rf $(IMAGE_CONTEXT) && mkdir -p $(IMAGE_CONTEXT)/data $(IMAGE_CONTEXT)/tmp
ifeq ($(IMAGE_BINARY),)
	CGO_ENABLED=0 $(GO) build -trimpath -o $(IMAGE_CONTEXT)/herald ./cmd/herald
else
	cp $(IMAGE_BINARY) $(IMAGE_CONTEXT)/herald
endif
	cp $(CA_BUNDLE) $(IMAGE_CONTEXT)/ca-certificates.crt
	docker build -f Dockerfile -t $(IMAGE) $(IMAGE_CONTEXT)

vet: ## Run go vet, and check that gofmt would change nothing
	$(GO) vet ./...
	@unformatted="$$($(GOFMT) -l $$(git ls-files '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi

# -race turns on the compiler's checkptr instrumentation in every package.
# In modernc.org's SQLite, C translated to Go with unsafe pointer arithmetic
# throughout, those checks were a third of the SQLite tests' CPU; they test
# that library's translation, not Herald. So they are off in modernc.org's
# packages. And modernc.org/sqlite/lib, SQLite itself, is compiled without
# race instrumentation: its memory accesses were half of what was left, run
# by one goroutine at a time per connection. Its locks are sync.Mutex,
# whose edges the race detector still sees; modernc.org/libc stays
# instrumented (without it, the detector lost edges and reported races in
# encoding/json that are not there). Every Herald package keeps -race and
# checkptr; a deliberate race in a SQLite store test is still reported.
RACEFLAGS = -race -gcflags='modernc.org/...=-d=checkptr=0' -gcflags='modernc.org/sqlite/lib=-d=checkptr=0 -race=false'

test: vet ## Run everything: vet, unit, store conformance (SQLite and PostgreSQL), end-to-end, with -race
	$(GO) test $(RACEFLAGS) -count=1 -timeout 15m ./...

# Each fuzz target as package:Name; go test -fuzz takes one target of one
# package per run.
FUZZ_TARGETS = \
	./verify:FuzzVerify \
	./internal/api:FuzzEventRequest \
	./internal/api:FuzzEventBatch \
	./internal/api:FuzzValidateURL \
	./internal/api:FuzzValidateHeaders \
	./internal/api:FuzzCursor \
	.:FuzzMatchEventType \
	./internal/sender:FuzzParseRetryAfter \
	./internal/sender:FuzzCheckHostForm
FUZZTIME ?= 1m
fuzz: ## Run each fuzz target for FUZZTIME (1m), one after the other; a failing input is written under the package's testdata/fuzz/<Name>/ (make test replays them)
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

bench: ## Run the Go benchmarks of the hot paths (signing, sending, ingest through the store and the API, the event type check, claim, outcome writes on SQLite and PostgreSQL, idle latency, the dashboard's pages); on a quiet machine
	$(GO) test -run '^$$' -bench . -benchtime 2s ./internal/sender ./internal/store/sqlitestore ./internal/store/pgstore ./internal/schema ./internal/api ./internal/e2e ./internal/web

screenshots: ## Write a PNG of each dashboard and portal page to docs/ (drives /usr/bin/chromium, headless, through the browser test)
	mkdir -p docs
	HERALD_SCREENSHOTS=$(CURDIR)/docs $(GO) test -count=1 -run '^(TestDashboardInABrowser|TestPortalInABrowser|TestPortalFramedInABrowser|TestPortalSettingsInABrowser)$$' ./internal/e2e

run: ## Run herald serve on ./herald.db
	$(GO) run ./cmd/herald serve

fmt: ## Format the code
	gofmt -w $$(git ls-files '*.go')

DURATION ?= 1m
chaos: build ## Run the fault harness on SQLite and on PostgreSQL with a synchronous standby it fails over to (DURATION=10m for a long run; CHAOS_FLAGS="--seed N --json" and more)
	$(GO) run ./cmd/herald-chaos --herald bin/herald --duration $(DURATION) $(CHAOS_FLAGS)
