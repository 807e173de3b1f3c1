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
env_file=$(mktemp) k8s_log=$(mktemp) checks_log=$(mktemp) k8s= checks=
cleanup() {
	if [ -n "$k8s" ]; then # something else failed first: stop the cluster's tests if they run, and show them
		if kill -0 "$k8s" 2>/dev/null; then
			kill -- "-$k8s" 2>/dev/null || true
			bash scripts/k8s.sh down >>"$k8s_log" 2>&1 || true
		fi
		printf '\nThe Kubernetes lifecycle tests (scripts/k8s.sh, test/k8s), ended early or beside a failure:\n' && cat "$k8s_log"
	fi
	if [ -n "$checks" ]; then
		kill -- "-$checks" 2>/dev/null || true
		printf '\nThe checks (the release, staticcheck, macOS vet, the operator example), ended early or beside a failure:\n' && cat "$checks_log"
	fi
	bash scripts/stop-servers.sh >/dev/null 2>&1 || true
	rm -f "$env_file" "$k8s_log" "$checks_log" "$installed"
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

phase "starting the servers (the cluster builds and comes up beside)"
bash scripts/start-servers.sh >"$env_file"
# shellcheck disable=SC1090
source "$env_file"
export HOMESNAP_TEST_SERVERS=1

# The checks that need no server, in the background from here on, beside
# the race build and the tests (which leave the CPU idle while they wait on
# servers and subprocesses); their log is shown when they end:
# - the release configuration: valid, and a snapshot release builds the
#   archive, checksum and SBOM into dist/ (nothing is published). Each
#   platform is a full compile of the dependency graph, the longest CPU
#   work on a cold build cache, so it builds the host's platform only
#   (.goreleaser.yaml: HOMESNAP_RELEASE_HOST_ONLY);
# - staticcheck, with the release's build flags so that it loads the
#   release's compiles instead of compiling the module a third time. The
#   import layers are a test: internal/layers_test.go;
# - macOS, vetted, not built: homesnap restore is the disaster-recovery
#   command on an operator's laptop, and its files for other systems
#   (homefs's walk without openat2, the journal, the restore's syscalls)
#   must compile there; no file differs by architecture. Vetting compiles
#   every dependency for the target, so the cloud backends, which have no
#   file of their own per system, are left out by their build tags;
# - the operator example against the operator's own API (k8s.io/api
#   v0.30): a module of its own, so that this module's newer k8s.io/api
#   stays out.
setsid bash -c '
	set -e
	step() { printf "== checks: %s (%d s in)\n" "$1" "$SECONDS"; }
	step "goreleaser check and a snapshot release"
	goreleaser check
	HOMESNAP_RELEASE_HOST_ONLY=1 goreleaser release --snapshot --clean
	step staticcheck
	CGO_ENABLED=0 GOFLAGS=-trimpath staticcheck ./...
	step "macOS vet"
	CGO_ENABLED=0 GOOS=darwin GOARCH=arm64 go vet -trimpath -tags homesnap_nos3,homesnap_nominio,homesnap_nogcs,homesnap_noazure \
		./cmd/homesnap/... ./internal/homefs
	step "the operator example"
	export CGO_ENABLED=0 GOFLAGS=-trimpath # the flags above: one compile of the standard library
	cd examples/operatorcheck
	go vet ./...
	staticcheck ./...
	go test -count=1 ./...
	step "the checks passed"' >"$checks_log" 2>&1 </dev/null &
checks=$!
phase "vet"
go vet -race ./...
phase "the tests"
go test -race -count=1 -timeout 30m "$@" ./...
phase "the tests passed; waiting for the checks and the cluster's tests"
status=0
wait "$checks" || status=$?
checks=
printf '\nThe checks (the release, staticcheck, macOS vet, the operator example):\n' && cat "$checks_log"
[ "$status" = 0 ] || { echo "FAIL: the checks (above)" >&2; exit "$status"; }

status=0
wait "$k8s" || status=$?
k8s=
printf '\nThe Kubernetes lifecycle tests (scripts/k8s.sh, test/k8s):\n' && cat "$k8s_log"
[ "$status" = 0 ] || { echo "FAIL: the Kubernetes lifecycle tests (above)" >&2; exit "$status"; }
