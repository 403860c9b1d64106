# The two entry points of the README. Both create/refresh the environment first (tools/setup_env.sh;
# the first run builds mmcv from source, about 10-15 minutes on 2 cores; later runs take seconds).
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo fullsize-demo test

setup:
	VENV=$(VENV) bash tools/setup_env.sh

demo: setup
	$(PY) tools/run_embedded.py

fullsize-demo: setup
	$(PY) tools/fullsize_demo.py

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)
