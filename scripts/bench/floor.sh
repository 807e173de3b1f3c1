#!/usr/bin/env bash
# What this machine can do at most for the benchmark rows (BENCHMARKS.md,
# "Floors"), on the same generated home and selection as scripts/bench.sh:
#
#   scripts/bench/floor.sh [small|medium|million]     # default: medium
#
# Each figure is one sample, with the load average (1, 5, 15 min) read
# just before it; the page cache is dropped before every cold row when
# /proc/sys/vm/drop_caches is writable (the output says when it was not).
#
#   stat scan         find -printf over the selection (bench.sh's floor of
#                     "nothing changed"), cold
#   read, 1 stream    every selected file read once, in walk order, by one
#                     process (xargs cat), cold
#   read, 8 streams   the same split over 8 processes (xargs -P 8), cold
#   write + fsync     the selected bytes as one file (dd conv=fsync), from a
#                     warm copy: the floor of writing an archive or a restore
#   zstd -1, 1 core   that file compressed by zstd -1 -T1 (the CLI's level
#                     closest to homesnap's default, klauspost SpeedFastest),
#                     warm, output discarded; zstd -1, 2 cores: -T2
#   SHA-256           openssl dgst -sha256 of that file, warm (SHA-NI where
#                     the CPU has it, as Go's crypto/sha256)
#   read, 1 file      that file read back, cold (dd): the disk's bandwidth
#                     without the per-file cost
#   create dirs+files the selection's directories (mkdir -p) and empty
#                     files (touch) made again in an empty directory, then
#                     sync -f: the floor of a restore's file creation
#
# Then homesnap itself on a copy of the home, built from this tree: a full
# `snapshot --once` into an empty local store, the same again (nothing
# changed) and `restore` into an empty directory, each cold, so that every
# row's distance to its floor is a ratio of the same run:
#   full snapshot / max(read 8 streams, zstd 2 cores)
#   nothing changed / stat scan
#   restore / (create dirs+files + write + fsync)
# plus parallel against sequential reads and two cores against one: on
# this shared machine ratios hold better than the absolute figures.
#
# Environment: HOMESNAP_BENCH_DIR (default /tmp/homesnap-bench, shared with
# bench.sh: the generated home is reused), HOMESNAP_BENCH_NICE (default 10).
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=go1.26.10 # go.mod's go line
PRESET=${1:-medium}
BENCH=${HOMESNAP_BENCH_DIR:-/tmp/homesnap-bench}
NICE=${HOMESNAP_BENCH_NICE:-10}
[[ $BENCH = /* && $BENCH != / ]] || { echo "HOMESNAP_BENCH_DIR must be an absolute path other than /" >&2; exit 2; }
for tool in zstd openssl dd xargs find /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "floor: $tool is missing (apt-get install -y zstd openssl coreutils findutils time)" >&2; exit 1; }
done
log() { printf '== %s\n' "$*" >&2; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

mkdir -p "$BENCH/bin"
go build -o "$BENCH/bin/" ./cmd/genhome ./cmd/snapshot ./cmd/restore
home=$BENCH/home-$PRESET # as bench.sh names and stamps it
stamp="$PRESET seed 1 genhome $(sha256sum "$BENCH/bin/genhome" | cut -c1-16)"
if [ "$(cat "$home/.bench-stamp" 2>/dev/null || true)" != "$stamp" ]; then
  log "generating the $PRESET home in $home"
  rm -rf "$home" && "$BENCH/bin/genhome" -preset "$PRESET" -seed 1 "$home" >&2 && echo "$stamp" >"$home/.bench-stamp"
fi
work=$BENCH/work-floor
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

# The selection of bench.sh (the jenkins preset), relative to the home.
roots=()
for r in nodes secrets jobs identity.key.enc secret.key secret.key.not-so-secret; do
  [ -e "$home/$r" ] && roots+=("$r")
done
sel() {
  (cd "$home" && find "${roots[@]}" \
    \( -path 'jobs/*' \( -name workspace -o -name 'workspace@*' \) -o -name '*-atomic*tmp' \) -prune -o "$@")
}
sel -type f -print0 >"$work/files"
sel -type d -print0 >"$work/dirs"
files=$(tr -cd '\0' <"$work/files" | wc -c)
dirs=$(tr -cd '\0' <"$work/dirs" | wc -c)
bytes=$(sel -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
mib=$(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}')
log "selection: $files files, $dirs directories, $mib MiB"

if (sync && echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then cache=cold; else cache=warm; fi
drop() { if [ "$cache" = cold ]; then sync && echo 3 >/proc/sys/vm/drop_caches; fi; }

rows=()
# run NAME COLD(0|1) COMMAND...: one sample; its wall and CPU seconds.
run() {
  local name=$1 cold=$2 l
  shift 2
  [ "$cold" = 1 ] && drop
  sync
  l=$(load)
  /usr/bin/time -f '%e %U %S' -o "$work/t" nice -n "$NICE" "$@" >>"$work/log" 2>&1 ||
    { echo "floor: $name failed:" >&2; tail -5 "$work/log" >&2; exit 1; }
  read -r wall user sys <"$work/t"
  eval "w_${name//[^a-z0-9]/_}=$wall"
  rows+=("$name|$wall|$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.2f", u + s}')|$l")
  log "$name: $wall s (load $l)"
}

run "stat scan" 1 bash -c "cd '$home' && find ${roots[*]} \\( -path 'jobs/*' \\( -name workspace -o -name 'workspace@*' \\) -o -name '*-atomic*tmp' \\) -prune -o -printf '%s %T@ %C@ %i %m\\n' >/dev/null"
run "read, 1 stream" 1 bash -c "cd '$home' && xargs -0 -n 2000 cat <'$work/files' >/dev/null"
run "read, 8 streams" 1 bash -c "cd '$home' && xargs -0 -n 500 -P 8 cat <'$work/files' >/dev/null"
(cd "$home" && xargs -0 -n 2000 cat <"$work/files") >"$work/data" # the selected bytes, warm
run "write + fsync" 0 dd if="$work/data" of="$work/written" bs=1M conv=fsync status=none
rm -f "$work/written"
run "read, 1 file" 1 dd if="$work/data" of=/dev/null bs=1M status=none
run "zstd -1, 1 core" 0 zstd -q -1 -T1 -c "$work/data" -o /dev/null
run "zstd -1, 2 cores" 0 zstd -q -1 -T2 -c "$work/data" -o /dev/null
run "SHA-256" 0 openssl dgst -sha256 -out /dev/null "$work/data"
mkdir "$work/tree"
run "create dirs+files" 0 bash -c "cd '$work/tree' && xargs -0 mkdir -p <'$work/dirs' && xargs -0 touch <'$work/files' && sync -f ."
rm -rf "$work/tree" "$work/data"

cp -a "$home" "$work/home" # a snapshot marks the home it read: never the shared one
mkdir "$work/store" "$work/restored"
hs=("--log-format" json)
run "homesnap full" 1 "$BENCH/bin/snapshot" --once --home "$work/home" --store "$work/store" "${hs[@]}"
run "homesnap nothing changed" 1 "$BENCH/bin/snapshot" --once --home "$work/home" --store "$work/store" "${hs[@]}"
run "homesnap restore" 1 "$BENCH/bin/restore" --home "$work/restored" --store "$work/store" "${hs[@]}"

rate() { awk -v n="$1" -v s="$2" 'BEGIN {if (s > 0) printf "%.0f", n / s; else print "-"}'; }
mbs() { awk -v b="$bytes" -v s="$1" 'BEGIN {if (s > 0) printf "%.0f MB/s", b / s / 1e6; else print "-"}'; }
echo
echo "Floors, $PRESET home (genhome -preset $PRESET -seed 1): $files files, $dirs directories, $mib MiB selected; $cache cache for the cold rows; $(date -u +%Y-%m-%dT%H:%MZ); nice $NICE"
echo
echo "| row | wall s | CPU s | rate | load (1, 5, 15 min) |"
echo "|---|---:|---:|---|---|"
for r in "${rows[@]}"; do
  IFS='|' read -r name wall cpu l <<<"$r"
  case $name in
  "stat scan") what="$(rate $((files + dirs)) "$wall") paths/s" ;;
  "create dirs+files" | "homesnap nothing changed") what="$(rate $((files + dirs)) "$wall") paths/s" ;;
  *) what=$(mbs "$wall") ;;
  esac
  echo "| $name | $wall | $cpu | $what | $l |"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f×", a / b}'; }
full_floor=$(awk -v a="$w_read__8_streams" -v b="$w_zstd__1__2_cores" 'BEGIN {print (a > b ? a : b)}')
restore_floor=$(awk -v a="$w_create_dirs_files" -v b="$w_write___fsync" 'BEGIN {print a + b}')
echo
echo "Same-run ratios (wall): homesnap full / its floor (max of read 8 streams, zstd 2 cores: $full_floor s) $(ratio "$w_homesnap_full" "$full_floor");" \
  "nothing changed / stat scan $(ratio "$w_homesnap_nothing_changed" "$w_stat_scan");" \
  "restore / (create dirs+files + write + fsync: $restore_floor s) $(ratio "$w_homesnap_restore" "$restore_floor");" \
  "read 8 streams / 1 stream $(ratio "$w_read__8_streams" "$w_read__1_stream"); zstd 2 cores / 1 core $(ratio "$w_zstd__1__2_cores" "$w_zstd__1__1_core")."
