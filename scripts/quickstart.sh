#!/usr/bin/env bash
# Quickstart on the embedded local store, no cloud needed: generates a small
# Jenkins home, snapshots it, changes 1 % of it as Jenkins would, snapshots
# again (incrementally), restores the newest snapshot into an empty
# directory and checks that content, modes, mtimes and symlinks match.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)
demo=${1:-/tmp/homesnap-demo}
rm -rf "$demo" && mkdir -p "$demo/store"
go build -o bin/ ./cmd/homesnap ./cmd/genhome

bin/genhome -preset small -seed 1 "$demo/home"
export HOMESNAP_STORE=$demo/store HOMESNAP_LOG_FORMAT=console
bin/homesnap snapshot --once --home "$demo/home"
bin/genhome -churn 0.01 -seed 2 "$demo/home"
bin/homesnap snapshot --once --home "$demo/home"
bin/homesnap list
bin/homesnap restore --home "$demo/restored"

# What a restore must reproduce, listed for the selected paths only.
describe() {
  (cd "$1" && find nodes secrets jobs identity.key.enc secret.key secret.key.not-so-secret \
      \( -path 'jobs/*/workspace' -o -path 'jobs/*/workspace@*' -o -name '*-atomic*tmp' \) -prune \
      -o -printf '%P|%y|%m|%U:%G|%s|%T@|%l\n' 2>/dev/null | sort)
}
if diff <(describe "$demo/home") <(describe "$demo/restored") >/dev/null &&
   diff -r --no-dereference -x workspace -x 'workspace@*' -x '*-atomic*tmp' \
     "$demo/home/jobs" "$demo/restored/jobs" >/dev/null; then
  echo "OK: $(describe "$demo/restored" | wc -l) paths restored into $demo/restored match the home (content, modes, owners, mtimes, symlinks)"
else
  echo "MISMATCH between $demo/home and $demo/restored" >&2
  exit 1
fi
