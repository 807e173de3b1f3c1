#!/usr/bin/env bash
# How busy the whole machine is while a command runs: its own CPU and the
# kernel's threads beside it (writeback, reclaim), which GNU time does not
# count. A command that keeps every core busy is at the machine's limit
# for the work it does; only less work makes it faster.
#
#   scripts/bench/busy.sh CMD [ARG...]
#
# Prints, every 100 ms, the cores busy in user and system time and the
# share in iowait, from /proc/stat, then the means over the run. Read it
# on an otherwise idle machine: everything running counts.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 CMD [ARG...]" >&2; exit 2; }
cores=$(getconf _NPROCESSORS_ONLN)

# ticks: user+nice, system+irq+softirq, iowait and the total of the cpu line.
ticks() {
  local _ user nice system idle iowait irq softirq steal
  read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
  echo "$((user + nice)) $((system + irq + softirq)) $iowait $((user + nice + system + idle + iowait + irq + softirq + steal))"
}

# report LABEL BEFORE AFTER: the cores busy between two readings of ticks.
report() {
  awk -v c="$cores" -v l="$1" -v p="$2" -v n="$3" 'BEGIN {
    split(p, a, " "); split(n, b, " "); d = b[4] - a[4]; if (d <= 0) exit
    printf "%s  user %.2f  sys %.2f  busy %.2f of %d cores  iowait %.2f\n", l, c*(b[1]-a[1])/d, c*(b[2]-a[2])/d, c*(b[1]-a[1]+b[2]-a[2])/d, c, c*(b[3]-a[3])/d }'
}

"$@" &
pid=$!
start=$(ticks)
prev=$start
t0=$EPOCHREALTIME
while kill -0 "$pid" 2>/dev/null; do
  sleep 0.1
  cur=$(ticks)
  report "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%6.2f s", b - a }')" "$prev" "$cur"
  prev=$cur
done
status=0
wait "$pid" || status=$?
report mean: "$start" "$(ticks)"
exit "$status"
