// Package k8s tests homesnap's pod lifecycle in a real single-node
// Kubernetes, the one scripts/k8s.sh brings up: the project's own manifests
// as a user pastes them (only the images, the storage class and the
// store's location substituted), a kubelet running the native sidecar, its
// probes and the termination order, a StatefulSet controller recreating
// the pod on its PersistentVolume.
//
//	scripts/k8s.sh up && scripts/k8s.sh test; scripts/k8s.sh down
//
// The tests run inside the cluster's network namespace (scripts/k8s.sh test
// builds and starts them there) and fail, not skip, without a cluster. They
// are a module of their own so that client-go stays out of homesnap's.
package k8s
