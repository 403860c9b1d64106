# The two entry points of the README. Both create/refresh the environment first (tools/setup/setup_env.sh;
# the first run builds the stack and mmcv from source, 17-29 minutes on 2 cores; later runs take seconds).
# STACK picks the OpenMMLab line (requirements/<STACK>.txt: official or onedl; the default is set in
# tools/setup/setup_env.sh); each line has its venv: .venv for the default line, .venv-<STACK> for another.
# VENV may be relative (to the directory make runs in, also with make -C) or absolute.
DEFAULT_STACK := $(shell sed -n 's/^DEFAULT_STACK=//p' $(dir $(abspath $(lastword $(MAKEFILE_LIST))))tools/setup/setup_env.sh)
STACK ?= $(DEFAULT_STACK)
VENV ?= $(if $(filter $(DEFAULT_STACK),$(STACK)),.venv,.venv-$(STACK))
VENV_ABS := $(abspath $(VENV))
PY := $(VENV_ABS)/bin/python
PYTEST_ARGS ?=
# mutation: mutmut's worker processes (one per core by default) and optional mutant name globs,
# e.g. MUTANTS='inline_backbones.checkpoints.loading*' to run one file.
MUTATION_JOBS ?= $(shell nproc)
MUTANTS ?=

# The environment without OpenMMLab (the timm / transformers route of docs/installation.md): its venv and the
# suite's tests that do not touch OpenMMLab there (the others are skipped or not collected, with the reason).
CORE_VENV ?= .venv-core
CORE_VENV_ABS := $(abspath $(CORE_VENV))

.PHONY: setup demo fullsize-demo test lint mutation setup-core test-core

setup:
	STACK=$(STACK) VENV=$(VENV_ABS) bash tools/setup/setup_env.sh

demo: setup
	$(PY) demo/run_embedded.py

fullsize-demo: setup
	$(PY) demo/fullsize_demo.py

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

setup-core:
	VENV=$(CORE_VENV_ABS) bash tools/setup/setup_core_env.sh

test-core: setup-core
	$(CORE_VENV_ABS)/bin/python -m pytest $(PYTEST_ARGS)

# ruff over the whole tree (configuration in pyproject.toml [tool.ruff]); CI runs it before the tests.
lint: setup
	$(VENV_ABS)/bin/ruff check .

# Mutation testing of the files in pyproject.toml [tool.mutmut] only_mutate against the fast tests
# (pytest -m 'not slow or mutation'); configuration in pyproject.toml [tool.mutmut], working copy and results in
# mutants/ (results are cached there: a second run only tries new or named mutants).
mutation: setup
	$(VENV_ABS)/bin/mutmut run --max-children $(MUTATION_JOBS) $(MUTANTS)
	$(VENV_ABS)/bin/mutmut results
