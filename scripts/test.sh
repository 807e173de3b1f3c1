#!/usr/bin/env bash
# The test command: installs what the tests need (stock tools and the real
# object-storage servers), starts the servers on 127.0.0.1, then vets and
# runs every test with the race detector. Integration tests fail, not skip,
# when a server is missing, because HOMESNAP_TEST_SERVERS=1 is set here.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)

# phase marks each step with the seconds since the start, so that a slow
# run says where its time went.
phase() { printf '\n== test.sh: %s (at %d s)\n' "$1" "$SECONDS"; }
env_file=$(mktemp) k8s_log=$(mktemp) release_log=$(mktemp) k8s= release=
cleanup() {
	if [ -n "$k8s" ]; then # something else failed first: stop the cluster's tests if they run, and show them
		if kill -0 "$k8s" 2>/dev/null; then
			kill -- "-$k8s" 2>/dev/null || true
			bash scripts/k8s.sh down >>"$k8s_log" 2>&1 || true
		fi
		printf '\nThe Kubernetes lifecycle tests (scripts/k8s.sh, test/k8s), ended early or beside a failure:\n' && cat "$k8s_log"
	fi
	if [ -n "$release" ]; then
		kill -- "-$release" 2>/dev/null || true
		printf '\nThe release check (goreleaser), ended early or beside a failure:\n' && cat "$release_log"
	fi
	bash scripts/stop-servers.sh >/dev/null 2>&1 || true
	rm -f "$env_file" "$k8s_log" "$release_log" "$installed"
}
trap cleanup EXIT

# A real single-node Kubernetes (scripts/k8s.sh), built once into the tools
# cache, for the lifecycle tests (test/k8s). Its build needs nothing the
# installs bring, so it starts first, beside them: on a fresh machine both
# are long compiles, and two of them fill the cores where one leaves gaps
# (downloads, links). The tests mostly wait on pods, so they run beside
# everything else (their own process group, their output in a log shown
# when they end). Every down checks that the host is as up found it: after
# an up killed midway, after up twice, and down twice.
installed=$(mktemp -u) # exists once the installs are done (up needs buildah)
export PATH="${HOMESNAP_TOOLS:-$HOME/.cache/homesnap-tools}/bin:$PATH" # helm, for the chart's test
setsid bash -c '
	set -e
	bash scripts/k8s.sh build
	while [ ! -e "$1" ]; do sleep 2; done
	timeout -s KILL 15 bash scripts/k8s.sh up || true
	bash scripts/k8s.sh down
	(trap "bash scripts/k8s.sh down" EXIT; bash scripts/k8s.sh up && bash scripts/k8s.sh up && bash scripts/k8s.sh test)
	bash scripts/k8s.sh down' k8s "$installed" >"$k8s_log" 2>&1 </dev/null &
k8s=$!
phase "installing the tools (the cluster builds beside)"
bash scripts/install-test-deps.sh
touch "$installed"

# The release configuration: valid, and a snapshot release builds the
# archive, checksum and SBOM into dist/ (nothing is published). Each
# platform is a full compile of the dependency graph, the longest CPU work
# on a cold build cache, so the snapshot release builds the host's platform
# only (.goreleaser.yaml: HOMESNAP_RELEASE_HOST_ONLY) and macOS is vetted,
# not built: homesnap restore is the disaster-recovery command on an
# operator's laptop, and its files for other systems (homefs's walk without
# openat2, the journal, the restore's syscalls) must compile there; no
# file differs by architecture. The tests leave the CPU idle while they
# wait on servers and subprocesses, so this runs beside them; its log is
# shown when it ends. The flags are the release's, so that the tests'
# binaries reuse its compiles.
setsid bash -c '
	set -e
	goreleaser check
	HOMESNAP_RELEASE_HOST_ONLY=1 goreleaser release --snapshot --clean
	CGO_ENABLED=0 GOOS=darwin GOARCH=arm64 go vet -trimpath ./cmd/homesnap/... ./internal/homefs
	echo "release check passed after $SECONDS s"' >"$release_log" 2>&1 </dev/null &
release=$!
phase "starting the servers (the cluster builds and comes up beside)"
bash scripts/start-servers.sh >"$env_file"
# shellcheck disable=SC1090
source "$env_file"
export HOMESNAP_TEST_SERVERS=1

# The operator example against the operator's own API (k8s.io/api v0.30):
# a module of its own, so that this module's newer k8s.io/api stays out.
phase "the operator example"
(cd examples/operatorcheck && go vet ./... && staticcheck ./... && go test -count=1 ./...)
phase "vet and staticcheck"
go vet -race ./...
# With the release's build flags, so that its compiles of the dependencies
# are the release's (another build variant would compile them all again).
# The import layers are a test: internal/layers_test.go.
CGO_ENABLED=0 GOFLAGS=-trimpath staticcheck ./...
phase "the tests"
go test -race -count=1 -timeout 30m "$@" ./...
phase "the tests passed; waiting for the release check and the cluster's tests"
status=0
wait "$release" || status=$?
release=
printf '\nThe release check (goreleaser check, a snapshot release, macOS vet):\n' && cat "$release_log"
[ "$status" = 0 ] || { echo "FAIL: the release check (above)" >&2; exit "$status"; }

status=0
wait "$k8s" || status=$?
k8s=
printf '\nThe Kubernetes lifecycle tests (scripts/k8s.sh, test/k8s):\n' && cat "$k8s_log"
[ "$status" = 0 ] || { echo "FAIL: the Kubernetes lifecycle tests (above)" >&2; exit "$status"; }
