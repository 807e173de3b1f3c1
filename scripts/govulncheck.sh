#!/usr/bin/env bash
# Runs govulncheck on homesnap with no network but the Go module proxy: the
# vulnerability database is built from the golang.org/x/vulndb module (its
# data/osv files, indexed by its own cmd/indexdb) instead of being read from
# vuln.go.dev. Exit status 3 means a vulnerability is reachable from the code.
#
#   scripts/govulncheck.sh                  # every package of the module
#   scripts/govulncheck.sh -show verbose    # extra flags go to govulncheck
#
# HOMESNAP_VULNDB_VERSION picks the x/vulndb version (default: the pinned one
# below; "latest" asks the proxy for the newest). The tools and the database
# are kept in ~/.cache/homesnap-tools (or $HOMESNAP_TOOLS), keyed by version:
# only the first run of a version builds them (a few minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)

VULN_VERSION=v1.9.0 # golang.org/x/vuln (govulncheck)
VULNDB_VERSION=${HOMESNAP_VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}
tools=${HOMESNAP_TOOLS:-$HOME/.cache/homesnap-tools}
module=$PWD

# Module queries run outside this module, so that they never touch go.mod.
cd "$tools" 2>/dev/null || { mkdir -p "$tools" && cd "$tools"; }
if [ "$VULNDB_VERSION" = latest ]; then
  VULNDB_VERSION=$(go list -m -f '{{.Version}}' golang.org/x/vulndb@latest)
fi

# The tools build with the other builds' flags (scripts/install-test-deps.sh),
# so that the standard library compiles once on a fresh machine.
export CGO_ENABLED=0 GOFLAGS=-trimpath
govulncheck=$tools/vuln/$VULN_VERSION/govulncheck
if [ ! -x "$govulncheck" ]; then
  echo "govulncheck.sh: installing govulncheck $VULN_VERSION" >&2
  GOBIN=$(dirname "$govulncheck") go install "golang.org/x/vuln/cmd/govulncheck@$VULN_VERSION"
fi

db=$tools/vulndb/$VULNDB_VERSION
if [ ! -f "$db/index/db.json" ]; then
  echo "govulncheck.sh: building the vulnerability database from golang.org/x/vulndb@$VULNDB_VERSION" >&2
  indexdb=$tools/vulndb/indexdb-$VULNDB_VERSION/indexdb
  [ -x "$indexdb" ] || GOBIN=$(dirname "$indexdb") go install "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION"
  src=$(go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$src/data/osv" ] || { echo "govulncheck.sh: no data/osv in golang.org/x/vulndb@$VULNDB_VERSION ($src)" >&2; exit 1; }
  rm -rf "$db.tmp"
  "$indexdb" -vulns "$src/data/osv" -out "$db.tmp"
  mv "$db.tmp" "$db"
fi

cd "$module"
unset CGO_ENABLED GOFLAGS # the module as a user builds it
echo "govulncheck.sh: $(go version | cut -d' ' -f3), database golang.org/x/vulndb@$VULNDB_VERSION" >&2
exec "$govulncheck" -db "file://$db" "$@" ./...
