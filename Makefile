# The two commands a newcomer needs are `make run` and `make test` (README.md).
# Both install and start what is missing: Redis and ClickHouse from Debian's packages,
# as plain processes with their data under .data/.

GO       ?= go
BIN      := bin/svc
DATA     ?= $(CURDIR)/.data
export SVC_DATA_DIR ?= $(DATA)
# Short fuzz run inside make test, as a count of executions (about 10 s here). A count,
# not a duration: with a duration Go's fuzz coordinator can race its own deadline and fail
# with a bare "context deadline exceeded" having found nothing (it did so in CI on a
# loaded machine). Raise it for a real fuzzing session, e.g. FUZZTIME=2000000x.
FUZZTIME ?= 40000x
# Package list for go test; override to run one package.
PKGS     ?= ./...

.PHONY: all build run stop test test-scale bench lint services services-down fuzz clean chdb app-assets

all: build

# Go is the one thing these targets do not install (Debian's golang-go is 1.19, too old to
# read go.mod): the machine brings it (go.dev/dl, /usr/local/go); 1.21 or newer fetches
# go.mod's toolchain itself through the module proxy.
build:
	@command -v $(GO) >/dev/null || { echo "make: no Go toolchain ($(GO)): install Go 1.21 or newer from https://go.dev/dl (it fetches the version go.mod names)" >&2; exit 1; }
	$(GO) build -o $(BIN) .

services:
	deploy/local/services.sh up

# app-assets: the application's front-end libraries from the npm registry, at the
# versions app/npm/package-lock.json pins: uPlot copied into app/static (embedded in the
# binary), axe-core into app/testdata (the browser test's accessibility check). The copies are committed, so `go build` needs neither npm nor this target; run
# it after changing app/npm/package.json (then commit the lock file and the copies).
app-assets:
	cd app/npm && npm ci --ignore-scripts --no-audit --no-fund
	cp app/npm/node_modules/uplot/dist/uPlot.iife.min.js app/npm/node_modules/uplot/dist/uPlot.min.css app/static/
	cp app/npm/node_modules/axe-core/axe.min.js app/testdata/

services-down:
	deploy/local/services.sh down

# run: services, schema, showroom seed, every role with the embedded broker, then a
# working key and a curl line to try.
run: build services
	deploy/local/run.sh

# stop: the svc dev that `make run` started (Redis and ClickHouse keep running; see
# services-down).
stop:
	@if [ -f $(SVC_DATA_DIR)/svc-dev.pid ]; then kill $$(cat $(SVC_DATA_DIR)/svc-dev.pid) 2>/dev/null || true; rm -f $(SVC_DATA_DIR)/svc-dev.pid; fi

# The tests run the local ClickHouse servers at normal CPU priority (0), not in the idle
# group `make run` and `make bench` use: there, on a machine the edge shares, ClickHouse
# yields to request handling, but a test waits on ClickHouse while other test binaries
# compile and spin, and an idle-group ClickHouse gets no CPU then (schema/catalog's tests
# took 111 s instead of 3 s beside two busy loops). services.sh applies the value to a
# local server already running, also one another checkout started; the next `make run`
# or `make bench` restores 19.
test test-scale: export SVC_CLICKHOUSE_NICE ?= 0

test: build services chdb fmt-check lint-deploy
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 20m -p 2 $(PKGS)
	$(MAKE) --no-print-directory fuzz

# test-scale: the tests over the distributed engines. Starts a local Redis Cluster (3
# masters, 3 replicas) and ClickHouse cluster (2 shards x 2 replicas, ZooKeeper) as plain
# processes, runs the Redis-backed suites against the Redis Cluster and the multi-process
# kill test over both, and stops the clusters again (SCALE_KEEP=1 keeps them running).
# See deploy/local/test-scale.sh.
test-scale: build services
	GO=$(GO) deploy/local/test-scale.sh

# chdb: ClickHouse 26.x in-process (chDB, from npm) for the test that runs the service's
# statements on it and on the local 18.16 server (e2e/chdb_test.go, schema/chtest/README.md):
# node and npm from Debian's packages when missing, then the packages pinned in
# schema/chtest/chdb/ under $(SVC_DATA_DIR)/chdb. `npm install` with the lock file, not
# `npm ci`: the registry reachable here serves no macOS or arm64 build of chDB's optional
# platform packages, so the lock cannot list them and `npm ci` refuses it; the lock must
# come out unchanged, so every version is the pinned one.
CHDB_DIR := $(SVC_DATA_DIR)/chdb
chdb: $(CHDB_DIR)/node_modules/.svc-installed

$(CHDB_DIR)/node_modules/.svc-installed: schema/chtest/chdb/package.json schema/chtest/chdb/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "chdb: installing node and npm from Debian's packages"; \
	  s=; [ "$$(id -u)" -ne 0 ] && s=sudo; $$s apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$s apt-get install -y -qq nodejs npm >/dev/null; }
	mkdir -p $(CHDB_DIR)
	cp schema/chtest/chdb/package.json schema/chtest/chdb/package-lock.json $(CHDB_DIR)/
	cd $(CHDB_DIR) && npm install --no-audit --no-fund --ignore-scripts --loglevel=error
	cmp -s schema/chtest/chdb/package-lock.json $(CHDB_DIR)/package-lock.json || \
	  { echo "chdb: npm changed the lock file: the pinned versions were not installed"; exit 1; }
	touch $@

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParseBatch$$' -fuzztime $(FUZZTIME) ./ingest/

bench: build services
	bench/run-standard.sh

lint: lint-deploy fmt-check
	$(GO) vet ./...

# fmt-check: every Go file as gofmt writes it (part of test and lint).
.PHONY: fmt-check
fmt-check:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }

# lint-deploy: every file under deploy/ through real validators (promtool, kubeconform,
# haproxy -c, go test ./deploy/...); installs them when missing (part of test and lint).
# See deploy/lint.sh.
.PHONY: lint-deploy
lint-deploy:
	GO=$(GO) deploy/lint.sh

clean:
	rm -rf bin
