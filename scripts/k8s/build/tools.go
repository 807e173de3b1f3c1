//go:build tools

// Package build pins the Kubernetes release scripts/k8s.sh builds. It is a
// module of its own so that k8s.io/kubernetes and its dependencies never enter
// the homesnap module; the blank imports keep `go mod tidy` from dropping them.
package build

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
