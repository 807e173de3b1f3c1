#!/usr/bin/env bash
# Continuous protection, sustained: the sidecar with the change journal on,
# at a one-minute interval, for an hour, while the generator churns the home
# underneath it; then every snapshot it took is verified and restored:
#
#   scripts/bench/continuous.sh [preset] [minutes]     # default: medium 60
#
# While it runs, a churn round (`genhome -churn`) lands every
# HOMESNAP_BENCH_CHURN_EVERY seconds, so changes arrive while snapshots are
# being taken, and the journal's verification walk runs every
# HOMESNAP_BENCH_VERIFY_INTERVAL. At the end the churn stops, the sidecar
# gets SIGTERM and takes its final snapshot, and then:
#   - `restore --verify` reads every object of every snapshot the head reaches;
#   - every snapshot the sidecar printed is restored by ID into an empty
#     directory (the restore checks each file against its manifest);
#   - the final snapshot's restore is compared with the home, path by path
#     (type, mode, owner, size, mtime, link target) and byte for byte.
# It fails if any of that fails, if a snapshot failed, if the verification
# walks found a path the journal missed, or if a snapshot took longer than
# the interval (the interval was not sustained).
#
# Output: $BENCH/results.md (the table BENCHMARKS.md quotes), with the
# sidecar's log, stdout (snapshot IDs), metrics and CPU/RSS samples beside it.
#
# Environment:
#   HOMESNAP_BENCH_DIR             work directory (default /tmp/homesnap-continuous)
#   HOMESNAP_BENCH_BIN             prebuilt snapshot, restore and genhome
#                                  (default: built from this tree)
#   HOMESNAP_BENCH_INTERVAL        the sidecar's --interval (1m)
#   HOMESNAP_BENCH_CHURN           fraction of files one churn round changes (0.0033)
#   HOMESNAP_BENCH_CHURN_EVERY     seconds between churn rounds (20): 1 % a minute
#   HOMESNAP_BENCH_VERIFY_INTERVAL --journal-verify-interval (10m)
#   HOMESNAP_BENCH_PORT            metrics listener on 127.0.0.1 (19191)
#   HOMESNAP_BENCH_CHECK_ONLY=1    only the checks, of the run $BENCH holds
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=go1.26.10 # go.mod's go line
PRESET=${1:-medium} MINUTES=${2:-60}
BENCH=${HOMESNAP_BENCH_DIR:-/tmp/homesnap-continuous}
INTERVAL=${HOMESNAP_BENCH_INTERVAL:-1m}
CHURN=${HOMESNAP_BENCH_CHURN:-0.0033}
CHURN_EVERY=${HOMESNAP_BENCH_CHURN_EVERY:-20}
VERIFY=${HOMESNAP_BENCH_VERIFY_INTERVAL:-10m}
PORT=${HOMESNAP_BENCH_PORT:-19191}
[[ $BENCH = /* && $BENCH != / ]] || { echo "HOMESNAP_BENCH_DIR must be an absolute path other than /" >&2; exit 2; }
for tool in jq bc curl; do
  command -v $tool >/dev/null || { echo "continuous: $tool is missing (apt-get install -y $tool)" >&2; exit 1; }
done
log() { printf '== %s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

mkdir -p "$BENCH"
BIN=${HOMESNAP_BENCH_BIN:-$BENCH/bin}
home=$BENCH/home store=$BENCH/store
if [ "${HOMESNAP_BENCH_CHECK_ONLY:-0}" != 1 ]; then # the run; otherwise only its checks
  if [ -z "${HOMESNAP_BENCH_BIN:-}" ]; then
    log "building into $BIN"
    go build -o "$BIN/" ./cmd/snapshot ./cmd/restore ./cmd/genhome
  fi
  rm -rf "$home" "$store" "$BENCH/restored" && mkdir -p "$store"
  log "generating the $PRESET home"
  "$BIN/genhome" -preset "$PRESET" -seed 1 "$home" >&2

  # The sidecar: what the examples run, at a one-minute interval.
  log "sidecar: --interval $INTERVAL --journal auto --journal-verify-interval $VERIFY for $MINUTES min"
  "$BIN/snapshot" --home "$home" --store "$store" --interval "$INTERVAL" --journal auto \
    --journal-verify-interval "$VERIFY" --listen "127.0.0.1:$PORT" --log-format json \
    >"$BENCH/ids.txt" 2>"$BENCH/sidecar.log" &
  sidecar=$!
  churner=
  cleanup() {
    [ -n "$churner" ] && kill "$churner" 2>/dev/null
    kill "$sidecar" 2>/dev/null || true
  }
  trap cleanup EXIT

  # The generator's churn, in rounds, until told to stop.
  (
    round=2
    while :; do
      "$BIN/genhome" -churn "$CHURN" -seed "$round" "$home" >/dev/null 2>&1 || echo "churn round $round failed" >&2
      round=$((round + 1))
      sleep "$CHURN_EVERY"
    done
  ) &
  churner=$!

  # CPU seconds and RSS of the sidecar, once a minute.
  hz=$(getconf CLK_TCK)
  : >"$BENCH/resources.tsv"
  sample() {
    local stat rss
    stat=$(cut -d' ' -f14-15 "/proc/$sidecar/stat") || return 0
    rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$sidecar/status")
    printf '%s\t%s\t%s\t%s\n' "$(date -u +%H:%M:%S)" "$(echo "$stat" | awk -v hz="$hz" '{ printf "%.2f", ($1 + $2) / hz }')" \
      "$rss" "$(cut -d' ' -f1 /proc/loadavg)" >>"$BENCH/resources.tsv"
  }
  start=$(date +%s)
  while (($(date +%s) - start < MINUTES * 60)); do
    kill -0 "$sidecar" 2>/dev/null || fail "the sidecar exited early: $(tail -3 "$BENCH/sidecar.log")"
    sample
    sleep 60
  done
  kill "$churner" && wait "$churner" 2>/dev/null || true
  churner=
  curl -sf "127.0.0.1:$PORT/metrics" >"$BENCH/metrics.txt" || fail "cannot read the sidecar's metrics"
  log "stopping the sidecar (final snapshot)"
  kill -TERM "$sidecar"
  wait "$sidecar" || fail "the sidecar exited $? on SIGTERM: $(tail -3 "$BENCH/sidecar.log")"
  trap - EXIT
fi

# What the sidecar did, from its own log.
jq -c 'select(.message == "snapshot committed" or .message == "nothing changed since the last snapshot; none taken")' \
  "$BENCH/sidecar.log" >"$BENCH/snapshots.jsonl"
! grep -q '"snapshot failed"' "$BENCH/sidecar.log" || fail "a snapshot failed: $(grep '"snapshot failed"' "$BENCH/sidecar.log" | head -3)"
# The sidecar prints the ID of every snapshot it commits and of every
# consolidation of the head; each is restored below.
committed=$(jq -s 'map(select(.message == "snapshot committed")) | length' "$BENCH/snapshots.jsonl")
consolidated=$(grep -c '"message":"consolidated' "$BENCH/sidecar.log" || true)
[ $((committed + consolidated)) -eq "$(wc -l <"$BENCH/ids.txt")" ] ||
  fail "$committed committed and $consolidated consolidated in the log, $(wc -l <"$BENCH/ids.txt") IDs printed"
differences=$(awk '$1 == "homesnap_journal_differences_total" { print $2 }' "$BENCH/metrics.txt")
[ "${differences:-missing}" = 0 ] || fail "the verification walks found $differences paths the journal missed (see $BENCH/sidecar.log)"
case $INTERVAL in
  *m) interval_ms=$((${INTERVAL%m} * 60000)) ;;
  *s) interval_ms=$((${INTERVAL%s} * 1000)) ;;
  *) fail "HOMESNAP_BENCH_INTERVAL: give seconds or minutes (30s, 1m), not $INTERVAL" ;;
esac
stats=$(jq -s --argjson iv "$interval_ms" '
  def q(p): sort | .[((length - 1) * p | floor)];
  [.[] | .elapsed] as $e
  | { n: length, median: ($e | q(0.5)), p95: ($e | q(0.95)), max: ($e | max),
      over: ([$e[] | select(. > $iv)] | length),
      modes: (group_by(.journal) | map({ (.[0].journal // "none"): length }) | add) }' "$BENCH/snapshots.jsonl")
over=$(jq .over <<<"$stats")
[ "$over" -eq 0 ] || fail "$over snapshots took longer than the $INTERVAL interval: $stats"
fallbacks=$(grep '^homesnap_journal_fallbacks_total' "$BENCH/metrics.txt" | tr '\n' ' ')

log "restore --verify: every snapshot the head reaches"
"$BIN/restore" --verify --store "$store" --home "$BENCH/restored" --log-format json >"$BENCH/verify.out" 2>"$BENCH/verify.log" ||
  fail "restore --verify failed: $(tail -3 "$BENCH/verify.log")"
log "restoring each of the $((committed + consolidated)) snapshots by ID"
n=0
while read -r id; do
  rm -rf "$BENCH/restored"
  "$BIN/restore" --home "$BENCH/restored" --store "$store" --snapshot "$id" --log-format json >/dev/null 2>"$BENCH/restore.log" ||
    fail "restoring $id failed: $(tail -3 "$BENCH/restore.log")"
  n=$((n + 1))
done <"$BENCH/ids.txt"

# The last one must be the home as the churn left it.
describe() {
  (cd "$1" && find nodes secrets jobs identity.key.enc secret.key secret.key.not-so-secret \
      \( -path 'jobs/*/workspace' -o -path 'jobs/*/workspace@*' -o -name '*-atomic*tmp' \) -prune \
      -o -printf '%P|%y|%m|%U:%G|%s|%T@|%l\n' 2>/dev/null | sort)
}
diff <(describe "$home") <(describe "$BENCH/restored") >"$BENCH/final.diff" &&
  diff -r --no-dereference -x workspace -x 'workspace@*' -x '*-atomic*tmp' "$home/jobs" "$BENCH/restored/jobs" >>"$BENCH/final.diff" ||
  fail "the final snapshot does not restore the home as it was (see $BENCH/final.diff)"
paths=$(describe "$BENCH/restored" | wc -l)

cpu=$(tail -1 "$BENCH/resources.tsv" | cut -f2)
rss_max=$(cut -f3 "$BENCH/resources.tsv" | sort -n | tail -1)
{
  echo "| measure | $PRESET home, $MINUTES min, --interval $INTERVAL, churn $CHURN every ${CHURN_EVERY}s |"
  echo "|---|---|"
  echo "| snapshots committed (incl. the final one), consolidations | $committed, $consolidated: every one restored by ID ($n) |"
  echo "| snapshot runs by how the home was read | $(jq -c .modes <<<"$stats") (nothing-changed runs included) |"
  echo "| elapsed per run: median / p95 / max | $(jq -r '"\(.median | floor) / \(.p95 | floor) / \(.max | floor) ms"' <<<"$stats"), none over the interval |"
  echo "| journal fallbacks | ${fallbacks:-none} |"
  echo "| paths the verification walks found the journal missed | $differences |"
  echo "| restore --verify of every snapshot the head reaches | passed |"
  echo "| final snapshot restored against the home | $paths paths equal (type, mode, owner, size, mtime, link, bytes) |"
  echo "| sidecar CPU over the run / peak RSS sampled | ${cpu} s / $((rss_max / 1024)) MiB |"
} | tee "$BENCH/results.md"
log "passed; results in $BENCH/results.md"
