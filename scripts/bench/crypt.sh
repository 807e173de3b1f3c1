#!/usr/bin/env bash
# What age encryption costs: a full snapshot and a restore of the same
# generated home, plain and encrypted, side by side.
#
#   scripts/bench/crypt.sh [small|medium] [runs]      # default: medium 3
#
# Each run takes, with fresh local stores, a plain and an encrypted
# `snapshot --once` and restores each into an empty directory; the order of
# plain and encrypted alternates between runs so that drift on a shared
# machine hits both alike. The page cache is warm (the tree is read before
# each run): the comparison isolates the CPU that encryption adds, and
# leaves other users' caches alone. Prints medians of wall and CPU time
# (user+sys, GNU time) and the overheads, user CPU alone too (system time
# swings most on a busy machine), and checks the ≤ 10 % target.
#
# Environment: HOMESNAP_BENCH_DIR (default /tmp/homesnap-bench-crypt),
# HOMESNAP_BENCH_BIN (prebuilt snapshot, restore, genhome). Needs age-keygen
# and GNU time.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)
PRESET=${1:-medium}
RUNS=${2:-3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=${HOMESNAP_BENCH_DIR:-/tmp/homesnap-bench-crypt}
BIN=${HOMESNAP_BENCH_BIN:-$BENCH/bin}
die() { echo "crypt.sh: $*" >&2; exit 1; }
command -v age-keygen >/dev/null || die "age-keygen is missing: apt-get install -y age"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing: apt-get install -y time"
mkdir -p "$BENCH"
if [ -z "${HOMESNAP_BENCH_BIN:-}" ]; then
  (cd "$ROOT" && go build -o "$BIN/" ./cmd/snapshot ./cmd/restore ./cmd/genhome) || die "go build failed"
fi
HOME_DIR=$BENCH/home-$PRESET
[ -d "$HOME_DIR" ] || "$BIN/genhome" -preset "$PRESET" -seed 1 "$HOME_DIR" >/dev/null
KEY=$BENCH/key.txt
[ -f "$KEY" ] || age-keygen -o "$KEY" 2>/dev/null
SAMPLES=$BENCH/samples.tsv
: >"$SAMPLES"
trap 'rm -rf "$BENCH/work"' EXIT

# measure TAG CMD...: wall and CPU seconds of one command into $SAMPLES.
measure() {
  local tag=$1; shift
  /usr/bin/time -f '%e %U %S' -o "$BENCH/time" "$@" >/dev/null 2>"$BENCH/log" || { cat "$BENCH/log" >&2; die "$tag failed"; }
  read -r wall user sys <"$BENCH/time"
  printf '%s\t%s\t%s\t%s\n' "$tag" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.2f", u + s}')" "$user" >>"$SAMPLES"
}

run_mode() { # MODE: plain or age
  local mode=$1 store=$BENCH/work/store-$1 target=$BENCH/work/restore-$1 keys=()
  [ "$mode" = age ] && keys=(--age-identity-file "$KEY")
  rm -rf "$store" "$target" && mkdir -p "$store"
  measure "snapshot-$mode" "$BIN/snapshot" --once --home "$HOME_DIR" --store "$store" --log-format json "${keys[@]}"
  measure "restore-$mode" "$BIN/restore" --home "$target" --store "$store" --log-format json "${keys[@]}"
  du -sb "$store" | cut -f1 >"$BENCH/stored-$mode"
  rm -rf "$store" "$target"
}

for r in $(seq "$RUNS"); do
  tar -cf - -C "$HOME_DIR" . >/dev/null # warm the cache
  if [ $((r % 2)) = 1 ]; then run_mode plain; run_mode age; else run_mode age; run_mode plain; fi
  echo "run $r/$RUNS done" >&2
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
col() { awk -F'\t' -v t="$1" -v c="$2" '$1==t {print $c}' "$SAMPLES" | median; }
echo "| scenario | plain wall s | age wall s | wall overhead | plain CPU s | age CPU s | CPU overhead | user CPU overhead |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
status=0
for s in snapshot restore; do
  pw=$(col "$s-plain" 2) aw=$(col "$s-age" 2) pc=$(col "$s-plain" 3) ac=$(col "$s-age" 3)
  ow=$(awk -v a="$aw" -v p="$pw" 'BEGIN {printf "%.1f", (a - p) * 100 / p}')
  oc=$(awk -v a="$ac" -v p="$pc" 'BEGIN {printf "%.1f", (a - p) * 100 / p}')
  ou=$(awk -v a="$(col "$s-age" 4)" -v p="$(col "$s-plain" 4)" 'BEGIN {printf "%.1f", (a - p) * 100 / p}')
  echo "| $s ($PRESET, $RUNS runs) | $pw | $aw | $ow % | $pc | $ac | $oc % | $ou % |"
  awk -v o="$ow" 'BEGIN {exit !(o <= 10)}' || status=1
done
echo "stored bytes: plain $(cat "$BENCH/stored-plain"), age $(cat "$BENCH/stored-age")"
[ $status = 0 ] && echo "target ≤ 10 % wall overhead: pass" || echo "target ≤ 10 % wall overhead: MISS"
