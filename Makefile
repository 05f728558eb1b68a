# The two commands of the README:  make run   and   make test
# Each installs what it needs (Debian packages, a virtual environment) before it starts.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
ARGS   ?=

.PHONY: run test setup setup-test lint bench clean

run: setup
	$(BIN)/yomite $(ARGS)

test: setup-test
	scripts/audio-harness.sh start
	. $${YH_RUN:-/tmp/yomite-audio}/env.sh && $(BIN)/pytest $(ARGS)
	$(BIN)/ruff check reader audio api desk tests bench
	$(BIN)/mypy

setup: $(VENV)/.installed
	scripts/system-deps.sh run

setup-test: $(VENV)/.installed-dev
	scripts/system-deps.sh test

$(VENV)/.installed: pyproject.toml
	scripts/system-deps.sh run
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml
	scripts/system-deps.sh test
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

lint: setup-test
	$(BIN)/ruff check reader audio api desk tests bench
	$(BIN)/mypy

bench: setup-test
	scripts/audio-harness.sh start
	. $${YH_RUN:-/tmp/yomite-audio}/env.sh && for b in bench/*.py; do $(BIN)/python $$b; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
