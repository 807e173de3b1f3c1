#!/usr/bin/env bash
# Restore through a store's latency: the same snapshot restored from the
# local disk and from S3 through toxiproxy's added latency, by the binaries
# of two revisions, alternating, so that what the latency costs is read from
# samples taken side by side:
#
#   eval "$(scripts/bench/s3-servers.sh start)"
#   scripts/bench/restore-latency.sh OLD NEW [preset] [pairs]   # medium 2
#   scripts/bench/s3-servers.sh stop
#
# One snapshot of the generated home goes into a local store and one into
# HOMESNAP_BENCH_S3_URL (sub-prefix latency-STAMP, left in the bucket); the
# restores read the latter through HOMESNAP_BENCH_S3_SLOW_URL. Each pair
# runs OLD (local, then slow) and NEW (the same), the next pair NEW first.
# The page cache is dropped before every restore when possible, as
# scripts/bench.sh does. HOMESNAP_BENCH_NICE (e.g. -10) runs the restores
# at that niceness, for a machine others load. Output: one TSV line per
# sample (side, store, wall s, CPU s, peak RSS KiB, load average) and the
# medians, slow/local per side.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=go1.26.10 # go.mod's go line
[ $# -ge 2 ] || { echo "usage: $0 OLD NEW [preset] [pairs]" >&2; exit 2; }
OLD=$1 NEW=$2 PRESET=${3:-medium} PAIRS=${4:-2}
: "${HOMESNAP_BENCH_S3_URL:?run eval \"\$(scripts/bench/s3-servers.sh start)\" first}"
: "${HOMESNAP_BENCH_S3_SLOW_URL:?run eval \"\$(scripts/bench/s3-servers.sh start)\" first}"
BENCH=${HOMESNAP_BENCH_DIR:-/tmp/homesnap-latency}
[[ $BENCH = /* && $BENCH != / ]] || { echo "HOMESNAP_BENCH_DIR must be an absolute path other than /" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "restore-latency: GNU time is missing (apt-get install -y time)" >&2; exit 1; }
log() { printf '== %s\n' "$*" >&2; }

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
stamp="$PRESET seed 1 $(sha256sum "$BENCH/new/genhome" | cut -c1-16)"
if [ "$(cat "$home.stamp" 2>/dev/null)" != "$stamp" ]; then
  log "generating the $PRESET home in $home"
  rm -rf "$home" && "$BENCH/new/genhome" -preset "$PRESET" -seed 1 "$home" >&2 && echo "$stamp" >"$home.stamp"
fi

sub() { printf "%s" "${1/\?//latency-$RUN?}"; } # the URL with a sub-prefix
RUN=$(date -u +%Y%m%dT%H%M%S)
work=$BENCH/work
rm -rf "$work" && mkdir -p "$work/store"
log "snapshots into file://$work/store and $(sub "$HOMESNAP_BENCH_S3_URL")"
HOMESNAP_LOG_LEVEL=warn "$BENCH/new/snapshot" --once --home "$home" --store "file://$work/store" >/dev/null
HOMESNAP_LOG_LEVEL=warn "$BENCH/new/snapshot" --once --home "$home" --store "$(sub "$HOMESNAP_BENCH_S3_URL")" >/dev/null

drop() { sync && echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null
if drop; then cache=cold; else cache=warm; fi
samples=$BENCH/samples.tsv
: >"$samples"
measure() { # side label url
  local out t0 t1
  rm -rf "$work/restored"
  [ $cache = cold ] && drop
  out=$(mktemp)
  t0=$EPOCHREALTIME
  nice -n "${HOMESNAP_BENCH_NICE:-0}" /usr/bin/time -f '%U %S %M' -o "$out" \
    "$BENCH/$1/restore" --home "$work/restored" --store "$3" --log-format json >/dev/null 2>"$work/$1-$2.log" ||
    { cat "$work/$1-$2.log" >&2; exit 1; }
  t1=$EPOCHREALTIME
  read -r user sys rss <"$out" && rm -f "$out"
  printf '%s\t%s\t%.2f\t%s\t%s\t%s\n' "$1" "$2" "$(echo "$t1 - $t0" | bc)" "$(echo "$user + $sys" | bc)" "$rss" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$samples"
}
run() { measure "$1" local "file://$work/store" && measure "$1" slow "$(sub "$HOMESNAP_BENCH_S3_SLOW_URL")"; }

log "$PAIRS pairs, $cache cache; columns: side store wall_s cpu_s peak_rss_kb load"
for ((i = 0; i < PAIRS; i++)); do
  if ((i % 2 == 0)); then run old && run new; else run new && run old; fi
done
rm -rf "$work"

echo
echo "medians over $PAIRS pairs ($cache cache), $OLD -> $NEW:"
for side in old new; do
  for st in local slow; do
    awk -F'\t' -v s=$side -v t=$st '$1 == s && $2 == t { print $3 }' "$samples" | sort -n |
      awk -v k="$side $st" '{ a[NR] = $1 } END { printf "%s %.2f\n", k, (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
  done
done | awk '{ m[$1 " " $2] = $3 } END {
  for (i = 1; i <= 2; i++) { s = i == 1 ? "old" : "new"
    printf "%s: local %.2f s, slow %.2f s, slow/local %.2fx\n", s, m[s " local"], m[s " slow"], m[s " slow"] / m[s " local"] } }'
