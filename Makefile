# distrl: every target sets up .venv first (once, or again when the pins change).
#   make test    set up, lint (ruff), then every test but the Ray cluster ones
#   make test-cluster  only the Ray cluster tests (a 3-node Ray cluster on this machine)
#   make test-all  both, as CI runs them (.ci/run)
#   make run     set up, then train the default experiment (DQN, 4x4, 2 actors, local_mp)
#   make bench   set up, then run the benchmarks
#   make results set up, then rewrite every results table of README.md and docs/ from
#                benchmarks/results/*.csv (docs/results.md whole, with its curves)
# Python 3.10 is found from $PYTHON, then python3.10 on PATH, then pyenv.

VENV  ?= .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARGS  ?=
# The installer: uv puts the 114 pinned wheels in place, byte-compiled, in half of pip's
# time (most of a fresh clone's setup). Byte-compiled at install: with
# PYTHONDONTWRITEBYTECODE set (as on CI here) every node process would compile TF and JAX
# from source again. Pinned like every package; pip is the fallback.
UV    := uv==0.13.9
# Test processes at once (pytest-xdist): most tests wait on node processes, so more than the
# cores. Each test file runs on one of them, in order: one Ray cluster at a time (its head's
# /tmp/ray is this machine's), module fixtures made once.
JOBS  ?= 3
PYTEST := $(PY) -m pytest -n $(JOBS) --dist loadfile

.PHONY: setup lint test test-cluster test-all test-fast run bench results clean

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml .ci/find_python.sh
	@set -e; py="$$(bash .ci/find_python.sh)"; \
	echo "distrl: creating $(VENV) with $$py"; \
	rm -rf $(VENV); "$$py" -m venv $(VENV); \
	if $(PY) -m pip install -q --disable-pip-version-check $(UV) && \
	   $(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -r requirements.lock; then :; \
	else \
	  echo "distrl: $(UV) did not install; installing with pip (about a minute)"; \
	  $(PY) -m pip install -q --disable-pip-version-check -r requirements.lock; \
	fi; \
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .; \
	touch $(STAMP)

# ruff's lint rules and formatting (pyproject.toml), then the whole suite.
lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

# The Ray cluster runs (about as long as the rest together, one file that cannot be
# split: one cluster at a time) are their own target, which CI runs too.
test: lint
	$(PYTEST) -m "not cluster" $(ARGS)

test-cluster: setup
	$(PY) -m pytest -m cluster $(ARGS)

test-all: test test-cluster

# Everything but the multi-process (local_mp and Ray) runs.
test-fast: setup
	$(PYTEST) -m "not slow and not cluster" $(ARGS)

run: setup
	$(PY) launch/train.py --config=configs/dqn.py --lp_launch_type=local_mp $(ARGS)

bench: setup
	$(PY) benchmarks/run.py $(ARGS)

# No figure in the docs' results tables is typed by hand: they are written from the rows
# (tests/test_docs.py fails on a committed table that differs from what this writes).
results: setup
	$(PY) -m benchmarks.results_tables $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
