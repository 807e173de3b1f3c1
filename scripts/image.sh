#!/usr/bin/env bash
# Builds the homesnap image with buildah from Dockerfile.release: compiles
# the static homesnap binary here, stages it (with restore, snapshot and
# prune as links to it) and the CA certificates in a build context, and
# runs `buildah bud` (no Docker engine, no base image pulled).
#
#   scripts/image.sh                      # localhost/homesnap:VERSION, this machine's arch
#   PLATFORMS=linux/amd64,linux/arm64 IMAGE=ghcr.io/homesnap/homesnap:0.1.0 scripts/image.sh
#   TAGS=homesnap_nominio,homesnap_nogcs,homesnap_noazure IMAGE=localhost/homesnap:s3 scripts/image.sh
#
# TAGS are Go build tags: each homesnap_no<backend> leaves a store backend
# out, for a smaller image (internal/store/all; docs/kubernetes.md: The
# image); a store URL of a backend left out then fails naming its tag.
#
# With several platforms IMAGE names a manifest list (push it with
# `buildah manifest push --all IMAGE docker://IMAGE`). VERSION defaults to
# the Dockerfile's ARG VERSION and REVISION to the checkout's commit. The
# image name is printed on standard output.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
VERSION=${VERSION:-$(sed -n 's/^ARG VERSION=//p' Dockerfile)}
REVISION=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
PLATFORMS=${PLATFORMS:-linux/$(go env GOARCH)}
IMAGE=${IMAGE:-localhost/homesnap:$VERSION}
TAGS=${TAGS:-}
CA=${CA_CERTIFICATES:-/etc/ssl/certs/ca-certificates.crt}

die() { printf 'image.sh: %s\n' "$*" >&2; exit 1; }
[ -n "$VERSION" ] || die "no VERSION given and no ARG VERSION=... in Dockerfile"
command -v buildah >/dev/null || die "buildah not found (apt-get install -y buildah, or scripts/install-test-deps.sh)"
[ -s "$CA" ] || die "$CA not found: install ca-certificates or set CA_CERTIFICATES"

ctx=$(mktemp -d "${TMPDIR:-/tmp}/homesnap-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
cp "$CA" "$ctx/ca-certificates.crt"
mkdir "$ctx/home"

pkg=github.com/homesnap/homesnap/internal/version
ldflags="-s -w -buildid= -X $pkg.Version=$VERSION -X $pkg.Revision=$REVISION"
IFS=, read -ra platforms <<<"$PLATFORMS"
for p in "${platforms[@]}"; do
  os=${p%%/*} arch=${p#*/}
  printf '== go build %s%s\n' "$p" "${TAGS:+ -tags $TAGS}" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -tags "$TAGS" -ldflags "$ldflags" \
    -o "$ctx/${os}_$arch/bin/homesnap" ./cmd/homesnap
  for name in restore snapshot prune; do
    ln -s homesnap "$ctx/${os}_$arch/bin/$name"
  done
done

args=(--format oci --layers=false -f "$ROOT/Dockerfile.release"
  --build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION")
if ((${#platforms[@]} == 1)); then
  os=${platforms[0]%%/*} arch=${platforms[0]#*/}
  buildah bud "${args[@]}" --platform "${platforms[0]}" \
    --build-arg "TARGETOS=$os" --build-arg "TARGETARCH=$arch" -t "$IMAGE" "$ctx" >&2
else
  buildah manifest rm "$IMAGE" >/dev/null 2>&1 || true
  buildah manifest create "$IMAGE" >/dev/null
  for p in "${platforms[@]}"; do
    os=${p%%/*} arch=${p#*/}
    buildah bud "${args[@]}" --platform "$p" \
      --build-arg "TARGETOS=$os" --build-arg "TARGETARCH=$arch" --manifest "$IMAGE" "$ctx" >&2
  done
fi
echo "$IMAGE"
