#!/usr/bin/env bash
# Stops the test servers scripts/start-servers.sh started and removes their
# data. Also frees the servers' ports from a run whose state directory is
# gone, but only when one of our server binaries holds them.
set -uo pipefail

STATE=${HOMESNAP_TEST_STATE:-${TMPDIR:-/tmp}/homesnap-test-servers}
PORTS="7070 8333 9333 8888 8080 4443 10000 8474"
OURS='versitygw|weed|fake-gcs-server|azurite|toxiproxy-server'

log() { printf '== %s\n' "$*" >&2; }

# ours PID succeeds when PID runs one of the server binaries.
ours() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -Eq "(^|/)($OURS)[ ]|/azurite"; }

# Signal every server first, then wait: they shut down in parallel.
pids=() names=()
signal() { # PID NAME
  kill -0 "$1" 2>/dev/null || return 0
  if ! ours "$1"; then
    log "PID $1 ($2) is not a test server; left alone"
    return 0
  fi
  kill "$1" 2>/dev/null
  pids+=("$1") names+=("$2")
}

for f in "$STATE"/*.pid; do
  [ -e "$f" ] || continue
  signal "$(cat "$f")" "$(basename "$f" .pid)"
  rm -f "$f"
done

# Leftovers of an earlier run whose PID files were lost.
if command -v ss >/dev/null; then
  for port in $PORTS; do
    for pid in $(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
      if ours "$pid"; then
        [[ " ${pids[*]} " == *" $pid "* ]] || signal "$pid" "server on port $port"
      else
        log "port $port is held by PID $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)), not a test server: stop it or the servers cannot start"
      fi
    done
  done
fi

for i in "${!pids[@]}"; do
  for ((n = 0; n < 50; n++)); do
    kill -0 "${pids[$i]}" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "${pids[$i]}" 2>/dev/null; then
    kill -9 "${pids[$i]}" 2>/dev/null
    log "killed ${names[$i]} (PID ${pids[$i]}) after 10s"
  else
    log "stopped ${names[$i]} (PID ${pids[$i]})"
  fi
done

if [ -f "$STATE/datadir" ]; then
  rm -rf "$(cat "$STATE/datadir")" "$STATE/datadir"
fi
exit 0
