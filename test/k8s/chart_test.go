package k8s

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// chart is the pinned copy of the Jenkins chart the examples are checked
// against (examples/testdata/helm/README.md says where it comes from).
const chart = "../../examples/testdata/helm/jenkins"

// TestHelmChartLifecycle installs what `helm template` renders from the
// Jenkins chart with examples/helm/values.yaml, as a user gets it: the
// chart's own StatefulSet, probes, init container (apply_config.sh, which
// writes to the home after homesnap's restore) and config-reload
// sidecars. Substituted: the images (homesnap under test, the Jenkins and
// k8s-sidecar stand-ins), the claim's storage class and the store.
func TestHelmChartLifecycle(t *testing.T) {
	e := cluster(t)
	helm, err := exec.LookPath("helm")
	if err != nil {
		t.Fatal("helm not found: scripts/install-test-deps.sh installs it, scripts/k8s.sh test puts it on PATH")
	}
	const ns, pod = "homesnap-helm", "jenkins-0"
	s := e.newSite(t, ns, pod, "jenkins") // the chart's own claim
	out, err := exec.Command(helm, "template", "jenkins", chart, "-f", "../../examples/helm/values.yaml",
		"--namespace", ns, "--skip-tests").Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	e.config(t, ns)
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		e.create(t, ns, s.store, []byte(doc))
	}

	// apply_config.sh writes these after the restore, as with real Jenkins.
	chartWrites := func(rel string) bool {
		return rel == "plugins.txt" || strings.HasPrefix(rel, "jenkins.install.")
	}
	var current *corev1.Pod
	if !t.Run("first boot restores before the chart's init and Jenkins", func(t *testing.T) {
		current = s.firstBoot(t, chartWrites)
		restore, init := status(current, "homesnap-restore").State.Terminated, status(current, "init").State.Terminated
		if init == nil || init.ExitCode != 0 || init.StartedAt.Before(&restore.FinishedAt) {
			t.Fatalf("the chart's init container, after the restore finished at %v: %+v", restore.FinishedAt, init)
		}
		if l := find(e.logs(t, ns, pod, "init", false), "chart init: finished initialization"); l == nil {
			t.Fatal("the chart's init container did not run apply_config.sh")
		}
	}) {
		return
	}
	t.Run("pod deleted while Jenkins writes", func(t *testing.T) {
		s.stopWhileWriting(t, current, "nothing", func(p *corev1.Pod) error {
			return e.cs.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
		})
	})
}

// create makes one object of the chart's output, substituting the images,
// the claim's storage class and the store as loadExample does.
func (e *env) create(t *testing.T, ns, store string, doc []byte) {
	t.Helper()
	ctx := context.Background()
	var meta metav1.TypeMeta
	must(t, yaml.Unmarshal(doc, &meta))
	opts := metav1.CreateOptions{}
	var err error
	switch meta.Kind {
	case "":
		return // an empty document
	case "ServiceAccount":
		o := &corev1.ServiceAccount{}
		must(t, yaml.UnmarshalStrict(doc, o))
		_, err = e.cs.CoreV1().ServiceAccounts(ns).Create(ctx, o, opts)
	case "Secret":
		o := &corev1.Secret{}
		must(t, yaml.UnmarshalStrict(doc, o))
		_, err = e.cs.CoreV1().Secrets(ns).Create(ctx, o, opts)
	case "ConfigMap":
		o := &corev1.ConfigMap{}
		must(t, yaml.UnmarshalStrict(doc, o))
		_, err = e.cs.CoreV1().ConfigMaps(ns).Create(ctx, o, opts)
	case "Service":
		o := &corev1.Service{}
		must(t, yaml.UnmarshalStrict(doc, o))
		_, err = e.cs.CoreV1().Services(ns).Create(ctx, o, opts)
	case "Role":
		o := &rbacv1.Role{}
		must(t, yaml.UnmarshalStrict(doc, o))
		_, err = e.cs.RbacV1().Roles(ns).Create(ctx, o, opts)
	case "RoleBinding":
		o := &rbacv1.RoleBinding{}
		must(t, yaml.UnmarshalStrict(doc, o))
		_, err = e.cs.RbacV1().RoleBindings(ns).Create(ctx, o, opts)
	case "PersistentVolumeClaim":
		o := &corev1.PersistentVolumeClaim{}
		must(t, yaml.UnmarshalStrict(doc, o))
		sc := storageClass
		o.Spec.StorageClassName = &sc
		_, err = e.cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, o, opts)
	case "StatefulSet":
		o := &appsv1.StatefulSet{}
		must(t, yaml.UnmarshalStrict(doc, o))
		if n := e.substitute(t, &o.Spec.Template.Spec, store, writing); n != 4 {
			t.Fatalf("the chart's StatefulSet: %d of the restore, snapshot, init and Jenkins containers, want 4", n)
		}
		_, err = e.cs.AppsV1().StatefulSets(ns).Create(ctx, o, opts)
	default:
		t.Fatalf("the chart rendered a %s this test does not create", meta.Kind)
	}
	must(t, err)
}
