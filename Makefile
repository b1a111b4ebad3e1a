# distrl: every target sets up .venv first (once, or again when the pins change).
#   make test    set up, lint (ruff), then every test but the Ray cluster ones
#   make test-cluster  only the Ray cluster tests (a 3-node Ray cluster on this machine)
#   make test-all  both, as CI runs them (.ci/run)
#   make run     set up, then train the default experiment (DQN, 4x4, 2 actors, local_mp)
#   make bench   set up, then run the benchmarks
#   make results set up, then rewrite every results table of README.md and docs/ from
#                benchmarks/results/*.csv (docs/results.md whole, with its curves)
#   make setup-core  the core on a current stack: .venv-core (Python 3.12, JAX 0.11, no
#                Reverb, Launchpad or TensorFlow) from requirements-core.lock; CORE_EXTRA=tpu
#                or gpu adds pyproject.toml's extra of that name (the accelerator's jax)
#   make test-core   set that up, then the core's test files (CORE_TESTS) there
# Python 3.10 is found from $PYTHON, then python3.10 on PATH, then pyenv; the core's 3.12
# from $PYTHON_CORE, then python3.12 on PATH, then pyenv (.ci/find_python.sh).

VENV  ?= .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARGS  ?=
# The installer: uv puts the 114 pinned wheels in place, byte-compiled, in half of pip's
# time (most of a fresh clone's setup). Byte-compiled at install: with
# PYTHONDONTWRITEBYTECODE set (as on CI here) every node process would compile TF and JAX
# from source again. Pinned like every package; pip is the fallback.
UV    := uv==0.13.9
# Test processes at once (pytest-xdist): "auto" is 1.5 a core free when the suite starts (3
# on an idle 2-core machine: most tests wait on node processes), fewer beside busy processes
# (tests/workers.py). Each test file runs on one of them, in order: one Ray cluster at a
# time (its head's /tmp/ray is this machine's), module fixtures made once.
JOBS  ?= auto
PYTEST := $(PY) -m pytest -n $(JOBS) --dist loadfile

.PHONY: setup lint test test-cluster test-all test-fast run bench results clean setup-core \
	test-core

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

# The core on a current stack: a second venv, its own lock (requirements-core.lock, made
# from requirements-core.in), distrl itself installed without its dependencies and past its
# metadata's Python 3.10 (which is the distributed stack's).
CORE_VENV  ?= .venv-core
CORE_PY    := $(CORE_VENV)/bin/python
CORE_EXTRA ?=
CORE_STAMP := $(CORE_VENV)/.installed-$(or $(CORE_EXTRA),cpu)
# The test files of the core, the modules `distrl.CORE` names (they import without Reverb,
# Launchpad, Courier and TensorFlow: tests/test_core.py): envs, networks, agents (their
# configs, updates and feed), acting, the pipelines' single-process side, the config,
# distrl.local.
CORE_TESTS := tests/test_core.py tests/test_env.py tests/test_env_interface.py \
	tests/test_exact.py tests/test_spaces.py tests/test_observation.py tests/test_host_env.py \
	tests/test_gymnax_env.py tests/test_networks.py tests/test_agents_actor_critic.py \
	tests/test_agents_config.py tests/test_agents_continuous.py tests/test_agents_dqn.py \
	tests/test_agents_episodes.py tests/test_agents_nstep.py tests/test_agents_ppo.py \
	tests/test_agents_r2d2.py tests/test_agents_update_many.py tests/test_feed.py \
	tests/test_rollout.py tests/test_evaluation.py tests/test_packing.py \
	tests/test_pipelines.py tests/test_config.py tests/test_compile_cache.py tests/test_local.py

setup-core: $(CORE_STAMP)

$(CORE_STAMP): requirements-core.lock pyproject.toml .ci/find_python.sh .ci/extra.py
	@set -e; py="$$(bash .ci/find_python.sh core)"; \
	echo "distrl: creating $(CORE_VENV) with $$py$(if $(CORE_EXTRA), and the $(CORE_EXTRA) extra)"; \
	rm -rf $(CORE_VENV); "$$py" -m venv $(CORE_VENV); \
	$(CORE_PY) -m pip install -q --disable-pip-version-check $(UV); \
	$(CORE_VENV)/bin/uv pip install -q --compile-bytecode --python $(CORE_PY) -r requirements-core.lock; \
	if [ -n "$(CORE_EXTRA)" ]; then \
	  extra="$$($(CORE_PY) .ci/extra.py $(CORE_EXTRA))"; \
	  $(CORE_VENV)/bin/uv pip install -q --python $(CORE_PY) -c requirements-core.lock $$extra; \
	fi; \
	$(CORE_PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
	  --ignore-requires-python -e .; \
	touch $(CORE_STAMP)

# Its tests compile and train (none waits on a node process): a worker per core.
CORE_JOBS ?= 2
test-core: setup-core
	$(CORE_PY) -m pytest -n $(CORE_JOBS) --dist loadfile $(CORE_TESTS) $(ARGS)

clean:
	rm -rf $(VENV) $(CORE_VENV) .pytest_cache
