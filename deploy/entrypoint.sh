#!/bin/sh
# The image's entrypoint. On ECS the program file arrives as the environment variable PITCREW_PROGRAM_YAML
# (injected from Secrets Manager, see deploy/pitcrew-service.yaml): write it where PITCREW_CONFIG points and
# drop it from the environment, then run the command (`pitcrew serve ...` by default).
set -eu
if [ -n "${PITCREW_PROGRAM_YAML:-}" ]; then
  umask 077
  printf '%s\n' "$PITCREW_PROGRAM_YAML" > "${PITCREW_CONFIG:-./program.yml}"
  unset PITCREW_PROGRAM_YAML
fi
exec "$@"
