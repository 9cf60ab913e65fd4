# Pitcrew's image: `pitcrew serve` on port 3000 by default, `pitcrew socket` by command.
#
#   podman build --format docker -t pitcrew .                          # from python:3.11-slim (a registry)
#   make image                                                          # here: a Debian base made locally
#
# --format docker keeps the HEALTHCHECK (the OCI format drops it). Behind an intercepting proxy, pass its CA
# as a build secret (never baked in): --secret id=pipca,src=/etc/ssl/certs/ca-certificates.crt
# The base needs python3 (3.11+) with venv, ca-certificates and tzdata (the program's time zone).
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
# One venv, copied whole into the runtime stage: the same base puts python3 at the same path in both.
RUN python3 -m venv /opt/pitcrew
WORKDIR /src
# The product's dependencies only (pyproject's [project] dependencies, not the sandbox or dev extras), at the
# versions requirements.lock pins; wheels only, so the build needs no compiler. A layer of its own, so a code
# change does not download them again.
COPY pyproject.toml requirements.lock ./
RUN --mount=type=secret,id=pipca \
    if [ -s /run/secrets/pipca ]; then export PIP_CERT=/run/secrets/pipca; fi; \
    python3 -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep='\n')" \
        > product-requirements.txt \
    && /opt/pitcrew/bin/pip install --no-cache-dir --disable-pip-version-check --only-binary=:all: \
        --constraint requirements.lock --requirement product-requirements.txt
# Then Pitcrew itself, without resolving anything again; `pip check` fails the build if the lock and
# pyproject disagree. The sandbox package stays out: `pitcrew demo` needs moto, which the image does not have.
COPY README.md ./
COPY bot ./bot
COPY handlers ./handlers
COPY storage ./storage
RUN --mount=type=secret,id=pipca \
    if [ -s /run/secrets/pipca ]; then export PIP_CERT=/run/secrets/pipca; fi; \
    /opt/pitcrew/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps . \
    && /opt/pitcrew/bin/pip check

FROM ${BASE}
# A fixed uid/gid, so volumes and ECS task definitions can name them (useradd --system would pick a gid).
RUN groupadd --gid 10001 app \
    && useradd --uid 10001 --gid 10001 --home-dir /var/lib/pitcrew --no-create-home --shell /usr/sbin/nologin app \
    && mkdir -p /var/lib/pitcrew/tmp \
    && chown -R 10001:10001 /var/lib/pitcrew
COPY --from=build /opt/pitcrew /opt/pitcrew
COPY deploy/entrypoint.sh /usr/local/bin/pitcrew-entrypoint
# Everything the process writes goes under /var/lib/pitcrew (the SQLite default, the program file the
# entrypoint may write, matplotlib's cache, temporary files), so the root filesystem can be read-only.
ENV PATH=/opt/pitcrew/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PITCREW_CONFIG=/var/lib/pitcrew/program.yml \
    DATABASE_URL=sqlite+aiosqlite:////var/lib/pitcrew/pitcrew.db \
    MPLCONFIGDIR=/var/lib/pitcrew/tmp/matplotlib \
    TMPDIR=/var/lib/pitcrew/tmp
WORKDIR /var/lib/pitcrew
# Declared so ECS copies this folder, with its owner, into the task's bind-mounted volume.
VOLUME ["/var/lib/pitcrew"]
USER 10001:10001
EXPOSE 3000
# Liveness: /healthz answers 200 once the program file is loaded and migrations are applied (readiness,
# which also asks the database, is /readyz). Socket Mode serves no HTTP: run it with --no-healthcheck.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:3000/healthz', timeout=4)"]
ENTRYPOINT ["pitcrew-entrypoint"]
CMD ["pitcrew", "serve", "--host", "0.0.0.0", "--port", "3000"]
