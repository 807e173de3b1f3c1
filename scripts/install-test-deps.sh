#!/usr/bin/env bash
# Installs what the tests and the bench need into $HOMESNAP_TOOLS
# (default ~/.cache/homesnap-tools), binaries linked from its bin/:
#   - Debian packages: zstd, restic, age, buildah, podman, runc, GNU time...
#   - promtool, from Debian's prometheus package, unpacked (not installed:
#     the package would also set up a Prometheus server);
#   - built from the Go module proxy: staticcheck, helm, goreleaser and
#     cyclonedx-gomod (its SBOMs), and the real object-storage servers
#     versitygw, SeaweedFS and fake-gcs-server, plus toxiproxy;
#   - Azurite (Azure Blob) from npm.
#
# Each tool lives in a directory named by its version, $TOOLS/NAME/VERSION,
# and bin/NAME links there: bumping a version below builds that tool anew,
# a stale build is never run, and an interrupted one (VERSION.tmp) starts
# over. Nothing is rebuilt while its directory exists.
#
# On a fresh 2-core machine the builds are most of the cost, so they run one
# after another, each on both cores and all sharing the standard library's
# and common modules' compiles in the Go build cache. Downloads (Go modules,
# Debian packages, npm) run beside them, in the background.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)

TOOLS=${HOMESNAP_TOOLS:-$HOME/.cache/homesnap-tools}
BIN=$TOOLS/bin
mkdir -p "$BIN"
# -trimpath and no cgo, as the release, Kubernetes and the image build: the
# standard library and any module they have in common compile once.
export GOFLAGS='-mod=mod -trimpath' CGO_ENABLED=0

log() { printf '== %s\n' "$*" >&2; }

# link NAME VERSION FILE: bin/ gets FILE of $TOOLS/NAME/VERSION, under its
# base name.
link() { ln -sfn "$TOOLS/$1/$2/$3" "$BIN/${3##*/}"; }

# Go tools: NAME VERSION PACKAGE[:AS]... (PACKAGEs of one module, built by
# one go install so that they share their dependencies' compiles; AS names
# a binary whose package name says nothing, such as toxiproxy's cmd/server).
gotools=(
  "staticcheck v0.8.2 honnef.co/go/tools/cmd/staticcheck"
  "toxiproxy v2.5.0 github.com/Shopify/toxiproxy/v2/cmd/server:toxiproxy-server github.com/Shopify/toxiproxy/v2/cmd/cli:toxiproxy-cli"
  "fake-gcs-server v1.56.1 github.com/fsouza/fake-gcs-server"
  "versitygw v1.8.0 github.com/versity/versitygw/cmd/versitygw"
  "cyclonedx-gomod v1.10.0 github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod" # the release's SBOMs
  "helm v3.18.6 helm.sh/helm/v3/cmd/helm" # renders examples/helm/values.yaml with the pinned chart
  "goreleaser v2.17.0 github.com/goreleaser/goreleaser/v2" # checks and builds .goreleaser.yaml
)
# SeaweedFS, the second real S3 server (its own S3 gateway over its own
# distributed store, where versitygw maps S3 onto a directory): not
# go-installable (its go.mod has replace directives), so built inside its
# module directory; the largest build here, with a peak of ~2.6 GB.
SEAWEEDFS=v0.0.0-20261109003541-7506e5f91cd6
AZURITE=3.35.0 # 3.36+ needs Node 22

# Build flags. -ldflags=-s -w: no symbol table or DWARF, which nobody reads
# here and whose writing is much of the time spent linking these binaries.
# The tools that run briefly (helm, goreleaser, the SBOM) or serve the
# tests' small requests (the servers) are compiled without optimisation or
# inlining (-N -l): about a quarter less compile CPU (versitygw: 226 s
# against 171 s), for code nobody profiles. The standard library keeps the
# default flags (std=), so that its compile is shared with the other
# builds'. staticcheck is optimised: it analyses the whole module.
quick=(-ldflags='-s -w' '-gcflags=all=-N -l' -gcflags=std=)
optimised=(-ldflags='-s -w')

# gotool NAME VERSION PACKAGE[:AS]...: builds into $TOOLS/NAME/VERSION and
# links bin/.
gotool() {
  local name=$1 version=$2 dir=$TOOLS/$1/$2 p pkgs=() flags=("${quick[@]}")
  shift 2
  [ "$name" != staticcheck ] || flags=("${optimised[@]}")
  for p; do pkgs+=("${p%%:*}@$version"); done
  if [ ! -d "$dir" ]; then
    log "go install ${pkgs[*]}"
    rm -rf "$dir.tmp"
    GOBIN=$dir.tmp go install "${flags[@]}" "${pkgs[@]}"
    for p; do
      [[ $p != *:* ]] || mv "$dir.tmp/$(binary "${p%%:*}")" "$dir.tmp/${p#*:}"
    done
    mv "$dir.tmp" "$dir"
  fi
  for p; do
    if [[ $p == *:* ]]; then link "$name" "$version" "${p#*:}"; else link "$name" "$version" "$(binary "$p")"; fi
  done
}

# binary PACKAGE: the name go install gives its binary (a major version
# suffix, as in goreleaser/v2, is not a name).
binary() {
  local b=${1##*/}
  [[ $b =~ ^v[0-9]+$ ]] && b=${1%/*} && b=${b##*/}
  echo "$b"
}

# seaweedfs [BUILDFLAG...]: go build in SeaweedFS's module directory.
seaweedfs() {
  local src
  src=$(go mod download -json "github.com/seaweedfs/seaweedfs@$SEAWEEDFS" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  (cd "$src" && go build "$@" ./weed)
}

# Debian: the packages that are missing, and promtool. A fresh machine may
# have no package lists yet.
debian() {
  local need=() pkg
  for pkg in zstd:zstd tar:tar restic:restic age:age curl:curl openssl:openssl \
    buildah:buildah podman:podman runc:runc \
    groff:groff-base; do # the image (scripts/image.sh) and its container tests; groff: the man pages' check
    command -v "${pkg%%:*}" >/dev/null || need+=("${pkg#*:}")
  done
  # GNU time (a shell keyword hides it from command -v): the bench and the
  # tests that measure a binary's peak memory.
  [ -x /usr/bin/time ] || need+=(time)
  export DEBIAN_FRONTEND=noninteractive
  if ((${#need[@]})); then
    log "apt-get install ${need[*]}"
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  promtool_deb || { apt-get update -qq && promtool_deb; }
}

# promtool from Debian's prometheus package, unpacked rather than installed
# (the package would also set up a Prometheus server). Debian 12 has 2.42:
# examples/monitoring's rules pass `check rules` and `test rules` under it
# as under the promtool 3 built here before.
promtool_deb() {
  local v dir
  v=$(apt-cache policy prometheus 2>/dev/null | sed -n 's/^ *Candidate: //p')
  [ -n "$v" ] && [ "$v" != "(none)" ] || return 1
  dir=$TOOLS/promtool/$v
  if [ ! -d "$dir" ]; then
    log "promtool from Debian's prometheus $v"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/deb" || return 1
    (cd "$dir.tmp/deb" && apt-get download -qq -o APT::Sandbox::User=root "prometheus=$v" &&
      dpkg -x prometheus_*.deb .) || return 1
    mv "$dir.tmp/deb/usr/bin/promtool" "$dir.tmp/" && rm -rf "$dir.tmp/deb" &&
      "$dir.tmp/promtool" --version >/dev/null && mv "$dir.tmp" "$dir" || return 1
  fi
  link promtool "$v" promtool
}

azurite() {
  local dir=$TOOLS/azurite/$AZURITE
  if [ ! -d "$dir" ]; then
    log "npm install azurite@$AZURITE"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    # --prefix: without it npm installs into the nearest parent holding a
    # package.json or node_modules (such as $TOOLS of an older layout).
    npm install --prefix "$dir.tmp" --silent --no-audit --no-fund "azurite@$AZURITE" >/dev/null
    mv "$dir.tmp" "$dir"
  fi
  link azurite "$AZURITE" node_modules/.bin/azurite-blob
}

# `go install -n` resolves and downloads every module a build needs without
# compiling anything: run ahead of the builds, all at once (fetching is
# mostly waiting), it keeps the network busy while they keep the cores busy.
# A failure here is the build's to report.
prefetch() {
  local t p name version pkgs
  for t in "${gotools[@]}"; do
    read -r name version pkgs <<<"$t"
    [ ! -d "$TOOLS/$name/$version" ] || continue
    for p in $pkgs; do go install -n "${p%%:*}@$version" >/dev/null 2>&1 & done
  done
  [ -d "$TOOLS/seaweedfs/$SEAWEEDFS" ] || seaweedfs -n >/dev/null 2>&1 &
  wait
}

cd "$TOOLS" # module queries outside the project, so that they never touch its go.mod
prefetch &
prefetching=$!
debian &
debian=$!
azurite &
azurite=$!
for t in "${gotools[@]}"; do
  # shellcheck disable=SC2086 # word splitting is the point
  gotool $t
done
dir=$TOOLS/seaweedfs/$SEAWEEDFS
if [ ! -d "$dir" ]; then
  log "building SeaweedFS $SEAWEEDFS"
  rm -rf "$dir.tmp"
  seaweedfs "${quick[@]}" -o "$dir.tmp/weed"
  mv "$dir.tmp" "$dir"
fi
link seaweedfs "$SEAWEEDFS" weed
# Any failure stops here (set -e), one job at a time.
wait "$prefetching"
wait "$debian"
wait "$azurite"
log "tools ready in $BIN"
