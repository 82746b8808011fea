#!/usr/bin/env bash
# Local stand-ins for Azure on loopback: Azurite (queue service only) and the Cosmos-compatible
# server (@vercel/cosmosdb-server behind tests/cosmos_test_server.js, which answers 404 for a
# missing item as Cosmos does).
#
#   scripts/local-servers.sh start [DIR]   start both (fixed ports), record pids, print env lines
#   scripts/local-servers.sh stop  [DIR]   stop what `start` started, by recorded pid
#   scripts/local-servers.sh env   [DIR]   print the env lines again
#   scripts/local-servers.sh status [DIR]
#
# DIR (default: $BLOGWRITER_SERVERS_DIR or .blogwriter-servers/ at the repo root) holds the pid
# files, logs and Azurite's data. Ports: BLOGWRITER_AZURITE_PORT (10001, Azurite's usual queue
# port) and BLOGWRITER_COSMOS_PORT (8081, the Cosmos emulator's). The Cosmos server keeps its
# data in memory only: it is empty after every start.
#
# Typical use:  eval "$(scripts/local-servers.sh start)"  ...  scripts/local-servers.sh stop
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HOST=127.0.0.1
AZURITE_PORT="${BLOGWRITER_AZURITE_PORT:-10001}"
COSMOS_PORT="${BLOGWRITER_COSMOS_PORT:-8081}"
START_TIMEOUT=30

# Well-known, public development credentials (Azurite's devstoreaccount1, the Cosmos emulator key).
AZURITE_ACCOUNT=devstoreaccount1
AZURITE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
COSMOS_KEY='C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=='

AZURITE_MAIN="$REPO/node_modules/azurite/dist/src/queue/main.js"
COSMOS_MAIN="$REPO/tests/cosmos_test_server.js"

cmd="${1:-}"
DIR="${2:-${BLOGWRITER_SERVERS_DIR:-$REPO/.blogwriter-servers}}"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"

say() { echo "local-servers: $*" >&2; }
die() { say "$*"; exit 1; }

azurite_connection() {
  echo "DefaultEndpointsProtocol=http;AccountName=$AZURITE_ACCOUNT;AccountKey=$AZURITE_KEY;QueueEndpoint=http://$HOST:$AZURITE_PORT/$AZURITE_ACCOUNT;"
}
cosmos_connection() { echo "AccountEndpoint=https://$HOST:$COSMOS_PORT/;AccountKey=$COSMOS_KEY;"; }

print_env() {
  local storage cosmos
  storage="$(azurite_connection)"
  cosmos="$(cosmos_connection)"
  echo "export AzureWebJobsStorage='$storage'"
  echo "export COSMOS_CONNECTION='$cosmos'"
  echo "export BLOGWRITER_TEST_AZURITE_CONNECTION='$storage'"
  echo "export BLOGWRITER_TEST_COSMOS_CONNECTION='$cosmos'"
}

listening() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# The pid recorded for NAME if that process is still ours (guards against a reused pid).
running_pid() {
  local name="$1" script="$2" pid
  [[ -f "$DIR/$name.pid" ]] || return 1
  pid="$(cat "$DIR/$name.pid")"
  [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$script" || return 1
  echo "$pid"
}

start_one() {
  local name="$1" port="$2" script="$3"; shift 3
  local pid
  if pid="$(running_pid "$name" "$script")"; then
    say "$name already running (pid $pid, port $port)"
    return
  fi
  if listening "$port"; then
    say "port $HOST:$port is taken by another process; free it or set BLOGWRITER_${name^^}_PORT"
    return 1
  fi
  nohup node "$script" "$@" >"$DIR/$name.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$DIR/$name.pid"
  local waited=0
  until listening "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$DIR/$name.pid"
      say "$name exited before listening on $HOST:$port; log $DIR/$name.log:"
      tail -n 20 "$DIR/$name.log" >&2
      return 1
    fi
    if (( waited >= START_TIMEOUT * 10 )); then
      stop_one "$name" "$script"
      say "$name did not listen on $HOST:$port within ${START_TIMEOUT}s; log $DIR/$name.log"
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  say "$name listening on $HOST:$port (pid $pid, log $DIR/$name.log)"
}

stop_one() {
  local name="$1" script="$2" pid
  if ! pid="$(running_pid "$name" "$script")"; then
    rm -f "$DIR/$name.pid"
    return
  fi
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "$name (pid $pid) ignored SIGTERM; sending SIGKILL"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$DIR/$name.pid"
  say "stopped $name (pid $pid)"
}

ensure_node_modules() {
  command -v node >/dev/null || die "node is not on PATH (Node 20 is needed)"
  if [[ ! -d "$REPO/node_modules" ]]; then
    say "node_modules is missing: installing"
    if [[ -f "$REPO/package-lock.json" ]]; then
      (cd "$REPO" && npm ci --no-audit --no-fund >&2)
    else
      (cd "$REPO" && npm install --no-audit --no-fund >&2)
    fi
  fi
  [[ -f "$AZURITE_MAIN" ]] || die "$AZURITE_MAIN is missing: run npm ci"
  [[ -d "$REPO/node_modules/@vercel/cosmosdb-server" ]] || die "@vercel/cosmosdb-server is missing: run npm ci"
}

case "$cmd" in
  start)
    ensure_node_modules
    mkdir -p "$DIR/azurite"
    start_one azurite "$AZURITE_PORT" "$AZURITE_MAIN" \
      --queueHost "$HOST" --queuePort "$AZURITE_PORT" --location "$DIR/azurite" \
      --silent --skipApiVersionCheck --disableTelemetry || exit 1
    if ! start_one cosmos "$COSMOS_PORT" "$COSMOS_MAIN" --host "$HOST" -p "$COSMOS_PORT"; then
      stop_one azurite "$AZURITE_MAIN"
      exit 1
    fi
    print_env
    ;;
  stop)
    stop_one cosmos "$COSMOS_MAIN"
    stop_one azurite "$AZURITE_MAIN"
    ;;
  env)
    print_env
    ;;
  status)
    for entry in "azurite:$AZURITE_MAIN:$AZURITE_PORT" "cosmos:$COSMOS_MAIN:$COSMOS_PORT"; do
      IFS=: read -r name script port <<<"$entry"
      if pid="$(running_pid "$name" "$script")"; then echo "$name running (pid $pid, port $port)"; else echo "$name stopped"; fi
    done
    ;;
  *)
    echo "usage: $0 start|stop|env|status [DIR]" >&2
    exit 2
    ;;
esac
