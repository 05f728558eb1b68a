# The two commands of the README:  make run   and   make test
# Each installs what it needs (Debian packages, a virtual environment) before it starts.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
ARGS   ?=

# setuptools warns, on every editable install of a flat layout, that folders named like the
# packages may shadow them: true of any checkout, and nothing to act on
PIP := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/pip

.PHONY: run test setup setup-test lint bench clean screenshots dist

run: setup
	$(BIN)/yomite $(ARGS)

# the suite in parallel, then ruff and mypy even when a test fails, one summary line; the sound
# server it started is stopped again (scripts/test.sh)
test: setup-test
	BIN=$(BIN) scripts/test.sh $(ARGS)

setup: $(VENV)/.installed
	scripts/system-deps.sh run

setup-test: $(VENV)/.installed-dev
	scripts/system-deps.sh test

$(VENV)/.installed: pyproject.toml
	scripts/system-deps.sh run
	@echo "Python packages into $(VENV) (about a minute the first time)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml
	scripts/system-deps.sh test
	@echo "Python packages (with the test tools) into $(VENV) (about a minute the first time)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

# the README's screenshots: the page tests write them to a scratch folder on every run; this
# runs them writing into docs/screenshots instead
screenshots: setup-test
	scripts/audio-harness.sh start
	. $${YH_RUN:-/tmp/yomite-audio}/env.sh && YOMITE_SCREENSHOTS=docs/screenshots \
		$(BIN)/pytest tests/test_pages.py tests/test_record_page.py tests/test_classroom_pages.py \
		tests/test_speaker_pages.py tests/test_desk_pages.py tests/test_rooms_page.py $(ARGS)

# the wheel and the sdist into dist/ (scripts/dist.py: with the setuptools of the test tools,
# no download); what a laptop installs: README "On your own laptop"
dist: setup-test
	rm -rf dist
	$(BIN)/python scripts/dist.py dist

lint: setup-test
	$(BIN)/ruff check reader audio api hall yomite desk cluster tests bench
	$(BIN)/mypy

bench: setup-test
	scripts/audio-harness.sh start
	. $${YH_RUN:-/tmp/yomite-audio}/env.sh && for b in bench/*.py; do $(BIN)/python $$b; done

clean:
	rm -rf $(VENV) dist .pytest_cache .mypy_cache .ruff_cache
