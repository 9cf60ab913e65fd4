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

.PHONY: run test lint bench clean prometheus

# Debian's prometheus package (2.42: promtool and the server): the tests and the sandbox run a real Prometheus.
# Installed only when missing, as root or through sudo; policy-rc.d keeps the package from starting its own
# service (there is no systemd here, and nothing of it must stay running).
PROMTOOL ?= promtool
APT_GET ?= apt-get
SUDO := $(if $(filter 0,$(shell id -u)),,$(shell command -v sudo 2>/dev/null))

$(STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

prometheus:
	@if command -v $(PROMTOOL) >/dev/null 2>&1 && test -x /usr/bin/prometheus; then exit 0; fi; \
	echo "Installing Debian's prometheus package (promtool and prometheus, for the tests and the sandbox)"; \
	policy=/usr/sbin/policy-rc.d; made=; \
	if [ ! -e $$policy ]; then \
	  printf '#!/bin/sh\nexit 101\n' | $(SUDO) tee $$policy >/dev/null && $(SUDO) chmod 755 $$policy && made=1; \
	fi; \
	$(SUDO) $(APT_GET) update -qq \
	  && $(SUDO) env DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq --no-install-recommends prometheus; \
	status=$$?; \
	if [ -n "$$made" ]; then $(SUDO) rm -f $$policy; fi; \
	if [ $$status -ne 0 ]; then echo "Could not install prometheus (apt-get exit $$status)" >&2; fi; \
	exit $$status

run: $(STAMP) prometheus
	$(BIN)/pitcrew demo --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check bot handlers storage sandbox tests bench
	$(BIN)/mypy

test: lint prometheus
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/ack_latency.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
