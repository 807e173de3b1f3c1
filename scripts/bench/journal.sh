#!/usr/bin/env bash
# The sidecar with the change journal on a generated home (default the
# million preset), and the walk it replaces, in one run:
#
#   scripts/bench/journal.sh [preset]        # default: million
#
# 1. A sidecar with --journal auto (--interval 1h: only what the script
#    asks for runs; metrics on a loopback listener), started with the page
#    cache dropped when that is possible: the time its journal took to
#    open (every selected directory watched) and when it was on since the
#    start, its first snapshot
#    (a full walk into an empty store), then an idle window with nothing
#    changing: its CPU from /proc/PID/stat (utime + stime, extrapolated to
#    an hour) and its wakeups (context switches of all its threads), its
#    RSS (VmRSS, VmHWM) before and after; then KICKS snapshots on SIGUSR1
#    with nothing changed, each one's "elapsed" from its log line; then
#    (HOMESNAP_BENCH_CHANGES=1, the default) one snapshot after a line is
#    appended to one file, one after genhome's 1 % churn, and three after
#    a line appended to the same file again, all through the journal. The churn changes the generated home: the script removes
#    its stamp, so the next run generates it again.
#    The peak RSS of each phase: VmHWM, reset at each phase's start
#    (/proc/PID/clear_refs), read at its end.
#    The kernel memory of its watches: what the kernel gives back when the
#    sidecar exits (Slab/SUnreclaim in /proc/meminfo: the marks; the
#    slab inotify_inode_mark too when /proc/slabinfo shows it), and what
#    the watches pin (a watched directory's inode cannot be evicted:
#    watches × the ext4 inode's object size in /proc/slabinfo).
# 2. On the same store, a sidecar with --journal off: its first snapshot
#    and KICKS more on SIGUSR1, each a full walk with nothing to store;
#    then one `snapshot --once` with the page cache dropped (when
#    possible), as scale.sh measures "nothing changed".
#
# The journal needs a watch per selected directory (~300,000 at a
# million files). When fs.inotify.max_user_watches is below the home's
# directories plus 10 % and writable, the script raises it for the run,
# says so, and puts it back when it ends.
#
# Environment: HOMESNAP_BENCH_DIR (default /tmp/homesnap-scale, shared
# with scale.sh) holds the generated home (kept and reused) and the work
# store (removed); HOMESNAP_BENCH_IDLE, seconds of idle measured (default
# 900); HOMESNAP_BENCH_KICKS (default 5); HOMESNAP_BENCH_CHANGES (default
# 1; 0 leaves the home as generated); HOMESNAP_BENCH_LISTEN, the
# metrics address (default 127.0.0.1:19390).
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)
PRESET=${1:-million}
BENCH=${HOMESNAP_BENCH_DIR:-/tmp/homesnap-scale}
IDLE=${HOMESNAP_BENCH_IDLE:-900}
CHANGES=${HOMESNAP_BENCH_CHANGES:-1}
KICKS=${HOMESNAP_BENCH_KICKS:-5}
LISTEN=${HOMESNAP_BENCH_LISTEN:-127.0.0.1:19390}
[[ $BENCH = /* && $BENCH != / ]] || { echo "HOMESNAP_BENCH_DIR must be an absolute path other than /" >&2; exit 2; }
for tool in python3 curl /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "journal: $tool is missing (apt-get install -y python3 curl time)" >&2; exit 1; }
done
log() { printf '== %s\n' "$*" >&2; }
. scripts/bench/lib.sh
load() { cut -d' ' -f1-3 /proc/loadavg; }

mkdir -p "$BENCH"
b=$BENCH/bin
go build -o "$b/" ./cmd/snapshot ./cmd/genhome
home=$BENCH/home-$PRESET
generated_home "$b/genhome" "$PRESET" "$home"
work=$BENCH/work-journal
rm -rf "$work" && mkdir -p "$work"
store=$work/store
mkdir "$store"
pid=
sysctl=/proc/sys/fs/inotify/max_user_watches
watches_before=$(cat "$sysctl")
cleanup() {
  [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
  [ "$(cat "$sysctl")" = "$watches_before" ] || { echo "$watches_before" >"$sysctl" && log "fs.inotify.max_user_watches put back to $watches_before"; }
  rm -rf "$work"
}
trap cleanup EXIT
dirs=$(find "$home" -type d | wc -l)
need=$((dirs + dirs / 10))
if [ "$watches_before" -lt "$need" ]; then
  if [ -w "$sysctl" ]; then
    echo "$need" >"$sysctl"
    log "fs.inotify.max_user_watches raised from $watches_before to $need for this run ($dirs directories in the home)"
  else
    log "fs.inotify.max_user_watches is $watches_before, below the home's $dirs directories, and not writable: the journal will not open"
  fi
fi

drop() { sync && echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null
meminfo() { awk -v k="$1:" '$1 == k {print $2}' /proc/meminfo; } # KiB
slab() { awk -v n="$1" '$1 == n {print $2 * $4}' /proc/slabinfo 2>/dev/null; } # bytes of active objects
objsize() { awk -v n="$1" '$1 == n {print $4}' /proc/slabinfo 2>/dev/null; }
status() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$pid/status"; } # KiB
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
# phase: the peak RSS (MiB) since the last call (or the start), then a new
# peak from now on.
phase() { local h; h=$(status VmHWM); echo 5 >"/proc/$pid/clear_refs"; mib "$h"; }
ticks() { sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}'; } # utime + stime
switches() { cat /proc/"$pid"/task/*/status | awk '/^(non)?voluntary_ctxt_switches:/ {n += $2} END {print n}'; }
# ends LOG: how many snapshots the sidecar logged as done (committed or unchanged).
ends() { grep -c -E '"message":"(snapshot committed|nothing changed since the last snapshot; none taken)"' "$1" || true; }
# await LOG N: wait until the sidecar has logged N snapshots.
await() {
  while [ "$(ends "$1")" -lt "$2" ]; do
    kill -0 "$pid" 2>/dev/null || { echo "journal: the sidecar exited:" >&2; tail -5 "$1" >&2; exit 1; }
    grep -q '"level":"error"' "$1" && { echo "journal: the sidecar logged an error:" >&2; grep '"level":"error"' "$1" >&2; exit 1; }
    sleep 0.2
  done
}
# elapsed LOG [FROM]: the elapsed (ms) of each snapshot line, from the FROM-th on (1-based).
elapsed() {
  python3 - "$1" "${2:-1}" <<'PY'
import json, sys
out = []
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("message") in ("snapshot committed", "nothing changed since the last snapshot; none taken"):
        decoded = "-"  # of the parent's entries, the share decoded (the rest passed over in spans)
        if e.get("entries"):
            decoded = "%.2f%%" % (100.0 * (e["entries"] - e.get("unread_entries", 0)) / e["entries"])
        out.append("%s %.1f %s %d" % (e.get("journal", "-"), e["elapsed"], decoded, e.get("manifests", 0)))
print("\n".join(out[int(sys.argv[2]) - 1:]))
PY
}
field() { python3 -c 'import json, sys
for line in open(sys.argv[1]):
    try: e = json.loads(line)
    except ValueError: continue
    if e.get("message", "").startswith(sys.argv[2]): print(e.get(sys.argv[3], "")); break' "$@"; }
# since LOG MESSAGE: seconds from the sidecar's first log line to the first
# line whose message starts with MESSAGE (the log's times are whole seconds).
since() { python3 -c 'import json, sys, datetime
t0 = None
for line in open(sys.argv[1]):
    try: e = json.loads(line)
    except ValueError: continue
    t = datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00"))
    t0 = t0 or t
    if e.get("message", "").startswith(sys.argv[2]): print(int((t - t0).total_seconds())); break' "$@"; }
# kicks LOG: KICKS snapshots on SIGUSR1, one after the other.
kicks() {
  local n
  n=$(ends "$1")
  for _ in $(seq "$KICKS"); do
    n=$((n + 1))
    kill -USR1 "$pid"
    await "$1" "$n"
  done
}
sidecar() { # MODE LOG
  "$b/snapshot" --home "$home" --store "$store" --interval 1h --listen "$LISTEN" --log-format json \
    --journal "$1" --consolidate-max-archives 0 --final-timeout 10m >"$work/$1.out" 2>"$2" &
  pid=$!
}
stop() { # LOG: SIGTERM, the final snapshot (a walk without the journal: --final-timeout), the exit
  kill -TERM "$pid"
  wait "$pid" || { echo "journal: the sidecar failed:" >&2; tail -5 "$1" >&2; exit 1; }
  pid=
}

# 1. journal on
on=$work/on.log
unreclaim0=$(meminfo SUnreclaim)
marks0=$(slab inotify_inode_mark)
if drop; then start_cache=cold; else start_cache=warm; fi # as after a node's reboot
log "sidecar with --journal auto, $start_cache cache, load $(load)"
sidecar auto "$on"
await "$on" 1
peak_first=$(phase)
# The journal opens after the first snapshot, which walks without it; then
# the first snapshot with the journal walks too ("started"), before the
# kicks.
until grep -q '"message":"\(change journal on\|no change journal\)' "$on"; do
  kill -0 "$pid" 2>/dev/null || { echo "journal: the sidecar exited:" >&2; tail -5 "$on" >&2; exit 1; }
  sleep 0.2
done
grep -q '"message":"change journal on' "$on" || { echo "journal: the journal did not open:" >&2; grep -i journal "$on" >&2; exit 1; }
peak_open=$(phase)
opened=$(field "$on" "change journal on" opened_in)
on_at=$(since "$on" "change journal on")
first=$(elapsed "$on" | sed -n 1p | awk '{print $1, $2}')
kicked=2 # the first kick's line
if [ "${first%% *}" = - ]; then
  kill -USR1 "$pid"
  await "$on" 2
  kicked=3
fi
peak_started=$(phase)
watches=$(curl -fsS "http://$LISTEN/metrics" | awk '$1 == "homesnap_journal_watches" {printf "%d", $2}')
rss_first=$(status VmRSS)
log "journal opened in $opened ms with $watches watches, on ${on_at} s after the sidecar started; first snapshot ${first#* } ms; RSS $(mib "$rss_first") MiB; peaks: first snapshot $peak_first, open $peak_open, the walk after it $peak_started MiB"

log "idle for $IDLE s, load $(load)"
load_idle0=$(load)
t0=$(ticks) s0=$(switches) rss_idle0=$(status VmRSS)
sleep "$IDLE"
t1=$(ticks) s1=$(switches) rss_idle1=$(status VmRSS)
peak_idle=$(phase)
hz=$(getconf CLK_TCK)
cpu_idle=$(awk -v t=$((t1 - t0)) -v hz="$hz" 'BEGIN {printf "%.2f", t / hz}')
cpu_hour=$(awk -v c="$cpu_idle" -v s="$IDLE" 'BEGIN {printf "%.1f", c * 3600 / s}')
core=$(awk -v c="$cpu_idle" -v s="$IDLE" 'BEGIN {printf "%.3f", 100 * c / s}')
wake_hour=$(awk -v n=$((s1 - s0)) -v s="$IDLE" 'BEGIN {printf "%.0f", n * 3600 / s}')
log "idle: $cpu_idle s CPU in $IDLE s ($core % of a core), $((s1 - s0)) context switches; RSS $(mib "$rss_idle0") -> $(mib "$rss_idle1") MiB"

log "$KICKS snapshots on SIGUSR1, nothing changed, load $(load)"
load_on=$(load)
kicks "$on"
on_kicks=$(elapsed "$on" "$kicked" | awk '{print $2}' | sort -n | tr '\n' ' ')
on_modes=$(elapsed "$on" "$kicked" | awk '{print $1}' | sort | uniq -c | awk '{printf "%s %s ", $1, $2}')
rss_kicks=$(status VmRSS)
peak_kicks=$(phase)
# change: one snapshot on SIGUSR1 after a change; "elapsed mode decoded peak layers"
# (layers: the manifests a restore of it merges, 1 for a full manifest).
change() {
  local n
  n=$(($(ends "$on") + 1))
  kill -USR1 "$pid"
  await "$on" "$n"
  elapsed "$on" "$n" | awk -v p="$(phase)" '{print $2, $1, $3, p, $4}'
}
if [ "$CHANGES" = 1 ]; then
  rm -f "$home.stamp" # the churn below changes the home: the next run generates it again
  one=$(find "$home/jobs" -type f -name log -print -quit)
  log "one file changed ($one), load $(load)"
  echo "a line appended by journal.sh" >>"$one"
  one_file=$(change)
  log "1 % churn, load $(load)"
  "$b/genhome" -churn 0.01 -seed 2 "$home" >"$work/churn" 2>&1
  churned=$(tail -1 "$work/churn" | sed 's/^[^:]*: //')
  one_pct=$(change)
  # One file again, three times: the churn's delta covers most spans, so
  # the first decodes the parent, the second writes a full manifest, the
  # third passes over spans again.
  after=()
  for k in 1 2 3; do
    log "one file changed after the churn ($k), load $(load)"
    echo "a line appended by journal.sh after the churn" >>"$one"
    after+=("$(change)")
  done
fi
unreclaim1=$(meminfo SUnreclaim)
marks1=$(slab inotify_inode_mark)
stop "$on"
sleep 2
unreclaim2=$(meminfo SUnreclaim)
marks2=$(slab inotify_inode_mark)
pinned=$(awk -v w="$watches" -v i="$(objsize ext4_inode_cache)" 'BEGIN {if (i) printf "%.1f", w * i / 1048576}')

# 2. journal off, on the same store
off=$work/off.log
log "sidecar with --journal off, load $(load)"
sidecar off "$off"
await "$off" 1
load_off=$(load)
kicks "$off"
off_first=$(elapsed "$off" | sed -n 1p | awk '{print $2}')
off_kicks=$(elapsed "$off" 2 | awk '{print $2}' | sort -n | tr '\n' ' ')
off_rss=$(status VmRSS) off_hwm=$(status VmHWM)
stop "$off"
if drop; then cache=cold; else cache=warm; fi
/usr/bin/time -f '%e %M' -o "$work/time" "$b/snapshot" --once --home "$home" --store "$store" --log-format json >"$work/once.out" 2>"$work/once.log"
[ ! -s "$work/once.out" ] || { echo "journal: snapshot --once stored a snapshot although nothing changed" >&2; exit 1; }
read -r once_wall once_rss <"$work/time"

s() { awk -v ms="$1" 'BEGIN {printf "%.2f", ms / 1000}'; }
paths=$(grep -m1 '"message":"snapshot committed"' "$on" | python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["entries"])')
echo "# The sidecar with the change journal: preset $PRESET, $paths paths, $dirs directories"
echo
echo "- $(date -u +%Y-%m-%dT%H:%MZ), $(git describe --always --dirty), $(nproc) CPUs; load average: idle window from $load_idle0, journal kicks $load_on, walk kicks $load_off, end $(load)"
echo "- fs.inotify.max_user_watches $watches_before$([ "$watches_before" -ge "$need" ] || echo ", raised to $need for the run")"
echo
echo "| | journal on | journal off |"
echo "|---|---|---|"
echo "| journal open (every directory watched; the sidecar started with a $start_cache cache) | $(s "$opened") s, $watches watches | |"
echo "| journal on, since the sidecar started ($start_cache cache) | $on_at s | |"
echo "| first snapshot after start | $(s "${first#* }") s (${first% *}, into an empty store) | $(s "$off_first") s (walk, nothing to store) |"
echo "| nothing changed, $KICKS × SIGUSR1, elapsed (ms, sorted) | $on_kicks($on_modes) | $off_kicks |"
echo "| nothing changed, \`snapshot --once\`, $cache cache | | $once_wall s, $(mib "$once_rss") MiB peak |"
echo "| idle $IDLE s: CPU | $cpu_idle s = $cpu_hour s per hour, $core % of a core | |"
echo "| idle: wakeups (context switches, all threads) | $((s1 - s0)), $wake_hour per hour | |"
echo "| RSS after the walk that follows the open | $(mib "$rss_first") MiB | |"
echo "| RSS idle, start → end of the window | $(mib "$rss_idle0") → $(mib "$rss_idle1") MiB | |"
echo "| RSS after the kicks | $(mib "$rss_kicks") MiB | $(mib "$off_rss") MiB (peak of the run $(mib "$off_hwm") MiB) |"
echo "| peak RSS: first snapshot, journal open, the walk after it, idle, kicks | $peak_first, $peak_open, $peak_started, $peak_idle, $peak_kicks MiB | |"
if [ "$CHANGES" = 1 ]; then
  read -r e m d p _ <<<"$one_file"
  echo "| one file changed (a line appended) | $(s "$e") s ($m, $d of the parent decoded), peak $p MiB | |"
  read -r e m d p _ <<<"$one_pct"
  echo "| 1 % churn ($churned) | $(s "$e") s ($m, $d of the parent decoded), peak $p MiB | |"
  for k in 0 1 2; do
    read -r e m d p l <<<"${after[$k]}"
    echo "| one file changed after the churn, $((k + 1)) of 3 | $(s "$e") s ($m, $d of the parent decoded, $([ "$l" = 1 ] && echo "a full manifest" || echo "$l manifests")), peak $p MiB | |"
  done
fi
echo "| kernel: SUnreclaim before start, before exit, after exit | $(mib "$unreclaim0"), $(mib "$unreclaim1"), $(mib "$unreclaim2") MiB (freed at exit $(mib $((unreclaim1 - unreclaim2))) MiB) | |"
if [ -n "$marks1" ]; then
  echo "| kernel: slab inotify_inode_mark before start, before exit, after exit | $((${marks0:-0} / 1024)), $((marks1 / 1024)), $((${marks2:-0} / 1024)) KiB | |"
fi
[ -z "$pinned" ] || echo "| kernel: the inodes the watches pin (watches × ext4_inode_cache object) | $pinned MiB | |"
