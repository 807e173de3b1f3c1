// Package container runs the released image (built by scripts/image.sh
// with buildah) in a real container runtime, podman, the way a pod runs
// it: as uid 1000, on a read-only root filesystem, with every capability
// dropped. The tests need root and podman with runc; they are skipped
// under -short, and where podman is missing unless HOMESNAP_TEST_SERVERS=1,
// where they fail (internal/testenv).
package container
