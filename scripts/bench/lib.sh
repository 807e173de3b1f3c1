# Shared by the bench scripts (sourced, not run).

# generated_home GENHOME PRESET HOME: makes HOME the preset's home (seed 1),
# generating it again only when it is missing or another genhome made it
# (HOME.stamp says which). A script that changes HOME removes the stamp.
generated_home() {
  local stamp
  stamp="$2 seed 1 $(sha256sum "$1" | cut -c1-16)"
  [ "$(cat "$3.stamp" 2>/dev/null)" != "$stamp" ] || return 0
  printf '== generating the %s home in %s\n' "$2" "$3" >&2
  rm -rf "$3" && "$1" -preset "$2" -seed 1 "$3" >&2 && echo "$stamp" >"$3.stamp"
}

# drop empties the page cache when this user may, else says the runs are
# warm (cache=warm).
cache=cold
drop() { sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || cache=warm; }

# timed NAME CMD...: one sample of CMD after drop, by GNU time, its output
# in $work/out and $work/err; its wall, user and system seconds and peak
# RSS (KiB; for a pipeline run through sh, the largest process's) in
# T_WALL, T_USER, T_SYS and T_RSS. When CMD fails, its errors are printed
# and the script exits.
timed() {
  local name=$1
  shift
  drop
  /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$@" >"$work/out" 2>"$work/err" || {
    echo "$(basename "$0" .sh): $name failed:" >&2
    cat "$work/err" >&2
    exit 1
  }
  read -r T_WALL T_USER T_SYS T_RSS <"$work/time"
}

# The jenkins preset, for the peers: these roots, minus jobs/**/workspace,
# jobs/**/workspace@* and **/*-atomic*tmp (each covering everything below
# it).
ROOTS=(nodes secrets jobs identity.key.enc secret.key secret.key.not-so-secret)

existing_roots() { # the roots present in $1, one per line
  local r
  for r in "${ROOTS[@]}"; do
    if [ -e "$1/$r" ] || [ -L "$1/$r" ]; then printf '%s\n' "$r"; fi
  done
}

# select_find HOME ACTION... runs find over the selection of HOME, relative
# to it, with ACTION applied to every selected path.
select_find() {
  local home=$1
  shift
  local roots
  mapfile -t roots < <(existing_roots "$home")
  [ ${#roots[@]} -gt 0 ] || { echo "$(basename "$0" .sh): $home has none of the selected paths (${ROOTS[*]})" >&2; exit 1; }
  (cd "$home" && find "${roots[@]}" \
    \( -path 'jobs/*' \( -name workspace -o -name 'workspace@*' \) -o -name '*-atomic*tmp' \) -prune \
    -o "$@")
}

# restic_backup_args HOME: restic's arguments for the same selection, run
# in HOME (NUL-separated): the roots, and the exclusions as restic patterns.
restic_backup_args() {
  local roots
  mapfile -t roots < <(existing_roots "$1")
  printf '%s\0' --exclude "$1/jobs/**/workspace" --exclude "$1/jobs/**/workspace@*" \
    --exclude '*-atomic*tmp' "${roots[@]}"
}
