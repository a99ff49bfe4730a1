# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each creates .venv (and installs the project into it) when it is missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1

.PHONY: demo demo-envs test test-slow bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch is pinned to the CPU build (torch==2.13.0); a looser pin pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# MARFT on the 2-agent MathChain with the embedded tiny model: held-out accuracy before and after,
# runs/demo/summary.json and runs/demo/curves.png (about 8 minutes on 2 cores).
demo: $(STAMP)
	$(BIN)/marft train --preset demo --overwrite

# Scripted (non-LLM) rollouts over the MATH envs, in seconds.
demo-envs: $(STAMP)
	$(BIN)/python -m marft_envs.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python benchmarks/envs.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
