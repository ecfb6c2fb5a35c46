# toolgate — build, test, demo, benchmark.
# `make demo` and `make test` are the quick start; both work on a fresh machine
# with Go installed.

GO        ?= go
PKGS      := ./...
# Nested modules hold tests whose dependencies the product does not need
# (kustomize and the Kubernetes API types): each has its own go.mod with a
# replace to the root, so `go list -deps ./cmd/toolgate` and the root go.mod
# never carry them. `make test`, lint and check run them too.
NESTED    := deploy/k8s sink/dashboard/browsertest
BIN       := bin/toolgate
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME  ?= 20s
BENCHTIME ?= 3s
BENCHCOUNT ?= 5
# TESTP packages are tested at once. Many tests wait on processes
# (ClickHouse, ZooKeeper, Redis, sidecars), so one more than the two
# cores fills the idle time: the suite took 9m38s at -p 2 and 7m42s at
# -p 3 on a 2-core machine (2026-12-02, docs/performance.md "The test
# suite's time").
TESTP     ?= 3

.PHONY: all build test demo demo-dashboard bench bench-external lint fmt check fuzz wasm-fixtures clean

all: build

build: ## Build the toolgate binary into bin/
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/toolgate

# The tests that run the sidecar as a process use one toolgate binary,
# built here before they start (internal/testutil.ToolgateBinary): built by
# each such package instead, a clean clone compiled toolgate's packages
# again for each, at the same time.
# It builds while scripts/testdeps.sh installs what the tests need.
test: ## Run every test with the race detector (fuzz seeds included); installs the Debian packages tests need when missing
	@set -e; bin=$$(mktemp -d); trap 'rm -rf "$$bin"' EXIT; \
	echo "$(GO) build -o $$bin/toolgate ./cmd/toolgate &"; $(GO) build -o "$$bin/toolgate" ./cmd/toolgate & build=$$!; \
	echo "bash scripts/testdeps.sh"; bash scripts/testdeps.sh; \
	wait $$build; \
	export TOOLGATE_TEST_BIN="$$bin/toolgate"; \
	echo "$(GO) test -race -count=1 -p $(TESTP) -timeout 15m $(PKGS)"; \
	$(GO) test -race -count=1 -p $(TESTP) -timeout 15m $(PKGS); \
	for m in $(NESTED); do (cd $$m && $(GO) test -race -count=1 -timeout 15m ./...); done

demo: ## Run the sidecar in front of the bundled demo tools and play scripted calls (TOOLGATE_DEMO_CLICKHOUSE=host:9000 also fills the dashboard)
	$(GO) run ./cmd/toolgate demo

demo-dashboard: ## The demo, then its events in a private ClickHouse and the failure dashboard until Ctrl-C (needs clickhouse-server)
	$(GO) run ./cmd/toolgate demo --clickhouse local

bench: ## Direct vs through toolgate, one run; policy, schema, spool and ClickHouse costs; the fleet state's (Redis) cost per call; prints the comparison table
	bash scripts/testdeps.sh --bench
	$(GO) test -run '^$$' -bench 'BenchmarkProxy|BenchmarkSinkOverhead' -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./proxy/ | tee bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkEventPath' -benchtime 1x ./proxy/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkPolicyOverhead' -benchtime 1x -count 3 ./proxy/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkAnswerCheck' -benchtime 1x ./proxy/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkScan|BenchmarkRedact' -benchmem ./proxy/detect/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkGuardCheck' -benchmem ./proxy/egress/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkStatus|BenchmarkObserve' -benchmem ./proxy/mcppin/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkRegoDecision|BenchmarkValidate$$' -benchmem -count $(BENCHCOUNT) ./policies/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkClickHouseInsert|BenchmarkSpoolWrite' -benchtime 20x -count 3 ./sink/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkMCP' -benchtime 1s -count $(BENCHCOUNT) ./proxy/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkTracing' -benchtime 2000x -count $(BENCHCOUNT) ./proxy/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkWASMDecision' -benchmem -count $(BENCHCOUNT) ./wasm/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkDashboard' -benchtime 3x -count 3 ./sink/dashboard/ | tee -a bench.out
	$(GO) test -run '^$$' -bench 'BenchmarkAdmitFleet' -benchtime 20000x -count $(BENCHCOUNT) ./policies/budget/ | tee -a bench.out
	$(GO) run ./internal/benchtable < bench.out

bench-external: ## toolgate against direct, nginx, nginx + OPA (Lua asking opa run --server, the same schema and policy, checked to decide alike first), squid, a bare goproxy and a bare Go TCP relay from outside: wrk in its own process, interleaved rounds, medians, CPU per request from /proc (EXTBENCH_FLAGS, e.g. -rounds 3; 5 rounds of 10 s by default, about 14 minutes; BASE=REV also builds toolgate at git revision REV and pairs this tree's build with it round by round)
	bash scripts/testdeps.sh --bench
	@set -e; builds=; \
	if [ -n "$(BASE)" ]; then \
		d=$$(mktemp -d); trap 'git worktree remove --force "$$d/src" 2>/dev/null; rm -rf "$$d"' EXIT; \
		git worktree add -q --detach "$$d/src" "$(BASE)"; \
		echo "building toolgate at $(BASE) and at this tree"; \
		(cd "$$d/src" && $(GO) build -o "$$d/base.toolgate" ./cmd/toolgate); \
		$(GO) build -o "$$d/tree.toolgate" ./cmd/toolgate; \
		builds="-toolgate $(BASE)=$$d/base.toolgate -toolgate tree=$$d/tree.toolgate"; \
	fi; \
	echo "$(GO) run ./internal/extbench $$builds $(EXTBENCH_FLAGS)"; \
	$(GO) run ./internal/extbench $$builds $(EXTBENCH_FLAGS)

lint: ## go vet and staticcheck
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	@set -e; for m in $(NESTED); do (cd $$m && $(GO) vet ./...); done

fmt: ## Format every Go file
	gofmt -w $$(git ls-files '*.go')

check: lint ## Lint, format and tidy; fails when anything would change
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt would change the files above'; exit 1)
	$(GO) mod tidy
	@set -e; for m in $(NESTED); do (cd $$m && $(GO) mod tidy); done
	@git diff --exit-code -- go.mod go.sum $(addsuffix /go.mod,$(NESTED)) $(addsuffix /go.sum,$(NESTED)) || (echo 'go mod tidy changed a go.mod/go.sum'; exit 1)

fuzz: ## Run each fuzz target for FUZZTIME
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

wasm-fixtures: ## Rebuild the WASM policy fixtures in wasm/testdata and the demo's module (Go, WAT with wabt's wat2wasm, Rego through wasm.CompileRego)
	GOOS=wasip1 GOARCH=wasm $(GO) build -trimpath -buildmode=c-shared -ldflags='-s -w' -o wasm/testdata/bench_go.wasm ./wasm/testdata/go
	@set -e; for f in wasm/testdata/wat/*.wat; do \
	  wat2wasm $$f -o wasm/testdata/$$(basename $$f .wat).wasm; done
	$(GO) run ./wasm/internal/genfixtures policies/testdata/bench wasm/testdata/bench_rego.wasm
	wat2wasm internal/demo/policies/label_guard.wat -o internal/demo/policies/label_guard.wasm

clean:
	rm -rf bin bench.out
