# homesnap: one small image with one program, homesnap, and its commands.
#   homesnap restore   the init container and the disaster-recovery command
#   homesnap snapshot  the sidecar
#   homesnap prune     applies a retention policy (the sidecar can do it too)
# restore, snapshot and prune are links to homesnap, which runs the command
# its name says: pod specs written for the three binaries of earlier
# releases keep working.
#
# The binary is static (CGO_ENABLED=0), so the image is scratch plus CA
# certificates for the cloud stores. It runs as uid/gid 1000, the user of the
# official Jenkins image, needs no shell and writes nothing outside the
# Jenkins home volume, so it works under readOnlyRootFilesystem: true.
#
#   docker build -t homesnap .
#   docker buildx build --platform linux/amd64,linux/arm64 -t homesnap .
#   docker run --rm homesnap homesnap version
#
# Without a Docker engine (or without pulling golang), scripts/image.sh
# builds the same final stage from Dockerfile.release with buildah;
# examples/image_test.go holds the two final stages equal.

# go.mod's go line: go1.26.8's standard library has reachable vulnerabilities,
# and an older image refuses to build (README: Toolchain).
ARG GO_VERSION=1.26.10
# The release the examples deploy (ghcr.io/homesnap/homesnap:VERSION).
ARG VERSION=0.1.0

# The build runs on the builder's platform and cross-compiles, so a
# multi-arch build needs no emulation.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG VERSION
ARG REVISION=unknown
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
        -ldflags="-s -w -buildid= -X github.com/homesnap/homesnap/internal/version.Version=${VERSION} -X github.com/homesnap/homesnap/internal/version.Revision=${REVISION}" \
        -o /out/bin/homesnap ./cmd/homesnap && \
    ln -s homesnap /out/bin/restore && ln -s homesnap /out/bin/snapshot && ln -s homesnap /out/bin/prune && \
    mkdir /out/home

FROM scratch
ARG VERSION
ARG REVISION=unknown
LABEL org.opencontainers.image.title="homesnap" \
      org.opencontainers.image.description="Backup and restore of a Jenkins controller's home across pod restarts (restore init container, snapshot sidecar)" \
      org.opencontainers.image.source="https://github.com/homesnap/homesnap" \
      org.opencontainers.image.url="https://github.com/homesnap/homesnap" \
      org.opencontainers.image.documentation="https://github.com/homesnap/homesnap#readme" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/bin/ /usr/local/bin/
# An empty home owned by 1000, so a fresh Docker volume mounted there is
# writable by the image's user (Kubernetes uses fsGroup instead).
COPY --from=build --chown=1000:1000 /out/home /var/jenkins_home
ENV PATH=/usr/local/bin \
    JENKINS_HOME=/var/jenkins_home
USER 1000:1000
CMD ["homesnap", "--help"]
