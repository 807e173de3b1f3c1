#!/usr/bin/env bash
# homesnap at scale: one sample of each scenario on a generated home of
# about a million small files (the `million` preset), against GNU tar +
# zstd and a stat scan of the same tree, with the page cache dropped
# before every measured command when that is possible:
#
#   scripts/bench/scale.sh [preset]        # default: million
#
# Five million files (the five-million preset) on a disk of 80 GB: the
# home and its restore take ~33 GB each in 4 KiB blocks, so both go on a
# file system of 1 KiB blocks made for the run, and the home is changed in
# place (as root; direct I/O so the loop file is not cached twice):
#
#   truncate -s 64G IMG && mkfs.ext4 -b 1024 -N 15000000 -m 0 \
#     -E lazy_itable_init=0,lazy_journal_init=0 IMG   # no background init during the runs
#   mount -o noatime "$(losetup --direct-io=on -f --show IMG)" /mnt/hs5m
#   HOMESNAP_BENCH_DIR=/mnt/hs5m HOMESNAP_BENCH_IN_PLACE=1 \
#     HOMESNAP_BENCH_TAR_WALK=0 scripts/bench/scale.sh five-million
#
# Rows: full snapshot, nothing changed, one appended file, 1 % churn
# (time and bytes written to the store), restore into an empty directory,
# and the stored bytes of one full snapshot. tar archives exactly the paths
# of homesnap's first manifest, and once more walking the selected
# top-level paths itself. restic (backup of the same selection, again with
# nothing changed and after the churn, restore) only when asked: at a
# million files it doubles the script's time; scripts/bench.sh compares it
# on the medium home every run.
#
# Environment:
#   HOMESNAP_BENCH_DIR       the generated home (kept and reused) and the
#                            working stores (removed); default /tmp/homesnap-scale
#   HOMESNAP_BENCH_IN_PLACE  1: snapshot and change the generated home itself
#                            rather than a copy, for a disk that holds the
#                            home and its restore but not a third copy;
#                            the next run generates it again
#   HOMESNAP_BENCH_TAR_WALK  0: leave out the row of tar walking the home
#                            itself (one more full read of the home)
#   HOMESNAP_BENCH_RESTIC    1: add restic's rows (apt-get install -y restic)
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)
PRESET=${1:-million}
BENCH=${HOMESNAP_BENCH_DIR:-/tmp/homesnap-scale}
[[ $BENCH = /* && $BENCH != / ]] || { echo "HOMESNAP_BENCH_DIR must be an absolute path other than /" >&2; exit 2; }
for tool in zstd tar python3 /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "scale: $tool is missing (apt-get install -y zstd tar python3 time)" >&2; exit 1; }
done
log() { printf '== %s\n' "$*" >&2; }
. scripts/bench/lib.sh
RESTIC=${HOMESNAP_BENCH_RESTIC:-0}
[[ $RESTIC = [01] ]] || { echo "scale: HOMESNAP_BENCH_RESTIC must be 0 or 1, got '$RESTIC'" >&2; exit 2; }
if [ "$RESTIC" = 1 ]; then
  command -v restic >/dev/null || { echo "scale: restic is missing (apt-get install -y restic)" >&2; exit 1; }
fi

mkdir -p "$BENCH"
b=$BENCH/bin
go build -o "$b/" ./cmd/snapshot ./cmd/restore ./cmd/genhome
home=$BENCH/home-$PRESET
generated_home "$b/genhome" "$PRESET" "$home"
work=$BENCH/work
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
h=$work/home # the home snapshotted and changed
if [ "${HOMESNAP_BENCH_IN_PLACE:-0}" = 1 ]; then
  rm -f "$home.stamp" # changed below: the next run generates it again
  h=$home
else
  cp -a "$home" "$h"
fi
store=$work/store
mkdir "$store"
export HOMESNAP_LOG_FORMAT=json HOMESNAP_LOG_LEVEL=warn
export RESTIC_REPOSITORY=$work/restic-repo RESTIC_PASSWORD=homesnap-bench RESTIC_CACHE_DIR=$work/restic-cache
unset RESTIC_PASSWORD_FILE RESTIC_PASSWORD_COMMAND RESTIC_KEY_HINT
# restic_backup NAME: one timed restic backup of the selection (the roots
# and exclusions of scripts/bench.sh; its cache kept between backups, as
# a scheduled restic would).
restic_backup() {
  local args
  mapfile -d '' args < <(restic_backup_args "$h")
  run "$1" sh -c 'cd "$1" && shift && exec restic backup --quiet --host bench "$@"' sh "$h" "${args[@]}"
}

rows=()
# run NAME CMD...: one measured sample (timed); its wall and CPU seconds
# and peak RSS in T.
run() {
  timed "$@"
  T=("$T_WALL" "$(awk -v u="$T_USER" -v s="$T_SYS" 'BEGIN {printf "%.1f", u + s}')" "$((T_RSS / 1024))")
  log "$1: ${T[0]} s wall, ${T[1]} s CPU, ${T[2]} MiB"
}
bytes() { du -sb "$1" | cut -f1; }
mb() { awk -v b="$1" 'BEGIN {printf "%.2f", b / 1e6}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
row() { rows+=("| $1 | $2 | $3 | $4 |"); }
# same_tree HOME RESTORED: every path of the restore has the home's type,
# mode, owner, size, mtime and link target, and the restore holds as many
# paths as it reported restoring (its JSON summary's entries). Contents
# were checked against the manifest's SHA-256 by the restore itself.
same_tree() {
  python3 - "$1" "$2" "$work/err" <<'PY' || exit 1
import json, os, stat, sys
home, got, log = sys.argv[1:]
entries = None
for line in open(log):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if isinstance(e, dict) and "entries" in e:
        entries = e["entries"]
def attrs(p):
    st = os.lstat(p)
    link = os.readlink(p) if stat.S_ISLNK(st.st_mode) else ""
    size = st.st_size if stat.S_ISREG(st.st_mode) else 0
    return (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, size, st.st_mtime_ns, link)
n = bad = 0
for d, dirs, files in os.walk(got):
    for name in dirs + files:
        p = os.path.join(d, name)
        rel = os.path.relpath(p, got)
        if rel.startswith(".homesnap"):
            continue
        n += 1
        want = attrs(os.path.join(home, rel))
        if attrs(p) != want:
            bad += 1
            if bad <= 5:
                print(f"scale: {rel}: restored {attrs(p)}, home {want}", file=sys.stderr)
if bad or entries is None or n != entries:
    sys.exit(f"scale: the restore differs from the home: {bad} of {n} paths, the restore reported {entries} entries")
print(f"== restore exact: {n} paths match the home (type, mode, owner, size, mtime, link)", file=sys.stderr)
PY
}

run "full snapshot" "$b/snapshot" --once --home "$h" --store "$store"
full=("${T[@]}")
stored_full=$(bytes "$store")
zstd -dc "$store"/snapshots/*.json.zst | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if "path" in e:
        sys.stdout.write(e["path"] + "\0")' >"$work/list"
paths=$(tr -cd '\0' <"$work/list" | wc -c)
run "tar+zstd" sh -c 'cd "$1" && tar -cf - --no-recursion --null -T "$2" | zstd -3 -T0 -q -o "$3"' sh "$h" "$work/list" "$work/home.tar.zst"
tarfull=("${T[@]}")
n=$(zstd -dc "$work/home.tar.zst" | tar -t | wc -l)
[ "$n" -eq "$paths" ] || { echo "scale: tar stored $n paths, homesnap $paths" >&2; exit 1; }
row "full snapshot" "${full[0]} s, ${full[2]} MiB" "tar+zstd ${tarfull[0]} s" "$(ratio "${full[0]}" "${tarfull[0]}")× (≤ 0.8×)"
if [ "$RESTIC" = 1 ]; then
  restic init --quiet >/dev/null
  restic_backup "restic backup"
  rfull=("${T[@]}")
  stored_restic=$(bytes "$RESTIC_REPOSITORY")
  n=$(restic ls latest --quiet | grep -c '^/')
  [ "$n" -eq "$paths" ] || { echo "scale: restic stored $n paths, homesnap $paths: the selections differ" >&2; exit 1; }
  row "full snapshot" "${full[0]} s" "restic ${rfull[0]} s, ${rfull[1]} s CPU, ${rfull[2]} MiB" "$(ratio "${full[0]}" "${rfull[0]}")×"
fi
# The same tar letting itself walk the selected top-level paths, as an
# admin would type it: it reads in directory order with paths relative to
# each directory, which was faster than the sorted list above on this home
# (a few hundred unselected paths come along).
if [ "${HOMESNAP_BENCH_TAR_WALK:-1}" != 0 ]; then
  tops=$(tr '\0' '\n' <"$work/list" | cut -d/ -f1 | sort -u | tr '\n' ' ')
  run "tar+zstd, tar walking" sh -c 'out=$1 dir=$2; shift 2; cd "$dir" && tar -cf - "$@" | zstd -3 -T0 -q -o "$out"' sh "$work/walked.tar.zst" "$h" $tops
  tarwalk=("${T[@]}")
  rm -f "$work/walked.tar.zst"
  row "full snapshot, tar walking the selected top-level paths itself" "${full[0]} s" "tar+zstd ${tarwalk[0]} s" "$(ratio "${full[0]}" "${tarwalk[0]}")×"
fi

run "nothing changed" "$b/snapshot" --once --home "$h" --store "$store"
nc=("${T[@]}")
[ ! -s "$work/out" ] || { echo "scale: a snapshot was taken although nothing changed" >&2; exit 1; }
run "stat scan" find "$h" -printf '%i %s %C@ %m\n'
scan=("${T[@]}")
row "nothing changed" "${nc[0]} s, ${nc[2]} MiB" "find -printf ${scan[0]} s" "$(ratio "${nc[0]}" "${scan[0]}")× (≤ 1.3×)"
if [ "$RESTIC" = 1 ]; then
  restic_backup "restic, nothing changed"
  rnc=("${T[@]}")
  row "nothing changed" "${nc[0]} s" "restic ${rnc[0]} s, ${rnc[1]} s CPU, ${rnc[2]} MiB" "$(ratio "${nc[0]}" "${rnc[0]}")×"
fi

before=$(bytes "$store")
log=$(find "$h/jobs" -name log -type f -print -quit) # not | head: SIGPIPE fails the pipe
echo "one more line" >>"$log"
run "one appended file" "$b/snapshot" --once --home "$h" --store "$store"
one=("${T[@]}")
written=$(($(bytes "$store") - before))
row "one appended file" "${one[0]} s, writes $(mb "$written") MB" "" "≤ 1 MB"

"$b/genhome" -churn 0.01 -seed 2 "$h" >"$work/churn" 2>&1
before=$(bytes "$store")
run "1 % churn" "$b/snapshot" --once --home "$h" --store "$store"
churn=("${T[@]}")
written=$(($(bytes "$store") - before))
archive=$(bytes "$store/archives/$(cat "$work/out").tar.zst")
limit=$((2 * archive + 5000000))
row "1 % churn" "${churn[0]} s, writes $(mb "$written") MB" "its archive $(mb "$archive") MB" \
  "$(ratio "$written" "$limit")× of 2× the archive + 5 MB ($(mb "$limit") MB; ≤ 1×)"
if [ "$RESTIC" = 1 ]; then
  before=$(bytes "$RESTIC_REPOSITORY")
  restic_backup "restic, 1 % churn"
  rchurn=("${T[@]}")
  row "1 % churn" "${churn[0]} s" "restic ${rchurn[0]} s, ${rchurn[2]} MiB, writes $(mb "$(($(bytes "$RESTIC_REPOSITORY") - before))") MB" "$(ratio "${churn[0]}" "${rchurn[0]}")×"
fi

mkdir "$work/r-hs"
run "restore" env HOMESNAP_LOG_LEVEL=info "$b/restore" --progress off --home "$work/r-hs" --store "$store"
rest=("${T[@]}")
same_tree "$h" "$work/r-hs"
rm -rf "$work/r-hs"
mkdir "$work/r-tar"
run "zstd -dc | tar -x; sync" sh -c 'zstd -dc "$1" | tar -x -C "$2" && sync -f "$2"' sh "$work/home.tar.zst" "$work/r-tar"
tarrest=("${T[@]}")
rm -rf "$work/r-tar"
row "restore into an empty directory" "${rest[0]} s, ${rest[2]} MiB" "zstd -dc \| tar -x; sync ${tarrest[0]} s" "$(ratio "${rest[0]}" "${tarrest[0]}")× (≤ 0.9×)"
if [ "$RESTIC" = 1 ]; then
  mkdir "$work/r-restic"
  run "restic restore" restic restore latest --quiet --target "$work/r-restic"
  rrest=("${T[@]}")
  n=$(select_find "$work/r-restic" -printf . | wc -c)
  want=$(select_find "$h" -printf . | wc -c)
  [ "$n" -eq "$want" ] || { echo "scale: restic restored $n selected paths, the home has $want" >&2; exit 1; }
  rm -rf "$work/r-restic"
  row "restore into an empty directory" "${rest[0]} s" "restic ${rrest[0]} s, ${rrest[1]} s CPU, ${rrest[2]} MiB" "$(ratio "${rest[0]}" "${rrest[0]}")×"
fi
row "stored bytes, one full snapshot" "$(mb "$stored_full") MB" "tar.zst $(mb "$(bytes "$work/home.tar.zst")") MB" \
  "$(ratio "$stored_full" "$(bytes "$work/home.tar.zst")")× (≤ 2×)"
[ "$RESTIC" != 1 ] || row "stored bytes, one full snapshot" "$(mb "$stored_full") MB" "restic $(mb "$stored_restic") MB" "$(ratio "$stored_full" "$stored_restic")×"

echo "# homesnap at scale: preset $PRESET, $paths paths, one sample each, $cache cache"
echo
echo "- $(date -u +%Y-%m-%dT%H:%MZ), $(git describe --always --dirty), $(nproc) CPUs, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- churn: $(tail -1 "$work/churn" | sed 's/^[^:]*: //')"
echo "- peak RSS of the snapshot rows and the restore: full ${full[2]} MiB, nothing changed ${nc[2]} MiB, churn ${churn[2]} MiB, restore ${rest[2]} MiB (target ≤ 128 MiB)"
echo
echo "| scenario | homesnap | peer | ratio (target) |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
