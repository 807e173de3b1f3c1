#!/usr/bin/env bash
# The sidecar over time: ROUNDS rounds of 1 % churn on a generated home,
# each followed by `snapshot --once --keep-last KEEP` (which prunes and
# repacks), then compares the bytes stored with one fresh full snapshot of
# the final home, and reports the archives the head points into.
#
#   scripts/bench/retention.sh [preset] [rounds] [keep]    # default: medium 100 24
#
# HOMESNAP_BENCH_KEEP=1 keeps the work directory (stores and binaries) for
# a closer look, e.g. `go run ./scripts/bench/storestat DIR/store`.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)
PRESET=${1:-medium} ROUNDS=${2:-100} KEEP=${3:-24}
work=$(mktemp -d /tmp/homesnap-retention.XXXXXX)
if [ "${HOMESNAP_BENCH_KEEP:-}" = 1 ]; then
  echo "work directory kept: $work" >&2
else
  trap 'rm -rf "$work"' EXIT
fi
go build -o "$work/bin/" ./cmd/snapshot ./cmd/restore ./cmd/prune ./cmd/genhome ./scripts/bench/storestat
b=$work/bin
export HOMESNAP_LOG_LEVEL=warn HOMESNAP_LOG_FORMAT=json
# Rounds follow each other in seconds, not every 5 minutes: an archive a
# repack replaced goes at the next round's prune instead of after
# --repack-grace (15m, i.e. three rounds in production); what still awaits
# deletion at the end is reported apart.
export HOMESNAP_REPACK_GRACE=${HOMESNAP_REPACK_GRACE:-0}
$b/genhome -preset "$PRESET" -seed 1 "$work/home" >/dev/null
mkdir "$work/store" "$work/fresh"
$b/snapshot --once --home "$work/home" --store "$work/store" --keep-last "$KEEP" >/dev/null
for round in $(seq 2 "$ROUNDS"); do
  $b/genhome -churn 0.01 -seed "$round" "$work/home" >/dev/null
  $b/snapshot --once --home "$work/home" --store "$work/store" --keep-last "$KEEP" >/dev/null
done
$b/snapshot --once --home "$work/home" --store "$work/fresh" >/dev/null
stored=$(du -sb "$work/store" | cut -f1)
fresh=$(du -sb "$work/fresh" | cut -f1)
read -r snaps archives < <($b/restore --list --output json --store "$work/store" |
  python3 -c 'import json,sys; l=json.load(sys.stdin); print(len(l), len([r for r in l if r.get("head")][0]["archives"]))')
echo "preset $PRESET, $ROUNDS rounds of 1 % churn, --keep-last $KEEP"
echo "stored: $stored bytes in $snaps snapshots; one fresh full snapshot: $fresh bytes; ratio $(awk "BEGIN{printf \"%.2f\", $stored/$fresh}")"
echo "archives the head points into: $archives"
# Archives and manifests apart: they answer to different changes.
part() { find "$1" -path "*/$2" -type f -printf '%s\n' | awk '{s+=$1} END{print s+0}'; }
sa=$(part "$work/store" 'archives/*') fa=$(part "$work/fresh" 'archives/*')
sm=$(part "$work/store" 'snapshots/*.json.zst*') fm=$(part "$work/fresh" 'snapshots/*.json.zst*')
echo "archives: $sa bytes, $(awk "BEGIN{printf \"%.2f\", $sa/$fa}")× the fresh snapshot's archive ($fa)"
echo "manifests: $sm bytes, $(awk "BEGIN{printf \"%.1f\", $sm/$fm}")× the fresh snapshot's manifest ($fm)"
$b/storestat "$work/store" | tail -1
pending=$(find "$work/store/repacks" -name '*.json' 2>/dev/null | wc -l)
$b/prune --store "$work/store" --keep-last "$KEEP" --repack-grace 0 --repack=false >/dev/null
after=$(du -sb "$work/store" | cut -f1)
echo "after a final prune (--repack-grace 0, deleting what $pending repack notes still kept for restores in flight): $after bytes, ratio $(awk "BEGIN{printf \"%.2f\", $after/$fresh}")"
