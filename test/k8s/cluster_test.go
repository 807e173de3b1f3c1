package k8s

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testhome"
)

// env is what scripts/k8s.sh test hands the tests.
type env struct {
	state   string // the cluster's state directory (kubeconfig, volumes)
	bin     string // restore, snapshot and genhome built for this host
	image   string // the homesnap image under test, in containerd
	standin string // the Jenkins stand-in image, in containerd
	cs      *kubernetes.Clientset
}

const (
	storageClass = "homesnap-local"
	node         = "homesnap-k8s"
	examples     = "../../examples/kubernetes/"
)

// cluster connects to the running cluster; a test fails without one.
func cluster(t *testing.T) *env {
	t.Helper()
	e := &env{state: os.Getenv("HOMESNAP_K8S_STATE"), bin: os.Getenv("HOMESNAP_K8S_BIN"),
		image: os.Getenv("HOMESNAP_K8S_IMAGE"), standin: os.Getenv("HOMESNAP_K8S_STANDIN")}
	if e.state == "" {
		e.state = filepath.Join(os.TempDir(), "homesnap-k8s")
	}
	if e.bin == "" || e.image == "" || e.standin == "" {
		t.Fatal("HOMESNAP_K8S_BIN, HOMESNAP_K8S_IMAGE or HOMESNAP_K8S_STANDIN unset: run these tests with scripts/k8s.sh test")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(e.state, "conf/admin.conf"))
	if err != nil {
		t.Fatalf("no cluster (scripts/k8s.sh up): %v", err)
	}
	if e.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := e.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no cluster (scripts/k8s.sh up, and run inside its network namespace: scripts/k8s.sh test): %v", err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			t.Fatalf("node %s is not ready: %s", node, c.Message)
		}
	}
	return e
}

// dir makes a directory under the cluster's state owned by uid/gid 1000,
// as a PersistentVolume with fsGroup 1000 looks to the pod.
func (e *env) dir(t *testing.T, parts ...string) string {
	t.Helper()
	d := filepath.Join(append([]string{e.state, "volumes"}, parts...)...)
	if err := os.RemoveAll(d); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	chown(t, d)
	return d
}

func chown(t *testing.T, path string) {
	t.Helper()
	if out, err := exec.Command("chown", "-R", "-h", "1000:1000", path).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v\n%s", err, out)
	}
}

// run runs one of the host's homesnap binaries; it fails the test on a
// non-zero exit unless allowed.
func (e *env) run(t *testing.T, name string, args ...string) (stdout string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(filepath.Join(e.bin, name), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// record is a snapshot in `restore --list --output json`.
type record struct {
	ID      string    `json:"id"`
	Parent  string    `json:"parent"`
	Time    time.Time `json:"time"`
	Trigger string    `json:"trigger"`
	Head    bool      `json:"head"`
}

// history lists the snapshots the store's head reaches, oldest first.
func (e *env) history(t *testing.T, store string) []record {
	t.Helper()
	out := e.run(t, "restore", "--list", "--output", "json", "--store", store)
	var list []record
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("restore --list --output json: %v\n%s", err, out)
	}
	return list
}

// ---- manifests ----------------------------------------------------------

// example is the project's manifests for one StatefulSet, as pasted, with
// what a test cluster provides differently substituted.
type example struct {
	set       *appsv1.StatefulSet
	services  []*corev1.Service
	configMap *corev1.ConfigMap
	account   *corev1.ServiceAccount
}

func decodeFile(t *testing.T, file string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, d := range strings.Split(string(data), "\n---") {
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// loadExample reads a StatefulSet example and the config and account every
// example needs, and substitutes: the images (homesnap under test, the
// Jenkins stand-in), the claim's storage class, and the store (a file store
// on a hostPath volume at /store). standinEnv configures the stand-in.
func (e *env) loadExample(t *testing.T, file, store string, standinEnv ...corev1.EnvVar) *example {
	t.Helper()
	x := &example{}
	for _, doc := range decodeFile(t, examples+file) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		switch meta.Kind {
		case "StatefulSet":
			x.set = &appsv1.StatefulSet{}
			must(t, yaml.UnmarshalStrict(doc, x.set))
		case "Service":
			s := &corev1.Service{}
			must(t, yaml.UnmarshalStrict(doc, s))
			x.services = append(x.services, s)
		default:
			t.Fatalf("%s: unexpected kind %q", file, meta.Kind)
		}
	}
	x.configMap = &corev1.ConfigMap{}
	must(t, yaml.UnmarshalStrict(decodeFile(t, examples+"homesnap-config.yaml")[0], x.configMap))
	x.account = &corev1.ServiceAccount{}
	must(t, yaml.UnmarshalStrict(decodeFile(t, examples+"serviceaccount.yaml")[0], x.account))
	x.configMap.Data["HOMESNAP_STORE"] = "/store"

	spec := &x.set.Spec.Template.Spec
	dirType := corev1.HostPathDirectory
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "store",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: store, Type: &dirType}}})
	images := 0
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			c := &list[i]
			switch {
			case strings.HasPrefix(c.Image, "ghcr.io/homesnap/homesnap:"):
				c.Image = e.image
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "store", MountPath: "/store"})
				images++
			case strings.HasPrefix(c.Image, "jenkins/jenkins:"):
				c.Image = e.standin
				c.Env = append(c.Env, standinEnv...)
				images++
			}
		}
	}
	if images != 3 {
		t.Fatalf("%s: found %d of the restore, snapshot and Jenkins images", file, images)
	}
	sc := storageClass
	for i := range x.set.Spec.VolumeClaimTemplates {
		x.set.Spec.VolumeClaimTemplates[i].Spec.StorageClassName = &sc
	}
	return x
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// apply creates the example's objects in a fresh namespace; the namespace
// goes when the test ends.
func (e *env) apply(t *testing.T, ns string, x *example) {
	t.Helper()
	ctx := context.Background()
	e.namespace(t, ns)
	_, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, x.configMap, metav1.CreateOptions{})
	must(t, err)
	_, err = e.cs.CoreV1().ServiceAccounts(ns).Create(ctx, x.account, metav1.CreateOptions{})
	must(t, err)
	for _, s := range x.services {
		_, err = e.cs.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
		must(t, err)
	}
	_, err = e.cs.AppsV1().StatefulSets(ns).Create(ctx, x.set, metav1.CreateOptions{})
	must(t, err)
}

func (e *env) namespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	_, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		if os.Getenv("KEEP_NAMESPACES") != "" {
			return
		}
		// The pods stop as on any deletion (their final snapshots run); the
		// test does not wait for them.
		e.cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
}

// storageClass and persistentVolume: local volumes on this node, bound
// when a pod needs one, as a cluster without a provisioner offers them.
func (e *env) volume(t *testing.T, name, path string) {
	t.Helper()
	ctx := context.Background()
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	_, err := e.cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: storageClass},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &mode,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              storageClass,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	_, err = e.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { e.cs.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// ---- pods ---------------------------------------------------------------

// waitPod polls the pod until ok says so; other than a uid in not, which
// names pods that must have gone (a recreated pod is a new one).
func (e *env) waitPod(t *testing.T, ns, name, what string, limit time.Duration, not types.UID, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last *corev1.Pod
	for {
		p, err := e.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && p.UID != not {
			last = p
			if ok(p) {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s: %s: not within %v; last seen:\n%s", ns, name, what, limit, podSummary(last))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func podSummary(p *corev1.Pod) string {
	if p == nil {
		return "no pod"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s, conditions %v\n", p.Status.Phase, p.Status.Conditions)
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, "  %s: ready %v restarts %d state %+v last %+v\n", s.Name, s.Ready, s.RestartCount, s.State, s.LastTerminationState)
	}
	return b.String()
}

// jenkinsReady: the stand-in answers its readiness probe.
func jenkinsReady(p *corev1.Pod) bool {
	s := status(p, "jenkins")
	return s != nil && s.Ready
}

// status is a container's status, init containers included.
func status(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// line is one line a container printed, with the time the runtime
// received it.
type line struct {
	At   time.Time
	Text string
}

// logs reads a container's output through the API (kubectl logs
// --timestamps).
func (e *env) logs(t *testing.T, ns, pod, container string, previous bool) []line {
	t.Helper()
	r, err := e.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Timestamps: true, Previous: previous}).Stream(context.Background())
	if err != nil {
		t.Fatalf("logs of %s/%s %s: %v", ns, pod, container, err)
	}
	defer r.Close()
	return readLines(r)
}

func readLines(r io.Reader) []line {
	var out []line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		ts, text, _ := strings.Cut(sc.Text(), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		out = append(out, line{at, text})
	}
	return out
}

// follower streams a container's output for as long as it runs (kubectl
// logs -f), so that what a stopping pod prints is kept after the pod has
// gone.
type follower struct {
	mu    sync.Mutex
	lines []line
	done  chan struct{}
}

func (e *env) follow(t *testing.T, ns, pod, container string) *follower {
	t.Helper()
	r, err := e.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Timestamps: true, Follow: true}).Stream(context.Background())
	if err != nil {
		t.Fatalf("following %s/%s %s: %v", ns, pod, container, err)
	}
	f := &follower{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			f.mu.Lock()
			f.lines = append(f.lines, readLines(strings.NewReader(sc.Text()+"\n"))...)
			f.mu.Unlock()
		}
	}()
	return f
}

// wait returns what the container printed once its output ended.
func (f *follower) wait(t *testing.T, limit time.Duration) []line {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(limit):
		t.Fatalf("a container's output did not end within %v", limit)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lines
}

// find is the first line containing s, or nil.
func find(lines []line, s string) *line {
	for i := range lines {
		if strings.Contains(lines[i].Text, s) {
			return &lines[i]
		}
	}
	return nil
}

// entry is one of homesnap's JSON log lines (HOMESNAP_LOG_FORMAT=json, as
// homesnap-config.yaml sets).
type entry struct {
	At       time.Time
	Message  string `json:"message"`
	Decision string `json:"decision"`
	Snapshot string `json:"snapshot"`
	Parent   string `json:"parent"`
	Walked   *bool  `json:"walked"`
	Error    string `json:"error"`
}

// entries are the JSON log lines whose message contains msg.
func entries(lines []line, msg string) []entry {
	var out []entry
	for _, l := range lines {
		var en entry
		if json.Unmarshal([]byte(l.Text), &en) == nil && strings.Contains(en.Message, msg) {
			en.At = l.At
			out = append(out, en)
		}
	}
	return out
}

// ---- homes --------------------------------------------------------------

// selectedFiles is what a snapshot of home holds (the default selection),
// minus the home's mark, which only a restore writes, and minus what skip
// says.
func selectedFiles(t *testing.T, home string, skip func(rel string) bool) testhome.Tree {
	t.Helper()
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	must(t, err)
	tree, err := testhome.Read(home, func(rel string) bool {
		return sel.Selected(rel) && rel != ".homesnap-home.json" && (skip == nil || !skip(rel))
	})
	must(t, err)
	return tree
}

// sameFiles fails unless every file and symlink of want is in got with the
// same content, mode, owner and modification time (directories' times move
// as the stand-in adds builds).
func sameFiles(t *testing.T, what string, want, got testhome.Tree) {
	t.Helper()
	var diffs []string
	for rel, a := range want {
		b, ok := got[rel]
		if a.Type == "d" {
			if !ok || b.Type != "d" || b.Mode != a.Mode {
				diffs = append(diffs, fmt.Sprintf("%s: %v, want %v", rel, b, a))
			}
			continue
		}
		if !ok || b != a {
			diffs = append(diffs, fmt.Sprintf("%s: %v, want %v", rel, b, a))
		}
	}
	if len(diffs) > 0 {
		if len(diffs) > 15 {
			diffs = append(diffs[:15], "...")
		}
		t.Fatalf("%s: %d of %d paths differ:\n%s", what, len(diffs), len(want), strings.Join(diffs, "\n"))
	}
}
