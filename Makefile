# Two commands for a fresh machine with python3 (3.11+) and make: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | cksum | cut -d' ' -f1)
PYTEST_ARGS ?=
# Test processes (pytest-xdist); 0 runs the suite in this process, one test at a time. Three on two cores: the
# scenario tests wait on their worlds (progress, polls, a subprocess) a third of the time, and a third process
# fills it (2026-12-05, full suite with Postgres on a quiet 2-core machine: 436 s at 2, 377 s at 3, 387 s at 4).
# Work stealing: a worker that runs out takes queued tests from the others, so the suite does not end waiting on
# one worker's last long scenario tests.
PYTEST_WORKERS ?= 3
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

# Bytecode is written for the tests even where the environment says not to (PYTHONDONTWRITEBYTECODE=1 on these
# machines): otherwise every worker and every CLI or demo subprocess compiles the project's modules again, and
# pytest rewrites each test module's asserts anew in each worker (2026-12-06: collection 11.0 s -> 5.5 s per worker
# once the cache is warm; importing bot.app, sandbox.world and bot.cli 1.56 -> 1.28 s per subprocess). The caches go
# to __pycache__, which git ignores.
test: lint prometheus
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/ack_latency.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# The image (Dockerfile), built with podman where no registry can be reached: the base is made from Debian's
# packages with mmdebstrap (once; cached in build/image/: delete the .tar for Debian's latest updates) and imported as
# $(IMAGE_BASE). podman runs with the project's own containers.conf and storage.conf (deploy/podman/; the store
# is build/image/storage), so `make image-clean` empties that store and no other. Needs root (or sudo).
.PHONY: image image-tools image-check image-clean
IMAGE ?= localhost/pitcrew:dev
IMAGE_BASE ?= localhost/pitcrew-base:bookworm
IMAGE_DIR := $(CURDIR)/build/image
# pip inside the build reaches the index through this machine's proxy: its CA goes in as a build secret.
PIP_CA ?= /etc/ssl/certs/ca-certificates.crt
PIP_SECRET := --secret id=pipca,src=$(PIP_CA)
PODMAN := $(SUDO) env CONTAINERS_CONF=$(IMAGE_DIR)/containers.conf CONTAINERS_STORAGE_CONF=$(IMAGE_DIR)/storage.conf podman
IMAGE_TOOLS := podman buildah mmdebstrap runc catatonit

image-tools:
	@missing=; for tool in $(IMAGE_TOOLS); do command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	echo "Installing Debian's$$missing (to build the image)"; \
	$(SUDO) $(APT_GET) update -qq \
	  && $(SUDO) env DEBIAN_FRONTEND=noninteractive $(APT_GET) install -y -qq --no-install-recommends $$missing

# This host's hard limits: podman's default ulimits exceed them, and a container then fails to start. nproc is
# capped at 32768 too: runc failed to set this host's own hard limit (96362) on a container (EPERM).
$(IMAGE_DIR)/containers.conf: deploy/podman/containers.conf
	@mkdir -p $(IMAGE_DIR)
	nofile=$$(bash -c 'ulimit -Hn') && nproc=$$(bash -c 'ulimit -Hu') \
	  && if [ "$$nofile" = unlimited ] || [ "$$nofile" -gt 1048576 ]; then nofile=1048576; fi \
	  && if [ "$$nproc" = unlimited ] || [ "$$nproc" -gt 32768 ]; then nproc=32768; fi \
	  && sed -e "s/@NOFILE@/$$nofile/g" -e "s/@NPROC@/$$nproc/g" $< > $@.part && mv $@.part $@

$(IMAGE_DIR)/storage.conf: deploy/podman/storage.conf
	@mkdir -p $(IMAGE_DIR)
	sed -e "s|@STATE@|$(IMAGE_DIR)|g" $< > $@.part && mv $@.part $@

$(IMAGE_DIR)/base-bookworm.tar: | image-tools
	@mkdir -p $(IMAGE_DIR)
	$(SUDO) mmdebstrap --quiet --format=tar --variant=apt --include=python3,python3-venv,ca-certificates,tzdata bookworm $@.part
	mv $@.part $@

# Imported again whenever the tarball is newer (the stamp lives in the store, so image-clean drops both). The
# tarball has no environment of its own: PATH is set here, for the Dockerfile's ENV PATH=...:$$PATH.
$(IMAGE_DIR)/storage/base-imported: $(IMAGE_DIR)/base-bookworm.tar $(IMAGE_DIR)/containers.conf $(IMAGE_DIR)/storage.conf
	$(PODMAN) import --quiet --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	  $(IMAGE_DIR)/base-bookworm.tar $(IMAGE_BASE)
	$(SUDO) touch $@

image: image-tools $(IMAGE_DIR)/storage/base-imported
	$(PODMAN) build --format docker --build-arg BASE=$(IMAGE_BASE) \
	  $(if $(wildcard $(PIP_CA)),$(PIP_SECRET)) --tag $(IMAGE) .
	@$(PODMAN) image inspect --format 'built $(IMAGE): {{.Size}} bytes' $(IMAGE)

# Runs the image with the sandbox's example program and checks /healthz, /readyz and the HEALTHCHECK.
image-check: image
	$(SUDO) env CONTAINERS_CONF=$(IMAGE_DIR)/containers.conf CONTAINERS_STORAGE_CONF=$(IMAGE_DIR)/storage.conf \
	  deploy/check-image.sh $(IMAGE)

# Empties the project's image store (containers, images, volumes; the cached base tarball stays). Not `podman
# system reset`: that also drops podman's networks, which are machine-wide, not the store's.
image-clean:
	@if [ -f $(IMAGE_DIR)/storage.conf ] && [ -d $(IMAGE_DIR)/storage ]; then \
	  $(PODMAN) rm --all --force --volumes >/dev/null && $(PODMAN) rmi --all --force >/dev/null \
	    && $(PODMAN) volume prune --force >/dev/null; \
	fi
	@# mounts left in the store (its overlay folder, mounted on itself while containers run, or an interrupted
	@# run's layers) would keep rm from deleting it
	@awk '$$2 ~ "^$(IMAGE_DIR)/storage/" {print $$2}' /proc/mounts | sort -r | xargs -r $(SUDO) umount
	$(SUDO) rm -rf $(IMAGE_DIR)/storage $(IMAGE_DIR)/run
