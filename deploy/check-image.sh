#!/usr/bin/env bash
# Checks a built image the way it will run: `pitcrew check-config` on the sandbox's example program, then
# `pitcrew serve` (the image's default command) with that program delivered as on ECS (PITCREW_PROGRAM_YAML,
# written to a file by the entrypoint), polled until /healthz answers 200; then /readyz, a refused unsigned
# Slack request, the non-root user, the image's own HEALTHCHECK (`podman healthcheck run`: without systemd podman
# never schedules it) and `pitcrew socket`'s start-up check. Removes its container and volume, whatever happens.
#
#   deploy/check-image.sh IMAGE        (`make image-check` runs it with the project's podman configuration)
#
# The monitors, the digest and AWS's instance metadata are off: the check must not depend on AWS or Slack
# being reachable; what it proves is the image (dependencies, package data, migrations, the user, the port).
set -euo pipefail

image="${1:?usage: check-image.sh IMAGE}"
root="$(cd "$(dirname "$0")/.." && pwd)"
program="$root/bot/examples/program.example.yml"
name="pitcrew-check-$$"
wait_seconds="${CHECK_WAIT_SECONDS:-120}"
started=$SECONDS  # the whole check

# podman 4.3 says on stderr, at each run and removal, that it cannot reach systemd to schedule the
# health check: kept out of the way, shown only when a step fails.
podman_errors="$(mktemp)"
cleanup() {
  podman rm --force --volumes --time 5 "$name" >/dev/null 2>&1 || true
  rm -f "$podman_errors"
}
trap cleanup EXIT
fail() {
  echo "image check FAILED: $*" >&2
  podman logs --tail 40 "$name" >&2 2>&1 || true
  exit 1
}
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

echo "== pitcrew check-config (the example program, mounted read-only)"
podman run --rm --no-healthcheck --volume "$program:/etc/pitcrew/program.yml:ro" "$image" \
  pitcrew check-config /etc/pitcrew/program.yml

echo "== pitcrew socket without SLACK_APP_TOKEN (must refuse with its one line)"
if out="$(podman run --rm --no-healthcheck "$image" pitcrew socket 2>&1)"; then fail "socket started without a token"; fi
grep -q "SLACK_APP_TOKEN" <<<"$out" || fail "socket said: $out"
echo "refused: $out"

echo "== pitcrew serve on 127.0.0.1:$port"
# Placeholder Slack credentials: Bolt will not start without a bot token, and the signing secret makes the
# unsigned request below a real refusal. The token is never accepted by Slack, and nothing here needs it to be.
serve_started=$SECONDS
podman run --detach --init --name "$name" --publish "127.0.0.1:$port:3000" \
  --env PITCREW_PROGRAM_YAML="$(cat "$program")" \
  --env SLACK_SIGNING_SECRET=image-check-secret --env SLACK_BOT_TOKEN=xoxb-image-check \
  --env PITCREW_MONITOR=false --env PITCREW_DIGEST=false --env AWS_EC2_METADATA_DISABLED=true \
  "$image" >/dev/null 2>"$podman_errors" || { cat "$podman_errors" >&2; fail "podman run"; }

code=000
until [ "$code" = 200 ]; do
  [ "$(podman inspect --format '{{.State.Running}}' "$name")" = true ] || fail "the container stopped"
  (( SECONDS - started < wait_seconds )) || fail "/healthz did not answer 200 within ${wait_seconds}s (last: $code)"
  sleep 0.5
  code="$(curl --silent --max-time 2 --output /dev/null --write-out '%{http_code}' "http://127.0.0.1:$port/healthz" || true)"
done
echo "/healthz 200 $((SECONDS - serve_started))s after the container started: $(curl --silent "http://127.0.0.1:$port/healthz")"

ready="$(curl --silent --max-time 5 --output /dev/null --write-out '%{http_code}' "http://127.0.0.1:$port/readyz" || true)"
[ "$ready" = 200 ] || fail "/readyz answered $ready"
echo "/readyz 200: $(curl --silent "http://127.0.0.1:$port/readyz")"

unsigned="$(curl --silent --max-time 5 --output /dev/null --write-out '%{http_code}' \
  --data 'command=/cluster&text=list' "http://127.0.0.1:$port/slack/events" || true)"
[ "$unsigned" = 401 ] || fail "an unsigned Slack request got $unsigned, not 401"
echo "unsigned POST /slack/events: 401"

user="$(podman exec "$name" id -u)"
[ "$user" = 10001 ] || fail "the process runs as uid $user"
echo "runs as uid $user"

podman healthcheck run "$name" || fail "podman healthcheck run: $(podman inspect --format '{{.State.Health.Status}}' "$name")"
echo "HEALTHCHECK: $(podman inspect --format '{{.State.Health.Status}}' "$name")"

# SIGTERM (through --init) must end it gracefully; uvicorn then re-raises the signal, hence exit code 143.
stop_started=$SECONDS
podman stop --time 20 "$name" >/dev/null 2>>"$podman_errors"
# The logs are read whole before they are searched: with pipefail, `podman logs | grep -q` fails whenever grep
# stops at the match before podman has written the rest (podman dies of SIGPIPE), as a CI run of 2026-12-05 did on
# a shutdown its own log showed complete.
logs="$(podman logs "$name" 2>&1)"
grep -q "Application shutdown complete" <<<"$logs" || fail "no graceful shutdown on SIGTERM"
echo "stopped gracefully in $((SECONDS - stop_started))s (exit code $(podman inspect --format '{{.State.ExitCode}}' "$name"))"
echo "image check passed in $((SECONDS - started))s"
