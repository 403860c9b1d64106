# The two entry points of the README. Both create/refresh the environment first (tools/setup_env.sh;
# the first run builds mmcv from source, about 10-15 minutes on 2 cores; later runs take seconds).
# VENV may be relative (to the directory make runs in, also with make -C) or absolute.
VENV ?= .venv
VENV_ABS := $(abspath $(VENV))
PY := $(VENV_ABS)/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo fullsize-demo test

setup:
	VENV=$(VENV_ABS) bash tools/setup_env.sh

demo: setup
	$(PY) tools/run_embedded.py

fullsize-demo: setup
	$(PY) tools/fullsize_demo.py

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)
