#!/usr/bin/env bash
# A real single-node Kubernetes for the lifecycle tests (test/k8s): the
# kubelet is the only thing that runs native sidecars, probes, StatefulSets,
# PersistentVolumes and termination in order, so that is where homesnap's
# restore-before-Jenkins and final-snapshot-on-SIGTERM are proven.
#
#   scripts/k8s.sh build   # Kubernetes v1.34.4 from the module proxy (scripts/k8s/build),
#                          # etcd, containerd, runc, CNI plugins from Debian; cached by version
#   scripts/k8s.sh up      # PKI, configs, images; etcd .. kubelet as processes in netns homesnap-k8s
#   scripts/k8s.sh test    # go test ./test/k8s against the running cluster
#   scripts/k8s.sh down    # stops what up started by pid and undoes every host change
#
# Everything runs inside a network namespace this script creates (no route
# out: the kubelet's firewall chains and every address stay in it). The
# binaries live in $HOMESNAP_TOOLS/k8s/VERSION, the cluster's state in
# $HOMESNAP_K8S_STATE (default ${TMPDIR:-/tmp}/homesnap-k8s). `up` and `down`
# are idempotent, and `down` after a killed `up` leaves the machine as `up`
# found it (docs/development.md: A real cluster). Needs root.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)

ROOT=$(cd "$(dirname "$0")/.." && pwd)
K8S_VERSION=v1.34.4 # 1.35+ refuses cgroup v1 (these machines) unless told otherwise
TOOLS=${HOMESNAP_TOOLS:-$HOME/.cache/homesnap-tools}
CACHE=$TOOLS/k8s/$K8S_VERSION
BIN=$CACHE/bin   # kube-apiserver, kube-controller-manager, kube-scheduler, kubelet
DEB=$CACHE/root  # the Debian packages, unpacked (usr/bin/etcd, containerd, runc, /usr/lib/cni)
STATE=${HOMESNAP_K8S_STATE:-${TMPDIR:-/tmp}/homesnap-k8s}
NETNS=homesnap-k8s
DEBS=(etcd-server containerd runc containernetworking-plugins)

log() { printf '== k8s.sh: %s\n' "$*" >&2; }
die() { printf 'k8s.sh: %s\n' "$*" >&2; exit 1; }

# build: the four Kubernetes binaries in one go build (they share most
# packages), then the Debian packages. Each step is skipped when cached.
build() {
	local have=1 c
	for c in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
		[ -x "$BIN/$c" ] || have=0
	done
	if ((have)); then
		log "Kubernetes $K8S_VERSION cached in $BIN"
	else
		local minor=${K8S_VERSION#v1.} ld="-s -w -buildid=" p t0=$SECONDS
		minor=${minor%%.*}
		for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
			ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
		done
		log "go build Kubernetes $K8S_VERSION (cold: about 10 min on 2 quiet cores)"
		mkdir -p "$BIN.tmp"
		(cd "$ROOT/scripts/k8s/build" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "$ld" \
			-o "$BIN.tmp/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
			k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet)
		rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
		log "built Kubernetes in $((SECONDS - t0)) s"
	fi
	if [ -x "$DEB/usr/bin/etcd" ] && [ -x "$DEB/usr/bin/containerd" ] && [ -x "$DEB/usr/sbin/runc" ] &&
		[ -x "$DEB/usr/lib/cni/bridge" ]; then
		log "Debian packages cached in $DEB"
		return 0
	fi
	local dl
	dl=$(mktemp -d "${TMPDIR:-/tmp}/homesnap-k8s-deb.XXXXXX")
	log "apt-get download ${DEBS[*]}"
	(cd "$dl" && apt-get download -q "${DEBS[@]}" >/dev/null) ||
		{ rm -rf "$dl"; die "apt-get download ${DEBS[*]} failed (apt-get update first?)"; }
	rm -rf "$DEB.tmp" && mkdir -p "$DEB.tmp"
	for p in "$dl"/*.deb; do dpkg -x "$p" "$DEB.tmp"; done
	rm -rf "$dl" "$DEB" && mv "$DEB.tmp" "$DEB"
}

# --- host state: what up changes and down restores --------------------------

# Sysctls the kubelet sets (KernelTunableModify; there is no way to turn it
# off), and host paths it or containerd creates outside the configured dirs.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
HOST_PATHS=(/var/lib/kubelet /var/log/containers /run/containerd)
# Shared with podman (which the test command runs meanwhile): only our
# entries in them count, and they go if they were not there and are empty.
SHARED_PATHS=(/var/lib/cni/results /var/lib/cni /run/netns)

# hoststate prints, one fact a line, everything up may change on the host:
# down compares it with what up recorded before its first change.
hoststate() {
	local k p m
	for k in "${SYSCTLS[@]}"; do printf 'sysctl %s=%s\n' "$k" "$(sysctl -n "$k")"; done
	for p in "${HOST_PATHS[@]}"; do [ -e "$p" ] && printf 'path %s\n' "$p"; done
	[ -e "/run/netns/$NETNS" ] && printf 'netns %s\n' "$NETNS"
	for p in /var/lib/cni/results/homesnap-k8s-*; do [ -e "$p" ] && printf 'cni %s\n' "$p"; done
	for p in /sys/fs/cgroup/*/kubepods; do [ -d "$p" ] && printf 'cgroup %s\n' "$p"; done
	# Mount points under our dirs (other mounts come and go with others' work).
	while read -r m; do
		case $m in "$STATE"/* | /var/lib/kubelet* | /run/containerd* | "/run/netns/$NETNS") printf 'mount %s\n' "$m" ;; esac
	done < <(awk '{print $5}' /proc/self/mountinfo)
	ours | sed 's/^/process /'
	return 0
}

# ours lists the live processes running one of our binaries.
ours() {
	local d exe
	for d in /proc/[0-9]*; do
		exe=$(readlink "$d/exe" 2>/dev/null) || continue
		case $exe in "$CACHE"/* | "$STATE"/*) printf '%s %s\n' "${d#/proc/}" "$exe" ;; esac
	done
}

# --- processes ----------------------------------------------------------------

PIDS=$STATE/pids

# pidof_ NAME: the recorded pid of NAME if it still runs the binary it was
# started with (a recycled pid is not ours).
pidof_() {
	local pid exe
	read -r pid exe < <(awk -v n="$1" '$1 == n {p = $2 " " $3} END {print p}' "$PIDS" 2>/dev/null) || return 1
	[ -n "${pid:-}" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$exe" ] && echo "$pid"
}

# start NAME BINARY ARGS...: runs it in the namespace's network (only the
# network: the kubelet and containerd must share the host's mounts).
start() {
	local name=$1
	shift
	if pidof_ "$name" >/dev/null; then
		log "$name already runs"
		return 0
	fi
	nohup nsenter --net="/run/netns/$NETNS" -- "$@" >>"$STATE/logs/$name.log" 2>&1 </dev/null &
	local pid=$!
	# nsenter execs the binary in place: wait for that, then record it.
	for _ in $(seq 50); do [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$1" ] && break; sleep 0.1; done
	printf '%s %s %s\n' "$name" "$pid" "$1" >>"$PIDS"
	log "started $name (pid $pid)"
}

# stop NAME: SIGTERM, then SIGKILL after 30 s.
stop() {
	local pid
	pid=$(pidof_ "$1") || return 0
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		log "$1 (pid $pid) ignored SIGTERM for 30 s: SIGKILL"
		kill -9 "$pid" 2>/dev/null || true
	fi
	log "stopped $1 (pid $pid)"
}

# waitfor WHAT SECONDS COMMAND...: polls until COMMAND succeeds.
waitfor() {
	local what=$1 limit=$2 t0=$SECONDS
	shift 2
	until "$@" >/dev/null 2>&1; do
		((SECONDS - t0 < limit)) || die "$what: not ready after $limit s (logs: $STATE/logs)"
		sleep 1
	done
	log "$what ready after $((SECONDS - t0)) s"
}

innet() { nsenter --net="/run/netns/$NETNS" -- "$@"; }
ctr_() { "$DEB/usr/bin/ctr" --address "$STATE/run/containerd/containerd.sock" --namespace k8s.io "$@"; }
api() { # api PATH: a GET as the cluster admin
	innet curl -sf --cacert "$STATE/pki/ca.crt" --cert "$STATE/pki/admin.crt" --key "$STATE/pki/admin.key" \
		"https://127.0.0.1:6443$1"
}

# --- up -------------------------------------------------------------------------

# Addresses, all inside the namespace: the node's (kubelet, API server to
# kubelet) and the pods' bridge. Nothing routes out of it.
NODE_IP=10.213.0.1
POD_SUBNET=10.214.0.0/24
NODE=homesnap-k8s

pki() {
	local P=$STATE/pki C=$STATE/conf
	mkdir -p "$P" "$C"
	[ -f "$P/ca.crt" ] || {
		openssl req -x509 -newkey rsa:2048 -nodes -keyout "$P/ca.key" -subj /CN=homesnap-k8s-ca \
			-days 30 -out "$P/ca.crt" 2>/dev/null
		openssl genrsa -out "$P/sa.key" 2048 2>/dev/null
		openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null
	}
	cert() { # NAME SUBJECT EXTENSIONS
		[ -f "$P/$1.crt" ] && return 0
		openssl req -newkey rsa:2048 -nodes -keyout "$P/$1.key" -subj "$2" -out "$P/$1.csr" 2>/dev/null
		printf '%b\n' "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n$3" >"$P/$1.ext"
		openssl x509 -req -in "$P/$1.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 30 \
			-extfile "$P/$1.ext" -out "$P/$1.crt" 2>/dev/null
		rm -f "$P/$1.csr" "$P/$1.ext"
	}
	local client=extendedKeyUsage=clientAuth
	cert apiserver /CN=kube-apiserver "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:10.96.0.1"
	cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" $client
	cert admin "/O=system:masters/CN=homesnap-k8s-admin" $client
	cert controller-manager /CN=system:kube-controller-manager $client
	cert scheduler /CN=system:kube-scheduler $client
	cert kubelet "/O=system:nodes/CN=system:node:$NODE" $client
	local n
	for n in admin controller-manager scheduler kubelet; do
		cat >"$C/$n.conf" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: homesnap-k8s
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: "$P/ca.crt"}
users:
- name: $n
  user: {client-certificate: "$P/$n.crt", client-key: "$P/$n.key"}
contexts:
- name: homesnap-k8s
  context: {cluster: homesnap-k8s, user: $n}
current-context: homesnap-k8s
EOF
	done
}

configs() {
	mkdir -p "$STATE/etc/cni" "$STATE/cni" "$STATE/run/runc"
	cat >"$STATE/etc/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$STATE/run/containerd/containerd.sock"
[ttrpc]
  address = "$STATE/run/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  disable_hugetlb_controller = true
  enable_selinux = false
  netns_mounts_under_state_dir = true
  # Root here lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$DEB/usr/sbin/runc"
        Root = "$STATE/run/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$DEB/usr/lib/cni"
    conf_dir = "$STATE/etc/cni"
EOF
	# isGateway: the bridge gets an address, so the kubelet reaches the pods'
	# probes; no masquerade and no route out of the namespace.
	cat >"$STATE/etc/cni/10-homesnap-k8s.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "homesnap-k8s", "plugins": [
  {"type": "bridge", "bridge": "hsk-cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$STATE/cni", "ranges": [[{"subnet": "$POD_SUBNET"}]]}},
  {"type": "loopback"}]}
EOF
	cat >"$STATE/etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$STATE/pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false # these machines run cgroup v1
containerRuntimeEndpoint: "unix://$STATE/run/containerd/containerd.sock"
podLogsDir: "$STATE/pod-logs"
failSwapOn: false
resolvConf: ""
rotateCertificates: false
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
imageGCHighThresholdPercent: 100
EOF
}

# images builds the pause image, the homesnap image (scripts/image.sh) and
# the Jenkins stand-in with buildah in a storage of our own, and imports
# them into containerd. The pods never pull.
PAUSE_IMAGE=localhost/homesnap-k8s-pause:1
IMAGE=localhost/homesnap:k8s
STANDIN=localhost/jenkins-standin:k8s
RELOADER=localhost/k8s-sidecar-standin:k8s
images() {
	local b=$STATE/buildah ctx name
	mkdir -p "$b"
	cat >"$b/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$b/root"
runroot = "$b/run"
EOF
	export CONTAINERS_STORAGE_CONF=$b/storage.conf
	ctx=$(mktemp -d "$STATE/image.XXXXXX")
	(cd "$ROOT/test/k8s" && CGO_ENABLED=0 go build -trimpath -o "$ctx/pause/pause" ./pause)
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$ctx/standin/jenkins-standin" ./internal/e2e/container/testdata/jenkins-standin)
	printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/pause/Containerfile"
	cp "$ROOT/internal/e2e/container/testdata/jenkins-standin/Containerfile" "$ctx/standin/"
	# kiwigrid/k8s-sidecar, which the Jenkins chart runs: the stand-in plays it.
	mkdir -p "$ctx/reloader" && cp "$ctx/standin/jenkins-standin" "$ctx/reloader/k8s-sidecar"
	printf 'FROM scratch\nCOPY k8s-sidecar /k8s-sidecar\nUSER 65534:65534\nENTRYPOINT ["/k8s-sidecar"]\n' >"$ctx/reloader/Containerfile"
	buildah bud -q --layers=false -t "$PAUSE_IMAGE" "$ctx/pause" >/dev/null
	buildah bud -q --layers=false -t "$STANDIN" "$ctx/standin" >/dev/null
	buildah bud -q --layers=false -t "$RELOADER" "$ctx/reloader" >/dev/null
	IMAGE=$IMAGE bash "$ROOT/scripts/image.sh" >/dev/null 2>>"$STATE/logs/images.log" ||
		die "scripts/image.sh failed (log: $STATE/logs/images.log)"
	for name in "$PAUSE_IMAGE" "$STANDIN" "$RELOADER" "$IMAGE"; do
		buildah push -q "$name" "docker-archive:$ctx/image.tar:$name" >/dev/null
		ctr_ images import "$ctx/image.tar" >/dev/null
		rm -f "$ctx/image.tar"
	done
	rm -rf "$ctx"
	log "imported $PAUSE_IMAGE $STANDIN $RELOADER $IMAGE"
}

up() {
	[ "$(id -u)" = 0 ] || die "up needs root (a network namespace, cgroups, mounts)"
	for c in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
		[ -x "$BIN/$c" ] || die "$BIN/$c missing: run scripts/k8s.sh build first"
	done
	[ -x "$DEB/usr/bin/containerd" ] || die "$DEB missing: run scripts/k8s.sh build first"
	command -v buildah >/dev/null || die "buildah not found (scripts/install-test-deps.sh installs it)"
	local t0=$SECONDS
	mkdir -p "$STATE/logs" "$STATE/prestate"
	# What the host was before the first change; kept until a clean down.
	if [ ! -s "$STATE/prestate/host" ]; then
		for p in "${SHARED_PATHS[@]}"; do [ -e "$p" ] && echo "$p"; done >"$STATE/prestate/shared"
		hoststate >"$STATE/prestate/host"
	fi
	if [ ! -e "/run/netns/$NETNS" ]; then
		ip netns add "$NETNS"
		ip -n "$NETNS" link set lo up
		# The node's address: the kubelet refuses a loopback one.
		ip -n "$NETNS" link add hsk-node type veth peer name hsk-peer
		ip -n "$NETNS" addr add "$NODE_IP/32" dev hsk-node
		ip -n "$NETNS" link set hsk-peer up
		ip -n "$NETNS" link set hsk-node up
	fi
	pki
	configs
	mkdir -p "$STATE/etcd" "$STATE/kubelet" "$STATE/pod-logs" "$STATE/volumes"
	chmod 700 "$STATE/etcd"
	start etcd "$DEB/usr/bin/etcd" --name homesnap-k8s --data-dir "$STATE/etcd" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster homesnap-k8s=http://127.0.0.1:2380
	PATH=$DEB/usr/bin:$PATH start containerd "$DEB/usr/bin/containerd" --config "$STATE/etc/containerd.toml"
	waitfor etcd 60 innet curl -sf http://127.0.0.1:2379/health
	waitfor containerd 60 ctr_ version
	local P=$STATE/pki
	start kube-apiserver "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
		--bind-address=127.0.0.1 --advertise-address="$NODE_IP" --secure-port=6443 \
		--endpoint-reconciler-type=none --service-cluster-ip-range=10.96.0.0/24 \
		--client-ca-file="$P/ca.crt" --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
		--kubelet-client-certificate="$P/apiserver-kubelet-client.crt" --kubelet-client-key="$P/apiserver-kubelet-client.key" \
		--kubelet-preferred-address-types=InternalIP \
		--service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$P/sa.pub" \
		--service-account-signing-key-file="$P/sa.key" \
		--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction
	waitfor kube-apiserver 300 api /readyz
	start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$STATE/conf/controller-manager.conf" \
		--authentication-kubeconfig="$STATE/conf/controller-manager.conf" \
		--authorization-kubeconfig="$STATE/conf/controller-manager.conf" \
		--bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
		--service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
		--cluster-signing-cert-file="$P/ca.crt" --cluster-signing-key-file="$P/ca.key"
	start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$STATE/conf/scheduler.conf" \
		--authentication-kubeconfig="$STATE/conf/scheduler.conf" --authorization-kubeconfig="$STATE/conf/scheduler.conf" \
		--bind-address=127.0.0.1 --leader-elect=false
	# The images before the kubelet: it is what garbage-collects images.
	images
	start kubelet "$BIN/kubelet" --config="$STATE/etc/kubelet.yaml" --kubeconfig="$STATE/conf/kubelet.conf" \
		--root-dir="$STATE/kubelet" --cert-dir="$STATE/kubelet/pki" --hostname-override="$NODE" --node-ip="$NODE_IP"
	waitfor node-ready 180 nodeready
	log "up in $((SECONDS - t0)) s; kubeconfig $STATE/conf/admin.conf (inside netns $NETNS)"
}

nodeready() {
	api "/api/v1/nodes/$NODE" | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'
}

# --- down -----------------------------------------------------------------------

down() {
	[ "$(id -u)" = 0 ] || die "down needs root"
	local t0=$SECONDS p
	for p in kubelet kube-scheduler kube-controller-manager kube-apiserver; do stop "$p"; done
	log "control plane stopped after $((SECONDS - t0)) s"
	# The pods' processes: kill their tasks through containerd, then
	# whatever is left in the pods' cgroups (after a killed up, containerd
	# may be gone while its shims and containers run on).
	if pidof_ containerd >/dev/null && ctr_ version >/dev/null 2>&1; then
		for p in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$p" >/dev/null 2>&1 || true; done
		for p in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$p" >/dev/null 2>&1 || true; done
	fi
	stop containerd
	local f
	for f in "$STATE"/containerd/state/io.containerd.runtime.v2.task/*/*/shim.pid; do
		[ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
	done
	for f in /sys/fs/cgroup/*/kubepods; do
		grep -qx "cgroup $f" "$STATE/prestate/host" 2>/dev/null && continue # not ours
		[ -d "$f" ] && find "$f" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
	done
	stop etcd
	log "processes stopped after $((SECONDS - t0)) s"
	# Anything of ours still running (a crashed up's orphans): by pid.
	ours | while read -r p _; do kill -9 "$p" 2>/dev/null || true; done
	# Mounts under our dirs, deepest first (the kubelet's volumes and
	# token tmpfs, the pods' network namespaces, overlay rootfs).
	local m
	for _ in 1 2 3; do
		awk '{print $5}' /proc/self/mountinfo | while read -r m; do
			case $m in "$STATE"/* | /var/lib/kubelet* | /run/containerd*) echo "$m" ;; esac
		done | sort -r | while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
	done
	[ -e "/run/netns/$NETNS" ] && ip netns del "$NETNS"
	# What the host was before up: sysctls, cgroups, paths.
	local pre=$STATE/prestate/host
	if [ -s "$pre" ]; then
		local k v
		while read -r k v; do
			[ "$k" = sysctl ] && sysctl -q -w "$v"
		done <"$pre"
		for f in /sys/fs/cgroup/*/kubepods; do
			grep -qx "cgroup $f" "$pre" || { [ -d "$f" ] && find "$f" -depth -type d -exec rmdir {} + 2>/dev/null || true; }
		done
		for f in "${HOST_PATHS[@]}"; do
			grep -qx "path $f" "$pre" || rm -rf "$f"
		done
		rm -f /var/lib/cni/results/homesnap-k8s-* # the CNI cache: ours are named after our network
		for f in "${SHARED_PATHS[@]}"; do
			grep -qx "$f" "$STATE/prestate/shared" 2>/dev/null && continue
			[ "$f" = /run/netns ] && mountpoint -q "$f" && [ -z "$(ls -A "$f")" ] && { umount "$f" 2>/dev/null || true; } # ip netns add mounts it
			rmdir "$f" 2>/dev/null || true # not if podman has something in it now
		done
	fi
	# Our state but the logs.
	find "$STATE" -mindepth 1 -maxdepth 1 ! -name logs ! -name prestate -exec rm -rf {} +
	if [ -s "$pre" ]; then
		local now
		now=$(hoststate)
		if ! diff <(sort "$pre") <(sort <<<"$now") >"$STATE/logs/host.diff"; then
			cat "$STATE/logs/host.diff" >&2
			die "down: the host differs from before up (above: < before, > now); run down again"
		fi
		rm -rf "$STATE/prestate"
		log "down in $((SECONDS - t0)) s; the host is as up found it (logs kept in $STATE/logs)"
	else
		log "down in $((SECONDS - t0)) s (no cluster was up)"
	fi
}

# --- test -------------------------------------------------------------------------

# test builds the test binary and the homesnap binaries the tests run on
# the host (the module proxy is outside the namespace), then runs the tests
# inside the namespace, where the API server is.
test_() {
	[ -s "$STATE/conf/admin.conf" ] || die "no cluster: scripts/k8s.sh up first"
	local bin=$STATE/test-bin
	mkdir -p "$bin"
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$bin/" ./cmd/homesnap ./cmd/genhome)
	ln -sf homesnap "$bin/restore" && ln -sf homesnap "$bin/snapshot" # as the image installs them
	# The Kubernetes build's flags: the standard library compiles once.
	(cd "$ROOT/test/k8s" && export CGO_ENABLED=0 GOFLAGS=-trimpath && go vet ./... && go test -c -o "$bin/k8s.test" .)
	cd "$ROOT/test/k8s"
	PATH=$TOOLS/bin:$PATH HOMESNAP_K8S_STATE=$STATE HOMESNAP_K8S_BIN=$bin HOMESNAP_K8S_IMAGE=$IMAGE HOMESNAP_K8S_STANDIN=$STANDIN HOMESNAP_K8S_RELOADER=$RELOADER \
		innet "$bin/k8s.test" -test.v -test.count=1 -test.timeout=40m "$@"
}

case ${1:-} in
build) build ;;
up) up ;;
down) down ;;
test) shift && test_ "$@" ;;
*) die "usage: scripts/k8s.sh build|up|test [go test flags]|down" ;;
esac
