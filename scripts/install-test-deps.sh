#!/usr/bin/env bash
# Installs what the tests and the bench need: stock tools from Debian, the
# linter (staticcheck) and the real object-storage servers (versitygw,
# SeaweedFS, fake-gcs-server, Azurite) plus toxiproxy, built from the Go
# module proxy / npm. Idempotent: anything
# already installed is kept. Binaries go to $HOMESNAP_TOOLS/bin.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)

TOOLS=${HOMESNAP_TOOLS:-$HOME/.cache/homesnap-tools}
BIN=$TOOLS/bin
mkdir -p "$BIN"
export GOBIN=$BIN GOFLAGS=-mod=mod

log() { printf '== %s\n' "$*" >&2; }

need_apt=()
for pkg in zstd:zstd tar:tar restic:restic age:age curl:curl openssl:openssl \
  buildah:buildah podman:podman runc:runc; do # the image (scripts/image.sh) and its container tests
  command -v "${pkg%%:*}" >/dev/null || need_apt+=("${pkg#*:}")
done
# GNU time (a shell keyword hides it from command -v): the bench and the
# tests that measure a binary's peak memory.
[ -x /usr/bin/time ] || need_apt+=(time)
if ((${#need_apt[@]})); then
  log "apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

goinstall() { # name module@version [rename-from]
  local name=$1 mod=$2 from=${3:-}
  [ -x "$BIN/$name" ] && return 0
  log "go install $mod"
  go install "$mod"
  [ -n "$from" ] && mv "$BIN/$from" "$BIN/$name"
  return 0
}

goinstall versitygw github.com/versity/versitygw/cmd/versitygw@v1.8.0 &
goinstall fake-gcs-server github.com/fsouza/fake-gcs-server@v1.56.1 &
goinstall staticcheck honnef.co/go/tools/cmd/staticcheck@v0.8.2 &
goinstall helm helm.sh/helm/v3/cmd/helm@v3.18.6 & # renders examples/helm/values.yaml with the pinned chart
goinstall promtool github.com/prometheus/prometheus/cmd/promtool@v0.316.0 & # checks and tests examples/monitoring's alerts
# The release (.goreleaser.yaml): goreleaser, and the SBOM generator it runs.
goinstall goreleaser github.com/goreleaser/goreleaser/v2@v2.17.0 &
goinstall cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0 &
( goinstall toxiproxy-server github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0 server &&
  goinstall toxiproxy-cli github.com/Shopify/toxiproxy/v2/cmd/cli@v2.5.0 cli ) &

if [ ! -x "$TOOLS/node_modules/.bin/azurite-blob" ]; then
  log "npm install azurite@3.35.0"
  (cd "$TOOLS" && npm install --silent --no-audit --no-fund azurite@3.35.0 >/dev/null)
fi
ln -sf "$TOOLS/node_modules/.bin/azurite-blob" "$BIN/azurite-blob"
wait

# SeaweedFS cannot be go-installed (replace directives): build it inside its
# module directory. Peak RSS is ~2.6 GB, so it runs alone, after the others.
if [ ! -x "$BIN/weed" ]; then
  v=v0.0.0-20261109003541-7506e5f91cd6
  log "building SeaweedFS $v (takes a few minutes)"
  go mod download github.com/seaweedfs/seaweedfs@$v
  dir=$(go env GOMODCACHE)/github.com/seaweedfs/seaweedfs@$v
  (cd "$dir" && GOFLAGS=-mod=mod go build -o "$BIN/weed" ./weed)
fi
log "tools ready in $BIN"
