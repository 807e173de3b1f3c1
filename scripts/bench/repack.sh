#!/usr/bin/env bash
# The repack of the big archive on a generated home (default the million
# preset), each step by GNU time with the page cache dropped when that is
# possible:
#
#   scripts/bench/repack.sh [preset]        # default: million
#
# 1. `snapshot --once` into an empty store: one full snapshot, its
#    archive the home's every file;
# 2. `genhome -churn 0.01` (1 % of the files changed, added or removed),
#    then a second `snapshot --once`;
# 3. `prune --keep-last 1 --repack-max-unused 0.5 --repack-grace 0`: the
#    first snapshot goes, and both archives hold more than 0.5 % that the
#    kept one no longer uses, so what it uses of them (about the whole
#    home) is copied into one new archive and its manifests re-pointed;
# 4. `restore --target` of the head into an empty directory, which checks
#    every file against its SHA-256; its entries, files and bytes must be
#    the second snapshot's.
#
# The churn changes the generated home: the script removes its stamp, so
# the next run (of any script sharing it) generates it again.
#
# Environment: HOMESNAP_BENCH_DIR (default /tmp/homesnap-scale, shared
# with scale.sh and journal.sh) holds the generated home and the work
# directory (removed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)
PRESET=${1:-million}
BENCH=${HOMESNAP_BENCH_DIR:-/tmp/homesnap-scale}
[[ $BENCH = /* && $BENCH != / ]] || { echo "HOMESNAP_BENCH_DIR must be an absolute path other than /" >&2; exit 2; }
command -v /usr/bin/time >/dev/null || { echo "repack: /usr/bin/time is missing (apt-get install -y time)" >&2; exit 1; }
log() { printf '== %s\n' "$*" >&2; }
. scripts/bench/lib.sh

mkdir -p "$BENCH"
b=$BENCH/bin
go build -o "$b/" ./cmd/homesnap ./cmd/genhome
home=$BENCH/home-$PRESET
generated_home "$b/genhome" "$PRESET" "$home"
work=$BENCH/work-repack
rm -rf "$work" && mkdir -p "$work/store"
trap 'rm -rf "$work"' EXIT
store=$work/store
export HOMESNAP_LOG_FORMAT=json HOMESNAP_LOG_LEVEL=warn

# run NAME CMD...: one measured step (timed), a row of the table.
run() {
  timed "$@"
  printf '| %s | %s | %s | %s | %s |\n' "$1" "$T_WALL" "$T_USER" "$T_SYS" "$((T_RSS / 1024))" >>"$work/rows"
  log "$1: $T_WALL s wall, $T_USER s user, $T_SYS s sys, $((T_RSS / 1024)) MiB peak RSS"
}

run "full snapshot into an empty store" "$b/homesnap" snapshot --once --home "$home" --store "$store"
rm -f "$home.stamp"
"$b/genhome" -churn 0.01 -seed 9 "$home" >&2
run "snapshot after 1 % churn" "$b/homesnap" snapshot --once --output json --home "$home" --store "$store"
tree() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["entries"], r["files"], r.get("bytes"))' "$1"; }
want=$(tree "$work/out")
HOMESNAP_LOG_LEVEL=info run "prune and repack" "$b/homesnap" prune --store "$store" --keep-last 1 --repack-max-unused 0.5 --repack-grace 0
repacked=$(grep '"repacked"' "$work/err" || true)
[ -n "$repacked" ] || { echo "repack: the prune repacked nothing:" >&2; cat "$work/err" >&2; exit 1; }
run "restore of the head" "$b/homesnap" restore --output json --store "$store" --target "$work/restored"
got=$(tree "$work/out")
[ "$got" = "$want" ] || { echo "repack: the restore holds $got (entries files bytes), the snapshot $want" >&2; exit 1; }

echo "# the repack of the big archive: preset $PRESET, $cache cache, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| step | wall s | user s | sys s | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|"
cat "$work/rows"
echo
echo "repack: $repacked"
echo "restored (entries files bytes): $got, as the snapshot"
