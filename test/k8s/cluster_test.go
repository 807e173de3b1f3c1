package k8s

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	state    string // the cluster's state directory (kubeconfig, volumes)
	bin      string // restore, snapshot and genhome built for this host
	image    string // the homesnap image under test, in containerd
	standin  string // the Jenkins stand-in image, in containerd
	reloader string // the stand-in for kiwigrid/k8s-sidecar (the Jenkins chart's config reload), in containerd
	authKey  string // the store's authentication key, as homesnap-config.yaml says to make it
	cs       *kubernetes.Clientset
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
		image: os.Getenv("HOMESNAP_K8S_IMAGE"), standin: os.Getenv("HOMESNAP_K8S_STANDIN"),
		reloader: os.Getenv("HOMESNAP_K8S_RELOADER")}
	if e.state == "" {
		e.state = filepath.Join(os.TempDir(), "homesnap-k8s")
	}
	if e.bin == "" || e.image == "" || e.standin == "" || e.reloader == "" {
		t.Fatal("HOMESNAP_K8S_BIN, _IMAGE, _STANDIN or _RELOADER unset: run these tests with scripts/k8s.sh test")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(e.state, "conf/admin.conf"))
	if err != nil {
		t.Fatalf("no cluster (scripts/k8s.sh up): %v", err)
	}
	if e.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	// openssl rand -hex 32 > homesnap-auth.key, as homesnap-config.yaml says.
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	e.authKey = filepath.Join(t.TempDir(), "homesnap-auth.key")
	must(t, os.WriteFile(e.authKey, []byte(hex.EncodeToString(key)+"\n"), 0o600))
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
	cmd.Env = append(os.Environ(), "HOMESNAP_AUTH_KEY_FILE="+e.authKey) // the operator holds the key too
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String()
}

// record is a snapshot in `homesnap list --output json`.
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
	out := e.run(t, "homesnap", "list", "--output", "json", "--store", store)
	var list []record
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("homesnap list --output json: %v\n%s", err, out)
	}
	return list
}

// ---- manifests ----------------------------------------------------------

// example is the project's manifests for one StatefulSet, as pasted, with
// what a test cluster provides differently substituted.
type example struct {
	set      *appsv1.StatefulSet
	services []*corev1.Service
	account  *corev1.ServiceAccount
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

// loadExample reads a StatefulSet example and the account every example
// needs, and substitutes what a test cluster provides differently: the
// images, the claim's storage class and the store (substitute).
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
	x.account = &corev1.ServiceAccount{}
	must(t, yaml.UnmarshalStrict(decodeFile(t, examples+"serviceaccount.yaml")[0], x.account))
	if n := e.substitute(t, &x.set.Spec.Template.Spec, store, standinEnv...); n != 3 {
		t.Fatalf("%s: found %d of the restore, snapshot and Jenkins images, want 3", file, n)
	}
	sc := storageClass
	for i := range x.set.Spec.VolumeClaimTemplates {
		x.set.Spec.VolumeClaimTemplates[i].Spec.StorageClassName = &sc
	}
	return x
}

// Images as the manifests name them, wherever they are pulled from.
var (
	homesnapImage = regexp.MustCompile(`(^|/)homesnap/homesnap:`)
	jenkinsImage  = regexp.MustCompile(`(^|/)jenkins/jenkins:`)
	reloaderImage = regexp.MustCompile(`(^|/)kiwigrid/k8s-sidecar:`)
)

// substitute points a pod's containers at the images under test (homesnap,
// the Jenkins stand-in configured by standinEnv, the k8s-sidecar
// stand-in) and mounts the store (a file store on a hostPath volume at
// /store) where homesnap runs; it returns how many homesnap and Jenkins
// containers it found.
func (e *env) substitute(t *testing.T, spec *corev1.PodSpec, store string, standinEnv ...corev1.EnvVar) int {
	t.Helper()
	dirType := corev1.HostPathDirectory
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "store",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: store, Type: &dirType}}})
	n := 0
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			c := &list[i]
			switch {
			case homesnapImage.MatchString(c.Image):
				c.Image = e.image
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "store", MountPath: "/store"})
				n++
			case jenkinsImage.MatchString(c.Image):
				c.Image = e.standin
				c.ImagePullPolicy = corev1.PullNever // the chart says Always; nothing is pulled here
				c.Env = append(c.Env, standinEnv...)
				n++
			case reloaderImage.MatchString(c.Image):
				c.Image = e.reloader
			default:
				t.Fatalf("container %s: no stand-in for image %s", c.Name, c.Image)
			}
		}
	}
	return n
}

// config makes what every example expects beside it: the homesnap-auth
// Secret (kubectl create secret generic homesnap-auth
// --from-file=auth.key=homesnap-auth.key) and homesnap-config.yaml's
// ConfigMap, its store pointed at /store.
func (e *env) config(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	key, err := os.ReadFile(e.authKey)
	must(t, err)
	_, err = e.cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "homesnap-auth"},
		Data: map[string][]byte{"auth.key": key}}, metav1.CreateOptions{})
	must(t, err)
	cm := &corev1.ConfigMap{}
	must(t, yaml.UnmarshalStrict(decodeFile(t, examples+"homesnap-config.yaml")[0], cm))
	cm.Data["HOMESNAP_STORE"] = "/store"
	_, err = e.cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	must(t, err)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// apply creates the example's objects in the test's namespace.
func (e *env) apply(t *testing.T, ns string, x *example) {
	t.Helper()
	ctx := context.Background()
	e.config(t, ns)
	_, err := e.cs.CoreV1().ServiceAccounts(ns).Create(ctx, x.account, metav1.CreateOptions{})
	must(t, err)
	for _, s := range x.services {
		_, err = e.cs.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
		must(t, err)
	}
	_, err = e.cs.AppsV1().StatefulSets(ns).Create(ctx, x.set, metav1.CreateOptions{})
	must(t, err)
}

// scale sets a StatefulSet's replicas, as kubectl scale does.
func (e *env) scale(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	sc, err := e.cs.AppsV1().StatefulSets(ns).GetScale(ctx, name, metav1.GetOptions{})
	must(t, err)
	sc.Spec.Replicas = replicas
	_, err = e.cs.AppsV1().StatefulSets(ns).UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
	must(t, err)
}

// deleteNamespace deletes a namespace and waits until it is gone (its
// pods stopped, their final snapshots taken or refused).
func (e *env) deleteNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	gone(t, "namespace "+ns, func() error {
		return e.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}, func() error { _, err := e.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); return err })
}

// namespace makes a fresh namespace, first of all (a previous run's goes
// first, releasing its claims and volumes); it goes when the test ends.
func (e *env) namespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	e.deleteNamespace(t, ns) // left by a run that was killed
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

// volume makes a local volume on this node for one claim, as an admin of
// a cluster without a provisioner does (reserved for the claim, so that
// another test's claim cannot take it).
func (e *env) volume(t *testing.T, name, path, ns, claim string) {
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
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			StorageClassName:              storageClass,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	gone(t, "volume "+name, func() error { // left by a run that was killed
		return e.cs.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{})
	}, func() error {
		_, err := e.cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		return err
	})
	_, err = e.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() { e.cs.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// gone deletes an object and waits until get says it is not found.
func gone(t *testing.T, what string, del, get func() error) {
	t.Helper()
	if err := del(); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatalf("deleting the %s: %v", what, err)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		err := get()
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %s is still there 3 minutes after its deletion (%v)", what, err)
		}
	}
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
			t.Fatalf("%s/%s: %s: not within %v; last seen:\n%s%s", ns, name, what, limit, podSummary(last), e.nodeSummary())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// podGone waits until the pod is deleted (its containers stopped).
func (e *env) podGone(t *testing.T, ns string, p *corev1.Pod) {
	t.Helper()
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(time.Second) {
		q, err := e.cs.CoreV1().Pods(ns).Get(context.Background(), p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && q.UID != p.UID {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s not gone within 4 minutes:\n%s", ns, p.Name, podSummary(q))
		}
	}
}

// nodeSummary names each node's taints and the conditions it reports
// besides Ready: a pod that is never scheduled waits on one of them (such
// as disk-pressure, when the machine's disk is nearly full).
func (e *env) nodeSummary() string {
	nodes, err := e.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return "nodes: " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, n := range nodes.Items {
		fmt.Fprintf(&b, "node %s: taints %v", n.Name, n.Spec.Taints)
		for _, c := range n.Status.Conditions {
			if c.Type != corev1.NodeReady && c.Status == corev1.ConditionTrue {
				fmt.Fprintf(&b, "; %s: %s", c.Type, c.Message)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
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
