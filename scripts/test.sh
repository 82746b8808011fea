#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what it needs (Python packages, the npm
# stand-ins for Azure), starts Azurite and the Cosmos-compatible server on loopback, runs pytest
# against them, and stops them again. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --servers

# Ports of their own, so a developer's servers from `scripts/local-servers.sh start` can keep running.
export BLOGWRITER_AZURITE_PORT=${BLOGWRITER_TEST_AZURITE_PORT:-10101}
export BLOGWRITER_COSMOS_PORT=${BLOGWRITER_TEST_COSMOS_PORT:-8181}
servers_dir="$PWD/.ci/.servers"
trap 'scripts/local-servers.sh stop "$servers_dir" || true' EXIT
eval "$(scripts/local-servers.sh start "$servers_dir")"

.venv/bin/python -m pytest "$@"
