#!/usr/bin/env bash
# Starts private S3 servers for scripts/bench.sh on 127.0.0.1, apart from the
# test servers (other ports, own data directory): versitygw on :17070 and a
# toxiproxy on :18474 whose proxy :17071 adds 20 ms latency in front of it.
# Prints the environment bench.sh reads, as export lines:
#
#   eval "$(scripts/bench/s3-servers.sh start)" && scripts/bench.sh small 1
#   scripts/bench/s3-servers.sh stop
#
# versitygw and toxiproxy-server come from scripts/install-test-deps.sh
# (~/.cache/homesnap-tools/bin, or $HOMESNAP_TOOLS/bin).
set -euo pipefail

TOOLS=${HOMESNAP_TOOLS:-$HOME/.cache/homesnap-tools}
STATE=${HOMESNAP_BENCH_DIR:-/tmp/homesnap-bench}-s3
ACCESS=bench SECRET=benchbench BUCKET=homesnap-bench
S3=127.0.0.1:17070 SLOW=127.0.0.1:17071 TOXI=127.0.0.1:18474
LATENCY_MS=${HOMESNAP_BENCH_S3_LATENCY_MS:-20}

die() { printf 's3-servers: %s\n' "$*" >&2; exit 1; }

stop() {
  local name pid
  for name in versitygw toxiproxy; do
    [ -f "$STATE/$name.pid" ] || continue
    pid=$(cat "$STATE/$name.pid")
    # Only a process this script started (its pid file, its command line).
    if kill -0 "$pid" 2>/dev/null && grep -q "$name" "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" && echo "stopped $name ($pid)" >&2
    fi
    rm -f "$STATE/$name.pid"
  done
}

wait_for() { # wait_for NAME URL
  for ((i = 0; i < 150; i++)); do
    [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$2" || true)" = 000 ] || return 0
    kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null || die "$1 exited while starting: $(tail -5 "$STATE/$1.log")"
    sleep 0.2
  done
  die "$1 did not answer on $2 within 30 s (log: $STATE/$1.log)"
}

start() {
  for tool in versitygw toxiproxy-server; do
    [ -x "$TOOLS/bin/$tool" ] || die "$TOOLS/bin/$tool is missing: run scripts/install-test-deps.sh"
  done
  command -v curl >/dev/null || die "curl is missing: apt-get install -y curl"
  stop
  mkdir -p "$STATE" && rm -rf "$STATE/data" && mkdir -p "$STATE/data"
  setsid "$TOOLS/bin/versitygw" --port "$S3" --access "$ACCESS" --secret "$SECRET" --quiet posix "$STATE/data" \
    </dev/null >"$STATE/versitygw.log" 2>&1 &
  echo $! >"$STATE/versitygw.pid"
  setsid "$TOOLS/bin/toxiproxy-server" -host 127.0.0.1 -port "${TOXI#*:}" </dev/null >"$STATE/toxiproxy.log" 2>&1 &
  echo $! >"$STATE/toxiproxy.pid"
  wait_for versitygw "http://$S3/"
  wait_for toxiproxy "http://$TOXI/version"

  local code
  code=$(curl -s -o "$STATE/mkbucket.out" -w '%{http_code}' -X PUT \
    --aws-sigv4 aws:amz:us-east-1:s3 -u "$ACCESS:$SECRET" "http://$S3/$BUCKET" \
    -H "x-amz-content-sha256: $(printf '' | sha256sum | cut -d' ' -f1)" || true)
  case $code in 200 | 409) ;; *) die "creating bucket $BUCKET failed with status $code: $(cat "$STATE/mkbucket.out")" ;; esac
  code=$(curl -s -o "$STATE/proxy.out" -w '%{http_code}' -X POST "http://$TOXI/proxies" \
    -d "{\"name\":\"bench-s3\",\"listen\":\"$SLOW\",\"upstream\":\"$S3\"}")
  case $code in 200 | 201) ;; *) die "creating the toxiproxy proxy failed with status $code: $(cat "$STATE/proxy.out")" ;; esac
  code=$(curl -s -o "$STATE/proxy.out" -w '%{http_code}' -X POST "http://$TOXI/proxies/bench-s3/toxics" \
    -d "{\"name\":\"latency\",\"type\":\"latency\",\"stream\":\"downstream\",\"attributes\":{\"latency\":$LATENCY_MS}}")
  case $code in 200 | 201) ;; *) die "adding the latency toxic failed with status $code: $(cat "$STATE/proxy.out")" ;; esac

  local q="region=us-east-1&path_style=true"
  cat <<EOF
export AWS_ACCESS_KEY_ID=$ACCESS
export AWS_SECRET_ACCESS_KEY=$SECRET
export HOMESNAP_BENCH_S3_URL='s3://$BUCKET/bench?endpoint=http://$S3&$q'
export HOMESNAP_BENCH_S3_SLOW_URL='s3://$BUCKET/bench?endpoint=http://$SLOW&$q'
EOF
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
