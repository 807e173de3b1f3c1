#!/usr/bin/env bash
# Benchmarks homesnap against its peers on one generated Jenkins home:
#
#   scripts/bench.sh [small|medium] [runs]      # default: medium 3
#
# For every run it copies the generated home to a fresh working tree and
# measures, with fresh stores:
#   full snapshot    homesnap | tar -cf - | zstd -3 -T0 > file | restic backup
#   nothing changed  homesnap | restic backup | find -printf stat scan (floor)
#   restore          homesnap | zstd -dc | tar -x | restic restore latest
#   1 % churn        homesnap | restic backup (incremental)
#                    and the sidecar with the change journal (its own
#                    "elapsed" for the snapshot a SIGUSR1 asks for)
# and, in the last run, the stored bytes after ten 1 %-churn incrementals.
# Every peer archives exactly the paths homesnap selects (the jenkins
# preset): tar gets the list from find, restic the same roots and excludes,
# and the entry counts are checked before anything is measured.
#
# It prints a table of medians (wall time), CPU time, peak RSS (the maximum
# over the runs; for a pipeline the sum of its processes' peaks) and the
# homesnap/peer ratios, checks them against the targets, and writes the
# table to $BENCH/results-PRESET.md; raw samples go to $BENCH/samples.tsv.
#
# The page cache is dropped before every measured command when
# /proc/sys/vm/drop_caches is writable ("cold cache"); otherwise the tree is
# read once beforehand and the output says "warm cache".
#
# Environment:
#   HOMESNAP_BENCH_DIR          work directory (default /tmp/homesnap-bench)
#   HOMESNAP_BENCH_BIN          directory holding prebuilt snapshot, restore
#                               and genhome (default: built from this tree
#                               into $BENCH/bin)
#   HOMESNAP_BENCH_DROP_CACHES  auto (default), 1 (must work) or 0 (never)
#   HOMESNAP_BENCH_CHURN_ROUNDS incrementals for the stored-bytes row (10)
#   HOMESNAP_BENCH_KEEP         1 keeps the working trees and stores at exit
#   HOMESNAP_BENCH_S3_URL       an S3 store URL (e.g. versitygw on loopback,
#                               s3://bucket/prefix?endpoint=http://127.0.0.1:7070&region=us-east-1&path_style=true
#                               with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY);
#                               adds homesnap and restic snapshot+restore
#                               rows against it (restic: s3:ENDPOINT/BUCKET/...)
#   HOMESNAP_BENCH_S3_SLOW_URL  the same through toxiproxy (20 ms latency)
# Each run writes under its own sub-prefix of the S3 URLs
# (PREFIX/bench-STAMP-rN); those objects are left in the bucket.
#
# Needs GNU tar and find, zstd, restic, GNU time (/usr/bin/time) and Go
# (unless HOMESNAP_BENCH_BIN is set):
#   apt-get install -y restic zstd time
set -euo pipefail
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)

usage() { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
log() { printf '== %s\n' "$*" >&2; }
trap 'rc=$?; [ $rc -eq 0 ] || printf "bench: failed (exit %d) at line %d: %s\n" $rc "$LINENO" "$BASH_COMMAND" >&2' ERR

PRESET=${1:-medium}
RUNS=${2:-3}
[ $# -le 2 ] || usage
case $PRESET in tiny | small | medium) ;; -h | --help) usage ;; *) die "unknown preset '$PRESET' (small or medium)" ;; esac
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "runs must be a positive integer, got '$RUNS'"

ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/bench/lib.sh"
BENCH=${HOMESNAP_BENCH_DIR:-/tmp/homesnap-bench}
CHURN_ROUNDS=${HOMESNAP_BENCH_CHURN_ROUNDS:-10}
DROP=${HOMESNAP_BENCH_DROP_CACHES:-auto}
[[ $CHURN_ROUNDS =~ ^[1-9][0-9]*$ ]] || die "HOMESNAP_BENCH_CHURN_ROUNDS must be a positive integer"
[[ $BENCH = /* ]] || die "HOMESNAP_BENCH_DIR must be an absolute path, got '$BENCH'"
[ "$BENCH" != / ] || die "HOMESNAP_BENCH_DIR must not be /"

# --- prerequisites -----------------------------------------------------------

need() { command -v "$1" >/dev/null 2>&1 || die "$1 is missing: $2"; }
need restic "apt-get install -y restic"
need zstd "apt-get install -y zstd"
need tar "apt-get install -y tar"
need find "apt-get install -y findutils"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing: apt-get install -y time"
# Not `| grep -q`: grep leaves at the first match and time's SIGPIPE fails the pipe under pipefail.
[[ $(/usr/bin/time -v true 2>&1) == *'Maximum resident set size'* ]] || die "/usr/bin/time is not GNU time (no -v): apt-get install -y time"
tar --version | grep -q 'GNU tar' || die "tar is not GNU tar"

# The bench directory holds a marker so that cleaning never touches a
# directory this script did not create.
MARK=$BENCH/.homesnap-bench
if [ -d "$BENCH" ] && [ ! -e "$MARK" ] && [ -n "$(ls -A "$BENCH")" ]; then
  die "$BENCH exists, is not empty and was not created by this script: pick another HOMESNAP_BENCH_DIR"
fi
mkdir -p "$BENCH" && touch "$MARK"

if [ -n "${HOMESNAP_BENCH_BIN:-}" ]; then
  BIN=$(cd "$HOMESNAP_BENCH_BIN" && pwd)
  BUILT="prebuilt binaries in $BIN"
else
  BUILT="built $(date -u +%Y-%m-%dT%H:%MZ) from $(cd "$ROOT" && git describe --always --dirty 2>/dev/null || echo 'an unknown commit')"
  need go "install Go 1.26, or set HOMESNAP_BENCH_BIN to prebuilt binaries"
  BIN=$BENCH/bin
  log "building snapshot, restore and genhome into $BIN"
  (cd "$ROOT" && go build -o "$BIN/" ./cmd/snapshot ./cmd/restore ./cmd/genhome) || die "go build failed"
fi
for b in snapshot restore genhome; do [ -x "$BIN/$b" ] || die "$BIN/$b is missing"; done

# --- layout ------------------------------------------------------------------

PRISTINE=$BENCH/home-$PRESET # generated once, reused while genhome is unchanged
HOME_DIR=$BENCH/work/home    # the tree each run measures (a copy of PRISTINE)
LIST=$BENCH/work/list        # NUL-separated selected paths, relative to the home
HS_STORE=$BENCH/work/hs-store
TAR_FILE=$BENCH/work/home.tar.zst
TIMES=$BENCH/work/times
OUT=$BENCH/work/out
SAMPLES=$BENCH/samples.tsv
RESULTS=$BENCH/results-$PRESET.md
export RESTIC_REPOSITORY=$BENCH/work/restic-repo
export RESTIC_PASSWORD=homesnap-bench
export RESTIC_CACHE_DIR=$BENCH/work/restic-cache # fresh with every repository
unset RESTIC_PASSWORD_FILE RESTIC_PASSWORD_COMMAND RESTIC_KEY_HINT

cleanup() {
  if declare -F sidecar_stop >/dev/null; then sidecar_stop; fi
  if [ "${HOMESNAP_BENCH_KEEP:-0}" != 1 ] && [ -e "$MARK" ]; then
    rm -rf "$BENCH/work"
  fi
}
trap cleanup EXIT

# --- the page cache ----------------------------------------------------------

drop_caches() { sync && echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null
case $DROP in
  auto) if drop_caches; then CACHE=cold; else CACHE=warm; fi ;;
  1) drop_caches || die "cannot write /proc/sys/vm/drop_caches (HOMESNAP_BENCH_DROP_CACHES=1)"; CACHE=cold ;;
  0) CACHE=warm ;;
  *) die "HOMESNAP_BENCH_DROP_CACHES must be auto, 0 or 1" ;;
esac

# before_measure makes every measured command start from the same cache
# state: cold when the cache can be dropped, otherwise warm (the inputs were
# read just before).
before_measure() {
  if [ "$CACHE" = cold ]; then
    drop_caches || die "dropping the page cache stopped working"
  fi
}

warm_tree() { # read the selected files once so that a warm run starts warm
  [ "$CACHE" = warm ] || return 0
  (cd "$HOME_DIR" && tar -cf - --no-recursion --null -T "$LIST") >/dev/null
}

# --- the selection -----------------------------------------------------------
# ROOTS, existing_roots, select_find and restic_backup_args: scripts/bench/lib.sh

# --- measuring ---------------------------------------------------------------

# tv TAG CMD... runs one process under GNU time, recording its peak RSS and
# CPU time into $TIMES/TAG.
tv() {
  local tag=$1
  shift
  /usr/bin/time -v -o "$TIMES/$tag" "$@"
}

# measure SCENARIO TOOL RUN FUNCTION ARGS... times FUNCTION (whose processes
# are run through tv) and appends a sample: wall seconds, CPU seconds and
# peak RSS (KiB, summed over the processes of a pipeline). The command's
# stdout goes to $OUT/stdout, stderr to $OUT/stderr.
measure() {
  local scen=$1 tool=$2 run=$3
  shift 3
  rm -rf "$TIMES" && mkdir -p "$TIMES" "$OUT"
  before_measure
  local t0=$EPOCHREALTIME rc=0
  "$@" >"$OUT/stdout" 2>"$OUT/stderr" || rc=$?
  local t1=$EPOCHREALTIME
  if [ $rc -ne 0 ]; then
    printf 'bench: %s / %s (run %s) failed with exit status %d; its stderr ends with:\n' "$scen" "$tool" "$run" $rc >&2
    tail -n 20 "$OUT/stderr" >&2
    exit 1
  fi
  local cpu rss
  cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.3f", s}' "$TIMES"/*)
  rss=$(awk -F': ' '/Maximum resident set size/ {s += $2} END {print s + 0}' "$TIMES"/*)
  local wall
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$scen" "$tool" "$run" "$wall" "$cpu" "$rss" >>"$SAMPLES"
  printf '   %-16s %-12s run %s: %7.2f s wall, %7.2f s CPU, %7.1f MiB peak RSS\n' \
    "$scen" "$tool" "$run" "$wall" "$cpu" "$(awk -v k="$rss" 'BEGIN {print k / 1024}')" >&2
}

# The measured commands.
hs_snapshot() { tv hs "$BIN/snapshot" --once --home "$HOME_DIR" --store "${1:-$HS_STORE}" --log-format json; }
hs_restore() { tv hs "$BIN/restore" --home "$2" --store "$1" --log-format json; }
tar_zstd() {
  (cd "$HOME_DIR" && tv tar tar -cf - --no-recursion --null -T "$LIST") |
    tv zstd zstd -3 -T0 -q -o "$TAR_FILE"
}
zstd_tar() { mkdir "$1" && tv zstd zstd -dc "$TAR_FILE" | tv tar tar -x -C "$1"; }
# The same, made durable like a homesnap restore (which ends with syncfs):
# informational, not a target.
zstd_tar_sync() { zstd_tar "$1" && tv sync sync -f "$1"; }
restic_backup() {
  local args
  mapfile -d '' args < <(restic_backup_args "$HOME_DIR")
  (cd "$HOME_DIR" && tv restic restic backup --quiet --host bench "${args[@]}")
}
# The sidecar with the change journal, on a hard-linked copy of the homesnap
# store (objects are written beside and renamed into place, so the copies
# never share a write): it must follow its own head, which the --once
# snapshots move. sidecar_start waits for its first snapshot with the
# journal (a full walk, which finds nothing to store); sidecar_snapshot asks for one with SIGUSR1
# and records the sidecar's own "elapsed" of it as the wall time, the CPU
# the sidecar spent meanwhile, and its peak RSS since it started.
SIDECAR_STORE=$BENCH/work/sidecar-store
SIDECAR_LOG=$BENCH/work/sidecar.log
SIDECAR_PID=
snapshot_lines() { # the snapshots the sidecar logged so far
  local n
  n=$(grep -c '"elapsed"' "$SIDECAR_LOG" 2>/dev/null) || true
  echo "${n:-0}"
}
wait_snapshot_line() { # wait_snapshot_line N: until the log has more than N
  local i
  for ((i = 0; i < 6000; i++)); do
    [ "$(snapshot_lines)" -le "$1" ] || return 0
    kill -0 "$SIDECAR_PID" 2>/dev/null || die "the sidecar exited; its log ends with: $(tail -n 5 "$SIDECAR_LOG")"
    sleep 0.05
  done
  die "the sidecar took no snapshot within 5 minutes"
}
sidecar_start() {
  rm -rf "$SIDECAR_STORE" && cp -al "$HS_STORE" "$SIDECAR_STORE" && rm -f "$SIDECAR_STORE/.lock"
  "$BIN/snapshot" --home "$HOME_DIR" --store "$SIDECAR_STORE" --interval 1h --listen off \
    --log-format json --journal auto --consolidate-max-archives 0 >/dev/null 2>"$SIDECAR_LOG" &
  SIDECAR_PID=$!
  wait_snapshot_line 0
  # The journal opens beside the first snapshot, which walks without it when
  # it starts first; then the first snapshot with the journal walks too
  # ("started"): take it before the churn.
  local i
  for ((i = 0; i < 6000; i++)); do
    grep -q '"message":"change journal on' "$SIDECAR_LOG" && break
    kill -0 "$SIDECAR_PID" 2>/dev/null || die "the sidecar exited; its log ends with: $(tail -n 5 "$SIDECAR_LOG")"
    grep -q '"message":"no change journal' "$SIDECAR_LOG" && die "the sidecar has no change journal: $(grep 'no change journal' "$SIDECAR_LOG")"
    sleep 0.05
  done
  if ! grep '"elapsed"' "$SIDECAR_LOG" | grep -q '"journal":'; then
    kill -USR1 "$SIDECAR_PID"
    wait_snapshot_line 1
  fi
}
sidecar_stop() {
  [ -n "${SIDECAR_PID:-}" ] || return 0
  kill -TERM "$SIDECAR_PID" 2>/dev/null || true
  wait "$SIDECAR_PID" 2>/dev/null || true
  SIDECAR_PID=
  rm -rf "$SIDECAR_STORE"
}
proc_cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f", ($14 + $15) / hz}' "/proc/$1/stat"; }
sidecar_snapshot() { # sidecar_snapshot SCENARIO RUN
  local n cpu0 line
  before_measure
  n=$(snapshot_lines)
  cpu0=$(proc_cpu "$SIDECAR_PID")
  kill -USR1 "$SIDECAR_PID"
  wait_snapshot_line "$n"
  line=$(grep '"elapsed"' "$SIDECAR_LOG" | tail -n 1)
  case $line in
    *'"journal":"journal"'*'"snapshot committed"'*) ;;
    *) die "the sidecar's snapshot after the churn did not use the journal or stored nothing: $line" ;;
  esac
  local wall cpu rss
  wall=$(printf '%s\n' "$line" | sed -n 's/.*"elapsed":\([0-9.]*\).*/\1/p' | awk '{printf "%.3f", $1 / 1000}')
  cpu=$(awk -v a="$cpu0" -v b="$(proc_cpu "$SIDECAR_PID")" 'BEGIN {printf "%.3f", b - a}')
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$SIDECAR_PID/status")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" homesnap "$2" "$wall" "$cpu" "$rss" >>"$SAMPLES"
  printf '   %-16s %-12s run %s: %7.2f s (its elapsed), %7.2f s CPU, %7.1f MiB peak RSS (since it started)\n' \
    "$1" sidecar "$2" "$wall" "$cpu" "$(awk -v k="$rss" 'BEGIN {print k / 1024}')" >&2
}
restic_restore() { tv restic restic restore latest --quiet --target "$1"; }
# Against S3, with the options of restic_s3_opts (RESTIC_S3_OPTS).
restic_s3_backup() {
  local args
  mapfile -d '' args < <(restic_backup_args "$HOME_DIR")
  (cd "$HOME_DIR" && tv restic restic "${RESTIC_S3_OPTS[@]}" backup --quiet --host bench "${args[@]}")
}
restic_s3_restore() { tv restic restic "${RESTIC_S3_OPTS[@]}" restore latest --quiet --target "$1"; }
# The floor of a no-change snapshot: stat every selected path (the same find
# as select_find, run through tv).
stat_scan() {
  local roots
  mapfile -t roots < <(existing_roots "$HOME_DIR")
  (cd "$HOME_DIR" && tv find find "${roots[@]}" \
    \( -path 'jobs/*' \( -name workspace -o -name 'workspace@*' \) -o -name '*-atomic*tmp' \) -prune \
    -o -printf '%s %T@ %C@ %i %m\n') >/dev/null
}

fresh_stores() {
  rm -rf "$HS_STORE" "$RESTIC_REPOSITORY" "$RESTIC_CACHE_DIR" "$TAR_FILE"
  mkdir -p "$HS_STORE"
  restic init --quiet >/dev/null || die "restic init $RESTIC_REPOSITORY failed"
}

restic_entries() { # entries of the newest restic snapshot
  restic ls latest --quiet | grep -c '^/' || true
}

check_restore() { # check_restore TOOL DIR: same entry count as the selection
  local n
  n=$(count "$2")
  [ "$n" -eq "$NPATHS" ] || die "$1 restored $n selected paths into $2, the selection has $NPATHS"
}

count() { select_find "$1" "${@:2}" -printf . | wc -c; } # count HOME [TESTS...]

du_b() { du -sb "$1" | cut -f1; }

# restic_s3_repo BASE RUN LABEL: restic's form of the same bucket and
# endpoint (s3:http://HOST:PORT/BUCKET/PREFIX/bench-STAMP-rN-restic-LABEL),
# from a homesnap S3 URL whose query names the endpoint.
restic_s3_repo() {
  local base=$1 path query endpoint
  path=${base%%\?*}
  [ "$path" != "$base" ] || die "$base names no endpoint (?endpoint=http://HOST:PORT): restic needs one"
  query=${base#*\?}
  endpoint=$(printf '%s\n' "$query" | tr '&' '\n' | sed -n 's/^endpoint=//p' | head -1)
  [ -n "$endpoint" ] || die "$base names no endpoint (?endpoint=http://HOST:PORT): restic needs one"
  path=${path#s3://}
  printf 's3:%s/%s/bench-%s-r%s-restic-%s' "${endpoint%/}" "${path%/}" "$STAMP" "$2" "$3"
}

# restic_s3_opts BASE: the connection settings of a homesnap S3 URL as
# restic options (region, path-style addressing); performance options stay
# at restic's defaults.
restic_s3_opts() {
  local query=${1#*\?} kv
  for kv in ${query//&/ }; do
    case $kv in
      region=*) printf '%s\0' -o "s3.region=${kv#region=}" ;;
      path_style=true) printf '%s\0' -o s3.bucket-lookup=path ;;
    esac
  done
}

# s3_url BASE RUN: BASE with a per-run sub-prefix appended to its path.
s3_url() {
  local base=$1 path query=
  path=${base%%\?*}
  [ "$path" = "$base" ] || query="?${base#*\?}"
  printf '%s/bench-%s-r%s%s' "${path%/}" "$STAMP" "$2" "$query"
}

# --- setup -------------------------------------------------------------------

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
GENSUM=$(sha256sum "$BIN/genhome" | cut -c1-16)
if [ "$(cat "$PRISTINE/.bench-stamp" 2>/dev/null || true)" != "$PRESET seed 1 genhome $GENSUM" ]; then
  log "generating the $PRESET home (seed 1) in $PRISTINE"
  rm -rf "$PRISTINE"
  "$BIN/genhome" -preset "$PRESET" -seed 1 "$PRISTINE" >&2
  echo "$PRESET seed 1 genhome $GENSUM" >"$PRISTINE/.bench-stamp"
else
  log "reusing the $PRESET home in $PRISTINE"
fi

rm -rf "$BENCH/work" && mkdir -p "$BENCH/work"
: >"$SAMPLES"
declare -A SIZE # stored bytes: SIZE[what,tool]

for ((run = 1; run <= RUNS; run++)); do
  log "run $run/$RUNS ($CACHE cache): copying the home"
  rm -rf "$HOME_DIR" && cp -a "$PRISTINE" "$HOME_DIR" && rm -f "$HOME_DIR/.bench-stamp"
  select_find "$HOME_DIR" -print0 >"$LIST"
  NPATHS=$(tr -cd '\0' <"$LIST" | wc -c)
  [ "$NPATHS" -gt 0 ] || die "the selection of $HOME_DIR is empty"
  fresh_stores
  warm_tree

  log "run $run: full snapshot"
  measure full homesnap "$run" hs_snapshot
  [ -s "$OUT/stdout" ] || die "homesnap printed no snapshot ID for the full snapshot"
  measure full tar+zstd "$run" tar_zstd
  measure full restic "$run" restic_backup
  if [ "$run" = 1 ]; then
    # Same selection everywhere, or the comparison means nothing.
    n=$(zstd -dc "$HS_STORE"/snapshots/*.json.zst | grep -c '"path"')
    [ "$n" -eq "$NPATHS" ] || die "homesnap stored $n entries, find selected $NPATHS: the selections differ"
    n=$(zstd -dc "$TAR_FILE" | tar -t | wc -l)
    [ "$n" -eq "$NPATHS" ] || die "tar stored $n entries, find selected $NPATHS"
    n=$(restic_entries)
    [ "$n" -eq "$NPATHS" ] || die "restic stored $n entries, find selected $NPATHS: check the excludes"
    SEL_FILES=$(count "$HOME_DIR" -type f)
    SEL_BYTES=$(select_find "$HOME_DIR" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
    log "selection: $NPATHS paths, $SEL_FILES files, $SEL_BYTES bytes; all three tools store exactly these"
  fi
  SIZE[full,homesnap]=$(du_b "$HS_STORE")
  SIZE[full,tar+zstd]=$(du_b "$TAR_FILE")
  SIZE[full,restic]=$(du_b "$RESTIC_REPOSITORY")

  log "run $run: nothing changed"
  warm_tree
  measure no-change homesnap "$run" hs_snapshot
  [ ! -s "$OUT/stdout" ] || die "homesnap took a snapshot although nothing changed: $(cat "$OUT/stdout")"
  measure no-change restic "$run" restic_backup
  measure no-change stat-scan "$run" stat_scan

  log "run $run: restore into an empty directory"
  for tool in homesnap zstd+tar zstd+tar+sync restic; do
    target=$BENCH/work/restore-$tool
    rm -rf "$target"
    case $tool in
      homesnap) measure restore homesnap "$run" hs_restore "$HS_STORE" "$target" ;;
      zstd+tar) measure restore zstd+tar "$run" zstd_tar "$target" ;;
      zstd+tar+sync) measure restore zstd+tar+sync "$run" zstd_tar_sync "$target" ;;
      restic) measure restore restic "$run" restic_restore "$target" ;;
    esac
    [ "$run" != 1 ] || check_restore "$tool" "$target"
    rm -rf "$target"
  done

  log "run $run: 1 % churn (the sidecar with the change journal started first)"
  sidecar_start
  "$BIN/genhome" -churn 0.01 -seed 2 "$HOME_DIR" >&2
  warm_tree
  measure churn homesnap "$run" hs_snapshot
  [ -s "$OUT/stdout" ] || die "homesnap took no snapshot after the churn"
  measure churn restic "$run" restic_backup
  sidecar_snapshot churn-journal "$run"
  sidecar_stop

  if [ "$run" = "$RUNS" ]; then
    log "run $run: $((CHURN_ROUNDS - 1)) more churn rounds for the stored bytes"
    for ((round = 3; round <= CHURN_ROUNDS + 1; round++)); do
      "$BIN/genhome" -churn 0.01 -seed "$round" "$HOME_DIR" >&2
      warm_tree
      measure churn-round homesnap "$round" hs_snapshot
      measure churn-round restic "$round" restic_backup
    done
    SIZE[churn,homesnap]=$(du_b "$HS_STORE")
    SIZE[churn,restic]=$(du_b "$RESTIC_REPOSITORY")
  fi

  for var in HOMESNAP_BENCH_S3_URL HOMESNAP_BENCH_S3_SLOW_URL; do
    [ -n "${!var:-}" ] || continue
    label=s3
    [ $var = HOMESNAP_BENCH_S3_URL ] || label=s3-slow
    url=$(s3_url "${!var}" "$run")
    log "run $run: homesnap against $label ($var)"
    rm -rf "$HOME_DIR" && cp -a "$PRISTINE" "$HOME_DIR" && rm -f "$HOME_DIR/.bench-stamp"
    warm_tree
    measure "full ($label)" homesnap "$run" hs_snapshot "$url"
    target=$BENCH/work/restore-$label
    rm -rf "$target"
    measure "restore ($label)" homesnap "$run" hs_restore "$url" "$target"
    [ "$run" != 1 ] || check_restore "homesnap ($label)" "$target"
    rm -rf "$target"

    # restic on the same bucket: a fresh repository, backed up with a fresh
    # cache; restored with an empty cache, as on a new machine (a homesnap
    # restore has no cache either).
    log "run $run: restic against $label ($var)"
    mapfile -d '' RESTIC_S3_OPTS < <(restic_s3_opts "${!var}")
    (
      export RESTIC_REPOSITORY RESTIC_CACHE_DIR=$BENCH/work/restic-cache-$label
      RESTIC_REPOSITORY=$(restic_s3_repo "${!var}" "$run" "$label")
      rm -rf "$RESTIC_CACHE_DIR"
      restic "${RESTIC_S3_OPTS[@]}" init --quiet >/dev/null || die "restic init $RESTIC_REPOSITORY failed"
      measure "full ($label)" restic "$run" restic_s3_backup
      if [ "$run" = 1 ]; then
        n=$(restic "${RESTIC_S3_OPTS[@]}" ls latest --quiet | grep -c '^/' || true)
        [ "$n" -eq "$NPATHS" ] || die "restic stored $n entries in $RESTIC_REPOSITORY, find selected $NPATHS"
      fi
      rm -rf "$RESTIC_CACHE_DIR" "$target"
      measure "restore ($label)" restic "$run" restic_s3_restore "$target"
      [ "$run" != 1 ] || check_restore "restic ($label)" "$target"
      rm -rf "$target" "$RESTIC_CACHE_DIR"
    )
  done
done

# --- report ------------------------------------------------------------------

# stat SCENARIO TOOL FIELD: median wall seconds (w), median CPU seconds (c),
# max RSS in MiB (r) or every run's wall seconds (all) of one row.
stat() {
  awk -F'\t' -v s="$1" -v t="$2" -v f="$3" '
    $1 == s && $2 == t { n++; w[n] = $4; c[n] = $5; if ($6 > r) r = $6 }
    function median(a, n,   i, j, x) {
      for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j > 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {
      if (!n) { print "-"; exit }
      if (f == "all") { for (i = 1; i <= n; i++) printf "%s%.2f", (i > 1 ? " " : ""), w[i]; print ""; exit }
      if (f == "r") { printf "%.1f\n", r / 1024; exit }
      if (f == "c") { printf "%.2f\n", median(c, n); exit }
      printf "%.3f\n", median(w, n)
    }' "$SAMPLES"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }

RSS_NOTE="peak RSS: maximum over the runs; for a pipeline the sum of its processes' peaks"

timing_rows() {
  local scen tool hs
  while read -r scen tool; do
    hs=$(stat "$scen" homesnap w)
    local r="—"
    [ "$tool" = homesnap ] || r="$(ratio "$hs" "$(stat "$scen" "$tool" w)")×"
    printf '| %s | %s | %.2f | %s | %s | %s | %s |\n' "$scen" "$tool" "$(stat "$scen" "$tool" w)" \
      "$(stat "$scen" "$tool" all)" "$(stat "$scen" "$tool" c)" "$(stat "$scen" "$tool" r)" "$r"
  done
}

# target NAME MEASURED GOAL DETAIL: one row of the targets table; MEASURED and
# GOAL are numbers compared as MEASURED <= GOAL.
target() {
  local name=$1 got=$2 goal=$3 detail=$4 unit=${5:-×}
  awk -v n="$name" -v g="$got" -v l="$goal" -v d="$detail" -v u="$unit" 'BEGIN {
    if (g == "-" || g == "") { printf "| %s | - | ≤ %s%s | not measured |\n", n, l, u; exit }
    res = (g <= l) ? "pass" : sprintf("**MISS** by %.0f %%%s", (g / l - 1) * 100, d)
    printf "| %s | %s%s | ≤ %s%s | %s |\n", n, g, u, l, u, res
  }'
}
miss_by_s() { # homesnap seconds above GOAL×peer, for the MISS detail
  awk -v h="$1" -v p="$2" -v l="$3" 'BEGIN { x = h - l * p; if (x > 0) printf " (%.2f s over)", x }'
}

report() {
  local hs_full hs_nc hs_churn hs_rest hs
  hs_full=$(stat full homesnap w)
  hs_nc=$(stat no-change homesnap w)
  hs_churn=$(stat churn homesnap w)
  hs_rest=$(stat restore homesnap w)
  echo "# homesnap benchmark: preset $PRESET, $RUNS runs"
  echo
  echo "- finished: $(date -u +%Y-%m-%dT%H:%MZ); homesnap: $BUILT"
  echo "- tree: \`genhome -preset $PRESET -seed 1\`; selection (jenkins preset, identical for every tool): $NPATHS paths, $SEL_FILES files, $(mib "$SEL_BYTES") MiB"
  if [ "$CACHE" = cold ]; then
    echo "- page cache: cold (dropped before every measured command)"
  else
    echo "- page cache: **warm cache** (could not drop it; the tree was read before each scenario)"
  fi
  echo "- restic $(restic version | awk '{print $2}'): repository v2 (compression auto), fresh per run, cache in a fresh \`--cache-dir\` under the bench dir (RESTIC_CACHE_DIR); tar+zstd: \`tar -cf - --no-recursion -T list | zstd -3 -T0\`"
  echo "- machine: $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), load average at the start $LOAD0, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- bench dir: $BENCH on $(df -T "$BENCH" | awk 'NR == 2 {print $2 " (" $1 ")"}'); kernel $(uname -r)"
  echo
  echo "Wall-clock seconds: median of the runs, and every run; $RSS_NOTE."
  echo
  echo "| scenario | tool | median s | runs s | CPU s (median) | peak RSS MiB | homesnap/tool |"
  echo "|---|---|---:|---|---:|---:|---:|"
  timing_rows <<EOF
full homesnap
full tar+zstd
full restic
no-change homesnap
no-change restic
no-change stat-scan
churn homesnap
churn restic
churn-journal homesnap
restore homesnap
restore zstd+tar
restore zstd+tar+sync
restore restic
EOF
  echo
  echo "churn-journal is the sidecar with the change journal (\`--journal auto\`, on a copy of the homesnap store, started before the churn: its first snapshot, a full walk, stores nothing): its own \"elapsed\" for the snapshot SIGUSR1 asks for, the CPU it spent meanwhile and its peak RSS since it started."
  echo
  echo "zstd+tar+sync is zstd+tar followed by \`sync -f\` (syncfs, as the homesnap restore ends): informational, not a target."
  echo
  echo "Churn rounds 3..$((CHURN_ROUNDS + 1)) (last run, one sample each): homesnap median $(stat churn-round homesnap w) s, restic median $(stat churn-round restic w) s."
  echo
  echo "Stored bytes (du -sb, last run):"
  echo
  echo "| what | homesnap | tar+zstd | restic | homesnap/restic |"
  echo "|---|---:|---:|---:|---:|"
  printf '| full snapshot | %s (%s MiB) | %s (%s MiB) | %s (%s MiB) | %s× |\n' \
    "${SIZE[full,homesnap]}" "$(mib "${SIZE[full,homesnap]}")" "${SIZE[full,tar+zstd]}" "$(mib "${SIZE[full,tar+zstd]}")" \
    "${SIZE[full,restic]}" "$(mib "${SIZE[full,restic]}")" "$(ratio "${SIZE[full,homesnap]}" "${SIZE[full,restic]}")"
  printf '| full + %d × 1 %% churn | %s (%s MiB) | — | %s (%s MiB) | %s× |\n' "$CHURN_ROUNDS" \
    "${SIZE[churn,homesnap]}" "$(mib "${SIZE[churn,homesnap]}")" \
    "${SIZE[churn,restic]}" "$(mib "${SIZE[churn,restic]}")" "$(ratio "${SIZE[churn,homesnap]}" "${SIZE[churn,restic]}")"
  echo
  echo "Targets (homesnap/peer of the medians):"
  echo
  echo "| target | measured | goal | result |"
  echo "|---|---:|---:|---|"
  local p
  p=$(stat full tar+zstd w)
  target "full snapshot vs tar+zstd" "$(ratio "$hs_full" "$p")" 1.0 "$(miss_by_s "$hs_full" "$p" 1.0)"
  p=$(stat full restic w)
  target "full snapshot vs restic" "$(ratio "$hs_full" "$p")" 0.8 "$(miss_by_s "$hs_full" "$p" 0.8)"
  p=$(stat no-change stat-scan w)
  target "no change vs stat scan" "$(ratio "$hs_nc" "$p")" 3.0 "$(miss_by_s "$hs_nc" "$p" 3.0)"
  p=$(stat churn restic w)
  target "1 % churn vs restic" "$(ratio "$hs_churn" "$p")" 0.25 "$(miss_by_s "$hs_churn" "$p" 0.25)"
  hs=$(stat churn-journal homesnap w)
  target "1 % churn, sidecar with journal, vs restic" "$(ratio "$hs" "$p")" 0.15 "$(miss_by_s "$hs" "$p" 0.15)"
  p=$(stat restore zstd+tar w)
  target "restore vs zstd+tar" "$(ratio "$hs_rest" "$p")" 1.0 "$(miss_by_s "$hs_rest" "$p" 1.0)"
  p=$(stat restore restic w)
  target "restore vs restic" "$(ratio "$hs_rest" "$p")" 0.5 "$(miss_by_s "$hs_rest" "$p" 0.5)"
  local rs
  rs=$(printf '%s\n' "$(stat full homesnap r)" "$(stat no-change homesnap r)" "$(stat churn homesnap r)" "$(stat churn-round homesnap r)" | sort -g | tail -1)
  target "snapshot peak RSS" "$rs" 128 "" " MiB"
  target "restore peak RSS" "$(stat restore homesnap r)" 128 "" " MiB"
  target "stored bytes after $CHURN_ROUNDS churn rounds vs restic" "$(ratio "${SIZE[churn,homesnap]}" "${SIZE[churn,restic]}")" 1.2 ""
  echo
  echo "S3: the same bucket for both tools; homesnap/restic of the medians, and homesnap against itself on the local store:"
  echo
  local any=0 label var scen tool hs
  for var in HOMESNAP_BENCH_S3_URL HOMESNAP_BENCH_S3_SLOW_URL; do
    label=s3
    [ $var = HOMESNAP_BENCH_S3_URL ] || label=s3-slow
    if [ -z "${!var:-}" ]; then
      echo "- $label: skipped ($var not set)"
      continue
    fi
    [ $any = 1 ] || {
      echo "| scenario | tool | median s | runs s | CPU s (median) | peak RSS MiB | homesnap/restic | vs local homesnap |"
      echo "|---|---|---:|---|---:|---:|---:|---:|"
    }
    any=1
    for scen in "full ($label)" "restore ($label)"; do
      hs=$(stat "$scen" homesnap w)
      for tool in homesnap restic; do
        local vs_restic="—" vs_local="—"
        if [ $tool = homesnap ]; then
          case $scen in full*) vs_local="$(ratio "$hs" "$hs_full")×" ;; *) vs_local="$(ratio "$hs" "$hs_rest")×" ;; esac
        else
          vs_restic="$(ratio "$hs" "$(stat "$scen" restic w)")×"
        fi
        printf '| %s | %s | %.2f | %s | %s | %s | %s | %s |\n' "$scen" "$tool" "$(stat "$scen" $tool w)" \
          "$(stat "$scen" $tool all)" "$(stat "$scen" $tool c)" "$(stat "$scen" $tool r)" "$vs_restic" "$vs_local"
      done
    done
  done
  [ $any = 0 ] || {
    echo
    echo "restic on S3: \`s3:http://HOST:PORT/BUCKET/PREFIX\` on the same bucket, defaults (\`s3.connections\` 5), a fresh repository per run; the backup with a fresh cache, the restore with an empty one (as on a new machine; homesnap keeps no cache)."
    echo
    echo "| target | measured | goal | result |"
    echo "|---|---:|---:|---|"
    if [ -n "${HOMESNAP_BENCH_S3_SLOW_URL:-}" ]; then
      local hs p
      hs=$(stat "restore (s3-slow)" homesnap w)
      p=$(stat "restore (s3-slow)" restic w)
      target "restore at 20 ms latency vs restic" "$(ratio "$hs" "$p")" 0.35 "$(miss_by_s "$hs" "$p" 0.35)"
    fi
    for var in HOMESNAP_BENCH_S3_URL HOMESNAP_BENCH_S3_SLOW_URL; do
      [ -n "${!var:-}" ] || continue
      label=s3
      [ $var = HOMESNAP_BENCH_S3_URL ] || label=s3-slow
      target "snapshot peak RSS ($label)" "$(stat "full ($label)" homesnap r)" 128 "" " MiB"
      target "restore peak RSS ($label)" "$(stat "restore ($label)" homesnap r)" 128 "" " MiB"
    done
  }
}

report >"$RESULTS"
cat "$RESULTS"
log "results written to $RESULTS (raw samples: $SAMPLES)"
