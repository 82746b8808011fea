#!/usr/bin/env bash
# Create .venv and install BlogWriter with its test dependencies; `--servers` also installs the
# npm packages of the local Azure stand-ins (Azurite, the Cosmos DB-compatible server).
# Idempotent: a second run only checks what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for candidate in python3.11 python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then PY=$candidate; break; fi
  done
fi
[ -n "$PY" ] || { echo "setup: no python3 found" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PY" >&2
  "$PY" -m venv .venv
fi
stamp=.venv/.blogwriter-installed
if [ ! -f "$stamp" ] || [ requirements.txt -nt "$stamp" ] || [ requirements-dev.txt -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python packages" >&2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
  touch "$stamp"
fi

if [ "${1:-}" = "--servers" ]; then
  if [ ! -d node_modules/azurite ] || [ ! -d node_modules/@vercel/cosmosdb-server ]; then
    command -v npm >/dev/null 2>&1 || { echo "setup: npm is needed for the local Azure servers (Node 20)" >&2; exit 1; }
    echo "setup: installing npm packages (Azurite, cosmosdb-server)" >&2
    npm ci --no-audit --no-fund --loglevel=error
  fi
fi
