#!/usr/bin/env bash
# What an incremental snapshot writes to the store: the bytes of its
# manifest, archive and record after one changed file, and after rounds of
# 1 % churn, on a generated home.
#
#   scripts/bench/incremental-bytes.sh [small|medium|PRESET] [rounds]   # default: medium 3
#
# Takes a full `snapshot --once` of a copy of `genhome -preset PRESET -seed 1`
# into a fresh local store, appends one line to one build log and snapshots
# again, then runs `genhome -churn 0.01 -seed R` and a snapshot for each
# round R. Prints, per snapshot, the manifest's bytes (and whether it is a
# delta), the archive's, and their sum; the bytes are the stored objects'
# sizes, i.e. what went to the store.
#
# Environment: HOMESNAP_BENCH_DIR (default /tmp/homesnap-bench-incr),
# HOMESNAP_BENCH_BIN (prebuilt snapshot and genhome: compare releases by
# pointing it at each one's binaries).
set -euo pipefail
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)
PRESET=${1:-medium}
ROUNDS=${2:-3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=${HOMESNAP_BENCH_DIR:-/tmp/homesnap-bench-incr}
BIN=${HOMESNAP_BENCH_BIN:-$BENCH/bin}
mkdir -p "$BENCH"
if [ -z "${HOMESNAP_BENCH_BIN:-}" ]; then
  (cd "$ROOT" && go build -o "$BIN/" ./cmd/snapshot ./cmd/genhome)
fi
GEN=$BENCH/home-$PRESET
[ -d "$GEN" ] || "$BIN/genhome" -preset "$PRESET" -seed 1 "$GEN" >/dev/null
WORK=$BENCH/work
trap 'rm -rf "$WORK"' EXIT
rm -rf "$WORK"
mkdir -p "$WORK/store"
cp -a "$GEN" "$WORK/home"

size() { stat -c %s "$1" 2>/dev/null || echo 0; }
snap() { # snap LABEL: one snapshot, one result line
  local id m a kind
  id=$("$BIN/snapshot" --once --home "$WORK/home" --store "$WORK/store" 2>/dev/null)
  m=$(size "$WORK/store/snapshots/$id.json.zst")
  a=$(size "$WORK/store/archives/$id.tar.zst")
  kind=full
  grep -q '"manifests"' "$WORK/store/snapshots/$id.json" && kind=delta
  printf '| %s | %s | %d | %d | %d |\n' "$1" "$kind" "$m" "$a" $((m + a))
}
echo "| $PRESET | manifest | manifest bytes | archive bytes | written |"
echo "|---|---|---:|---:|---:|"
snap "full snapshot"
log=$(find "$WORK/home/jobs" -name log -type f -not -path '*/workspace*' -print -quit)
echo "one more line" >>"$log"
snap "one changed file"
for r in $(seq 1 "$ROUNDS"); do
  "$BIN/genhome" -churn 0.01 -seed "$((r + 1))" "$WORK/home" >/dev/null
  snap "1 % churn, round $r"
done
