#!/usr/bin/env bash
# Before/after: the same scenarios with the binaries of two revisions, in
# alternating pairs on one generated home, so that a change's cost is read
# from samples taken side by side rather than from runs days apart:
#
#   scripts/bench/ab.sh OLD NEW [preset] [pairs]     # default: medium 3
#
# OLD and NEW are git revisions of this repository. Scenarios: a full
# snapshot into an empty local store, nothing changed (a second snapshot),
# and a restore into an empty directory. Each pair runs OLD then NEW, the
# next pair NEW then OLD. The page cache is dropped before every measured
# command when possible, and each restore waits out the file system's
# memory of the last one's removal (below). HOMESNAP_AB_NEW_ENV (e.g. "HOMESNAP_AUTH_KEY_FILE=/k")
# is added to NEW's environment only: the cost of an option OLD lacks.
# Output: one TSV line per sample and the means, NEW/OLD per scenario.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)
[ $# -ge 2 ] || { echo "usage: $0 OLD NEW [preset] [pairs]" >&2; exit 2; }
OLD=$1 NEW=$2 PRESET=${3:-medium} PAIRS=${4:-3}
BENCH=${HOMESNAP_BENCH_DIR:-/tmp/homesnap-ab}
[[ $BENCH = /* && $BENCH != / ]] || { echo "HOMESNAP_BENCH_DIR must be an absolute path other than /" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "ab: GNU time is missing (apt-get install -y time)" >&2; exit 1; }
log() { printf '== %s\n' "$*" >&2; }
. scripts/bench/lib.sh

build() { # rev dir
  local src
  src=$(mktemp -d)
  git worktree add -q --detach "$src" "$1"
  (cd "$src" && go build -o "$2/" ./cmd/snapshot ./cmd/restore ./cmd/genhome)
  git worktree remove --force "$src"
}
mkdir -p "$BENCH"
log "building $OLD and $NEW"
build "$OLD" "$BENCH/old"
build "$NEW" "$BENCH/new"

home=$BENCH/home-$PRESET
generated_home "$BENCH/new/genhome" "$PRESET" "$home"

drop() { sync && echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null
if drop; then cache=cold; else cache=warm; fi
work=$BENCH/work
samples=$BENCH/samples.tsv
: >"$samples"

measure() { # side scenario cmd...
  local side=$1 scenario=$2 out
  shift 2
  [ $cache = cold ] && drop
  out=$(mktemp)
  /usr/bin/time -f '%e %U %S %M' -o "$out" "$@" >/dev/null 2>"$work/$side-$scenario.log" ||
    { cat "$work/$side-$scenario.log" >&2; exit 1; }
  read -r wall user sys rss <"$out" && rm -f "$out"
  printf '%s\t%s\t%s\t%s\t%s\n' "$side" "$scenario" "$wall" "$(echo "$user + $sys" | bc)" "$rss" | tee -a "$samples"
}

# On ext4 without a journal a new inode skips those freed in the last
# dirty_expire_centisecs, 5 s more while their block is dirty
# (recently_deleted), which was seen slowing a restore right after the last
# one's removal: every restore starts that long after the removal.
settle=$(($(cat /proc/sys/vm/dirty_expire_centisecs 2>/dev/null || echo 3000) / 100 + 6))
removed=0
remove_restored() { rm -rf "$work/restored" && sync && removed=$SECONDS; }
settled() { local left=$((removed + settle - SECONDS)); [ $left -le 0 ] || sleep "$left"; }

run() { # side
  local side=$1 bin=$BENCH/$1 extra=()
  [ "$side" = new ] && [ -n "${HOMESNAP_AB_NEW_ENV:-}" ] && read -ra extra <<<"$HOMESNAP_AB_NEW_ENV"
  rm -rf "$work/store" && mkdir -p "$work/store"
  local e=(env "${extra[@]}" HOMESNAP_LOG_LEVEL=warn)
  measure "$side" full "${e[@]}" "$bin/snapshot" --once --home "$home" --store "file://$work/store"
  measure "$side" no-change "${e[@]}" "$bin/snapshot" --once --home "$home" --store "file://$work/store"
  settled
  measure "$side" restore "${e[@]}" "$bin/restore" --home "$work/restored" --store "file://$work/store"
  remove_restored
}

rm -rf "$work" && mkdir -p "$work"
log "$PAIRS pairs, $cache cache; columns: side scenario wall_s cpu_s peak_rss_kb"
for ((i = 0; i < PAIRS; i++)); do
  if ((i % 2 == 0)); then run old && run new; else run new && run old; fi
done
rm -rf "$work"

echo
echo "means over $PAIRS pairs ($cache cache), $OLD -> $NEW:"
awk -F'\t' '{ n[$1 FS $2]++; w[$1 FS $2] += $3; c[$1 FS $2] += $4; if ($5 > r[$1 FS $2]) r[$1 FS $2] = $5 }
  END {
    split("full no-change restore", s, " ")
    printf "%-10s %10s %10s %8s %10s %10s %8s %12s\n", "scenario", "old wall", "new wall", "new/old", "old cpu", "new cpu", "new/old", "RSS MiB o/n"
    for (i = 1; i <= 3; i++) {
      o = "old" FS s[i]; m = "new" FS s[i]
      printf "%-10s %10.2f %10.2f %7.3fx %10.2f %10.2f %7.3fx %5.1f/%5.1f\n", s[i], w[o]/n[o], w[m]/n[m], (w[m]/n[m])/(w[o]/n[o]), c[o]/n[o], c[m]/n[m], (c[m]/n[m])/(c[o]/n[o]), r[o]/1024, r[m]/1024
    }
  }' "$samples"
