# Two commands for a fresh machine with python3 (3.11+) and make: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
# Test processes (pytest-xdist); 0 runs the suite in this process, one test at a time.
PYTEST_WORKERS ?= 2
# The sandbox's port; 3000 is Grafana's default too, so `make run PORT=3001` takes another.
PORT ?= 3000

.PHONY: run test lint bench clean

$(STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/pitcrew demo --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check bot handlers storage sandbox tests bench
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/ack_latency.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
