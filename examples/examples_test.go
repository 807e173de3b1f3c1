// Package examples holds the manifests people paste next to their Jenkins.
// These tests decode each one strictly into the official Kubernetes types
// and check the wiring a typo would break: the home volume, the variables,
// the image, the user.
package examples

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

var bin string // the statically built homesnap, and its links restore, snapshot and prune

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "homesnap-examples-")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755)
	// Built and installed exactly as the Dockerfile does: homesnap, and
	// the names the examples run as links to it.
	build := exec.Command("go", "build", "-trimpath", "-o", dir, "../cmd/homesnap")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		os.Exit(1)
	}
	for _, name := range []string{"restore", "snapshot", "prune"} {
		if err := os.Symlink("homesnap", filepath.Join(dir, name)); err != nil {
			fmt.Fprintln(os.Stderr, "link binaries:", err)
			os.Exit(1)
		}
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// document is one decoded Kubernetes object of an example file.
type document struct {
	file string
	obj  any
}

// decodeStrict decodes every document of a multi-document YAML file into
// its official type; unknown fields and unknown kinds are errors.
func decodeStrict(t *testing.T, file string) []document {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs []document
	for _, raw := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(raw), &meta); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if meta.Kind == "" {
			continue // comments only
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "apps/v1 Deployment":
			obj = &appsv1.Deployment{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "v1 ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "networking.k8s.io/v1 Ingress":
			obj = &networkingv1.Ingress{}
		default:
			t.Fatalf("%s: no type for %s %s", file, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(raw), obj); err != nil {
			t.Fatalf("%s: %s: %v", file, meta.Kind, err)
		}
		docs = append(docs, document{file, obj})
	}
	return docs
}

func allManifests(t *testing.T) []document {
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) < 4 {
		t.Fatalf("found %d Kubernetes examples, want at least 4", len(files))
	}
	var docs []document
	for _, f := range files {
		docs = append(docs, decodeStrict(t, f)...)
	}
	return docs
}

// dockerfile returns the release the Dockerfile builds and its user.
func dockerfile(t *testing.T) (version, user string) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^ARG VERSION=(\S+)$`).FindSubmatch(data); m != nil {
		version = string(m[1])
	}
	if m := regexp.MustCompile(`(?m)^USER (\S+)$`).FindSubmatch(data); m != nil {
		user = string(m[1])
	}
	if version == "" || user == "" {
		t.Fatal("Dockerfile: no ARG VERSION=... or USER line")
	}
	return version, user
}

func TestKubernetesExamplesWiring(t *testing.T) {
	version, _ := dockerfile(t)
	image := "ghcr.io/homesnap/homesnap:" + version
	config := map[string]string{} // the shared ConfigMap's variables
	var sets []*appsv1.StatefulSet
	for _, d := range allManifests(t) {
		switch o := d.obj.(type) {
		case *corev1.ConfigMap:
			if o.Name == "homesnap" {
				config = o.Data
			}
		case *appsv1.StatefulSet:
			sets = append(sets, o)
		}
	}
	if config["HOMESNAP_STORE"] == "" || config["HOMESNAP_HOME"] == "" {
		t.Fatalf("ConfigMap homesnap lacks HOMESNAP_STORE or HOMESNAP_HOME: %v", config)
	}
	var native, classic int
	for _, s := range sets {
		p := checkPod(t, s.Name, &s.Spec.Template.Spec, image, config)
		checkIdentityScope(t, s.Name, s.Spec.Template.Annotations, &s.Spec.Template.Spec, image)
		if p.native {
			native++
		} else {
			classic++
		}
	}
	if native == 0 || classic == 0 {
		t.Errorf("want a native-sidecar and a classic-sidecar StatefulSet, got %d and %d", native, classic)
	}
}

// pod is what checkPod found in a Jenkins pod spec.
type pod struct{ native bool }

// checkPod checks one Jenkins pod: restore runs first as an init container,
// the snapshot runs beside Jenkins, all three see the home at the same
// path, the homesnap containers run the released image as uid 1000 on a
// read-only root, the probes hit the port the sidecar listens on, and the
// grace period leaves room for the final snapshot.
// checkIdentityScope: the workload identity webhooks of AKS and EKS give
// the pod's cloud identity to every container they do not skip; only
// homesnap's containers may have it, not Jenkins nor the builds on its
// built-in node (GKE's metadata server cannot be scoped per container:
// kubernetes.md says so).
func checkIdentityScope(t *testing.T, name string, annotations map[string]string, spec *corev1.PodSpec, image string) {
	t.Helper()
	skips := map[string]string{"azure.workload.identity/skip-containers": ";", "eks.amazonaws.com/skip-containers": ","}
	for key, sep := range skips {
		skipped := strings.Split(annotations[key], sep)
		for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
			if c.Image != image && !slices.Contains(skipped, c.Name) {
				t.Errorf("%s: annotation %s does not skip container %s: it would act as the store's cloud identity", name, key, c.Name)
			}
		}
	}
}

func checkPod(t *testing.T, name string, spec *corev1.PodSpec, image string, config map[string]string) pod {
	t.Helper()
	find := func(list []corev1.Container, cmd string) (int, *corev1.Container) {
		for i := range list {
			if len(list[i].Command) > 0 && list[i].Command[0] == cmd {
				return i, &list[i]
			}
		}
		return -1, nil
	}
	ri, restore := find(spec.InitContainers, "restore")
	si, snap := find(spec.InitContainers, "snapshot")
	var p pod
	if snap != nil {
		p.native = true
		if snap.RestartPolicy == nil || *snap.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("%s: snapshot init container without restartPolicy: Always is not a sidecar", name)
		}
		if ri > si {
			t.Errorf("%s: the snapshot sidecar starts before the restore", name)
		}
	} else {
		_, snap = find(spec.Containers, "snapshot")
	}
	var jenkins *corev1.Container
	for i := range spec.Containers {
		if strings.HasPrefix(spec.Containers[i].Image, "jenkins/jenkins:") {
			jenkins = &spec.Containers[i]
		}
	}
	if restore == nil || snap == nil || jenkins == nil {
		t.Fatalf("%s: want a restore init container, a snapshot sidecar and Jenkins", name)
	}
	home := config["HOMESNAP_HOME"]
	mount := func(c *corev1.Container) string {
		for _, m := range c.VolumeMounts {
			if m.MountPath == home {
				return m.Name
			}
		}
		t.Errorf("%s: container %s does not mount the home at %s", name, c.Name, home)
		return ""
	}
	if vr, vs, vj := mount(restore), mount(snap), mount(jenkins); vr != vj || vs != vj {
		t.Errorf("%s: the home is volume %q in restore, %q in snapshot, %q in Jenkins", name, vr, vs, vj)
	}
	if env(jenkins, "JENKINS_HOME") != home {
		t.Errorf("%s: Jenkins' JENKINS_HOME is %q, homesnap's home %q", name, env(jenkins, "JENKINS_HOME"), home)
	}
	sc := spec.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.FSGroup == nil {
		t.Errorf("%s: the pod must run as uid 1000 with an fsGroup", name)
	}
	for _, c := range []*corev1.Container{restore, snap, jenkins} {
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
			t.Errorf("%s: %s has no CPU and memory requests and memory limit", name, c.Name)
		}
	}
	// A restore running as root applies the snapshot's owners unless told
	// whose the home is.
	var uid *int64 // nil: the image's user, 1000
	if sc != nil {
		uid = sc.RunAsUser
	}
	if restore.SecurityContext != nil && restore.SecurityContext.RunAsUser != nil {
		uid = restore.SecurityContext.RunAsUser
	}
	if uid != nil && *uid == 0 && env(restore, "HOMESNAP_CHOWN") == "" {
		t.Errorf("%s: the restore runs as root without HOMESNAP_CHOWN", name)
	}
	for _, c := range []*corev1.Container{restore, snap} {
		if c.Image != image {
			t.Errorf("%s: %s runs %s, the Dockerfile builds %s", name, c.Name, c.Image, image)
		}
		if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("%s: %s must have a read-only root filesystem", name, c.Name)
		}
	}
	checkStoreKey(t, name, restore, snap, jenkins, spec.Volumes)
	listen := env(snap, "HOMESNAP_LISTEN")
	_, port, _ := strings.Cut(listen, ":")
	if port == "" {
		t.Fatalf("%s: the snapshot sidecar does not set HOMESNAP_LISTEN", name)
	}
	for _, probe := range []*corev1.Probe{snap.LivenessProbe, snap.StartupProbe, snap.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil {
			continue
		}
		if got := probe.HTTPGet.Port.String(); got != port && !hasPort(snap, got, port) {
			t.Errorf("%s: a probe hits port %s, the sidecar listens on %s", name, got, listen)
		}
	}
	if snap.LivenessProbe == nil {
		t.Errorf("%s: the sidecar has no liveness probe", name)
	}
	grace := int64(30)
	if spec.TerminationGracePeriodSeconds != nil {
		grace = *spec.TerminationGracePeriodSeconds
	}
	if final := seconds(t, env(snap, "HOMESNAP_FINAL_TIMEOUT")); final == 0 || final >= grace {
		t.Errorf("%s: final snapshot timeout %ds does not fit in the grace period %ds", name, final, grace)
	}
	return p
}

// checkStoreKey: the restore and the sidecar authenticate the store with
// the same key from a Secret, and Jenkins, whose builds read what it can,
// does not mount it. Without a key a bucket writer decides what the
// restore puts in the home.
func checkStoreKey(t *testing.T, name string, restore, snap, jenkins *corev1.Container, volumes []corev1.Volume) {
	t.Helper()
	rk, err := storeKey(restore, volumes)
	if err != nil {
		t.Errorf("%s: %s: %v", name, restore.Name, err)
	}
	sk, err := storeKey(snap, volumes)
	if err != nil {
		t.Errorf("%s: %s: %v", name, snap.Name, err)
	}
	if rk != sk {
		t.Errorf("%s: the restore authenticates with %s, the sidecar with %s: a restore would refuse every snapshot", name, rk, sk)
	}
	secret, _, _ := strings.Cut(rk, "/")
	for _, m := range jenkins.VolumeMounts {
		for _, v := range volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == secret {
				t.Errorf("%s: Jenkins mounts the store's key (volume %s): every build could read it", name, v.Name)
			}
		}
	}
}

// keyVariables are the ways a homesnap command takes the store's key:
// a file, or a variable holding the file's content.
var keyVariables = []struct{ file, content string }{
	{"HOMESNAP_AUTH_KEY_FILE", "HOMESNAP_AUTH_KEY"},
	{"HOMESNAP_AGE_IDENTITY_FILE", "HOMESNAP_AGE_IDENTITY"},
}

// storeKey returns the Secret and key ("secret/key") a container reads the
// store's key from: a file in a mounted Secret volume, or a variable
// taken from a Secret, never a value written in the manifest.
func storeKey(c *corev1.Container, volumes []corev1.Volume) (string, error) {
	for _, kv := range keyVariables {
		for _, e := range c.Env {
			switch {
			case e.Name == kv.content && e.Value != "":
				return "", fmt.Errorf("%s is written in the manifest: take it from a Secret", e.Name)
			case e.Name == kv.content && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
				ref := e.ValueFrom.SecretKeyRef
				if ref.Optional != nil && *ref.Optional {
					return "", fmt.Errorf("%s comes from an optional Secret: without it the store would be unauthenticated", e.Name)
				}
				return ref.Name + "/" + ref.Key, nil
			case e.Name == kv.file:
				return secretFile(c, volumes, e)
			}
		}
	}
	return "", errors.New("no key (HOMESNAP_AUTH_KEY_FILE or HOMESNAP_AGE_IDENTITY_FILE from a Secret): the store is unauthenticated, and a bucket writer decides what a restore puts in the home")
}

// secretFile resolves a key file variable to the Secret volume it lies in.
func secretFile(c *corev1.Container, volumes []corev1.Volume, e corev1.EnvVar) (string, error) {
	for _, m := range c.VolumeMounts {
		key, ok := strings.CutPrefix(e.Value, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok || strings.Contains(key, "/") {
			continue
		}
		for _, v := range volumes {
			switch {
			case v.Name != m.Name:
			case v.Secret == nil:
				return "", fmt.Errorf("%s=%s is on volume %s, which is not a Secret", e.Name, e.Value, v.Name)
			case v.Secret.Optional != nil && *v.Secret.Optional:
				return "", fmt.Errorf("%s is on an optional Secret volume: without it the store would be unauthenticated", e.Name)
			default:
				return v.Secret.SecretName + "/" + key, nil
			}
		}
		return "", fmt.Errorf("%s=%s: the pod has no volume %s", e.Name, e.Value, m.Name)
	}
	return "", fmt.Errorf("%s=%s is in no volume the container mounts", e.Name, e.Value)
}

// hasPort reports whether the container names port want as name.
func hasPort(c *corev1.Container, name, want string) bool {
	for _, p := range c.Ports {
		if p.Name == name && fmt.Sprint(p.ContainerPort) == want {
			return true
		}
	}
	return false
}

func env(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func seconds(t *testing.T, d string) int64 {
	var n int64
	if d != "" {
		if _, err := fmt.Sscanf(d, "%ds", &n); err != nil {
			t.Errorf("duration %q: want whole seconds like 45s", d)
		}
	}
	return n
}

// TestHelmValues decodes the containers the chart renders verbatim
// (controller.customInitContainers) into the official type and checks the
// same wiring against the chart's home volume.
func TestHelmValues(t *testing.T) {
	data, err := os.ReadFile("helm/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Controller struct {
			JenkinsHome                   string                      `json:"jenkinsHome"`
			PodSecurityContextOverride    corev1.PodSecurityContext   `json:"podSecurityContextOverride"`
			PodAnnotations                map[string]string           `json:"podAnnotations"`
			TerminationGracePeriodSeconds int64                       `json:"terminationGracePeriodSeconds"`
			Resources                     corev1.ResourceRequirements `json:"resources"`
			PodLabels                     map[string]string           `json:"podLabels"`
			CustomInitContainers          []corev1.Container          `json:"customInitContainers"`
		} `json:"controller"`
		Persistence struct {
			Enabled bool            `json:"enabled"`
			Size    string          `json:"size"`
			Volumes []corev1.Volume `json:"volumes"` // the pod's, beside the chart's own
		} `json:"persistence"`
		ServiceAccount map[string]any `json:"serviceAccount"`
	}
	if err := yaml.UnmarshalStrict(data, &values); err != nil {
		t.Fatalf("helm/values.yaml: %v", err)
	}
	c := values.Controller
	version, _ := dockerfile(t)
	// The chart's pod: its home volume is "jenkins-home" at jenkinsHome,
	// and its security context is controller.podSecurityContextOverride.
	spec := &corev1.PodSpec{
		InitContainers:                c.CustomInitContainers,
		TerminationGracePeriodSeconds: &c.TerminationGracePeriodSeconds,
		SecurityContext:               &c.PodSecurityContextOverride,
		Volumes:                       values.Persistence.Volumes,
		Containers: []corev1.Container{{
			Name: "jenkins", Image: "jenkins/jenkins:lts", Resources: c.Resources,
			Env:          []corev1.EnvVar{{Name: "JENKINS_HOME", Value: c.JenkinsHome}},
			VolumeMounts: []corev1.VolumeMount{{Name: "jenkins-home", MountPath: c.JenkinsHome}},
		}},
	}
	if p := checkPod(t, "helm", spec, "ghcr.io/homesnap/homesnap:"+version, map[string]string{"HOMESNAP_HOME": c.JenkinsHome}); !p.native {
		t.Error("helm: the snapshot should be a native sidecar in customInitContainers")
	}
}

// TestVariablesAreOnesTheBinariesRead finds every HOMESNAP_* name the
// examples, the README and docs/ use and checks the binaries' --help lists
// it. That docs/ documents every variable --help lists is
// docs/docs_test.go's TestHelpIsDocumented.
func TestVariablesAreOnesTheBinariesRead(t *testing.T) {
	known := map[string]bool{}
	name := regexp.MustCompile(`HOMESNAP_[A-Z0-9_]*[A-Z0-9]`)
	for _, c := range []string{"restore", "snapshot", "prune", "list", "verify", "check-agents"} {
		out, _ := exec.Command(filepath.Join(bin, "homesnap"), c, "--help").CombinedOutput()
		for _, n := range name.FindAllString(string(out), -1) {
			known[n] = true
		}
	}
	if !known["HOMESNAP_STORE"] {
		t.Fatal("--help lists no HOMESNAP_STORE: cannot tell which variables exist")
	}
	files, _ := filepath.Glob("*/*")
	docs, _ := filepath.Glob("../docs/*.md")
	files = append(append(files, "../README.md"), docs...)
	for _, f := range files {
		if strings.HasPrefix(f, "testdata/") {
			continue // upstream sources the tests render, not examples
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(data), -1) {
			if !known[n] && !developerOnly(n) {
				t.Errorf("%s uses %s, which neither restore, snapshot nor prune reads", f, n)
			}
		}
	}
}

// developerOnly names variables of the test, bench, release and
// vulnerability-check scripts and of profiling runs, which --help rightly
// leaves out.
func developerOnly(name string) bool {
	for _, p := range []string{"HOMESNAP_TEST_", "HOMESNAP_BENCH_", "HOMESNAP_AB_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return name == "HOMESNAP_CPUPROFILE" || name == "HOMESNAP_VULNDB_VERSION" || name == "HOMESNAP_TOOLS" ||
		name == "HOMESNAP_RELEASE_HOST_ONLY"
}

func TestComposeExample(t *testing.T) {
	data, err := os.ReadFile("compose/docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string            `json:"image"`
			User        string            `json:"user"`
			ReadOnly    bool              `json:"read_only"`
			Environment map[string]string `json:"environment"`
			Volumes     []string          `json:"volumes"`
			DependsOn   any               `json:"depends_on"`
			Secrets     []string          `json:"secrets"`
		} `json:"services"`
		Secrets map[string]struct {
			File string `json:"file"`
		} `json:"secrets"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("compose: %v", err)
	}
	version, user := dockerfile(t)
	homes, keys := map[string]bool{}, map[string]bool{}
	for name, s := range compose.Services {
		for _, v := range s.Volumes {
			if strings.HasSuffix(v, ":/var/jenkins_home") {
				homes[v] = true
			}
		}
		if !strings.HasPrefix(s.Image, "ghcr.io/homesnap/") {
			continue
		}
		if s.Image != "ghcr.io/homesnap/homesnap:"+version || s.User != user || !s.ReadOnly {
			t.Errorf("compose %s: image %s user %q read_only %v; want the Dockerfile's %s as %s on a read-only root", name, s.Image, s.User, s.ReadOnly, version, user)
		}
		if s.Environment["HOMESNAP_STORE"] == "" || s.Environment["HOMESNAP_HOME"] != "/var/jenkins_home" {
			t.Errorf("compose %s: store %q home %q", name, s.Environment["HOMESNAP_STORE"], s.Environment["HOMESNAP_HOME"])
		}
		// The store's key: a file the user generates, mounted as a secret.
		key := ""
		for _, kv := range keyVariables {
			if s.Environment[kv.content] != "" {
				t.Errorf("compose %s: %s is written in the file: mount it as a secret", name, kv.content)
			}
			if f := s.Environment[kv.file]; f != "" {
				secret, _ := strings.CutPrefix(f, "/run/secrets/")
				if !slices.Contains(s.Secrets, secret) || compose.Secrets[secret].File == "" {
					t.Errorf("compose %s: %s=%s is not a secret from a file the service mounts", name, kv.file, f)
				}
				key = secret
			}
		}
		if key == "" {
			t.Errorf("compose %s: no key (HOMESNAP_AUTH_KEY_FILE or HOMESNAP_AGE_IDENTITY_FILE): the store is unauthenticated", name)
		}
		keys[key] = true
	}
	for _, want := range []string{"restore", "snapshot", "jenkins"} {
		if _, ok := compose.Services[want]; !ok {
			t.Errorf("compose: no %s service", want)
		}
	}
	if len(homes) != 1 {
		t.Errorf("compose: want one home volume shared by restore, snapshot and Jenkins, got %v", homes)
	}
	if len(keys) != 1 {
		t.Errorf("compose: want one key shared by restore and snapshot, got %v", keys)
	}
	if _, ok := compose.Services["jenkins"]; ok && len(compose.Services["jenkins"].Secrets) > 0 {
		t.Errorf("compose jenkins mounts %v: every build could read the store's key", compose.Services["jenkins"].Secrets)
	}
	// A bare `depends_on: [restore]` starts the service once the restore
	// starts, not once it is done.
	for _, name := range []string{"jenkins", "snapshot"} {
		deps, _ := compose.Services[name].DependsOn.(map[string]any)
		cond, _ := deps["restore"].(map[string]any)
		if cond["condition"] != "service_completed_successfully" {
			t.Errorf("compose %s: depends_on restore %v, want condition: service_completed_successfully", name, compose.Services[name].DependsOn)
		}
	}
}

// TestSharedConfigHoldsNoIdentityOrCredentials: homesnap-config.yaml is
// applied next to every example, the Helm chart's included, so it holds
// the ConfigMap only: a ServiceAccount there clashes with the chart's, and
// a Secret of placeholder keys overrides workload identity (the AWS SDK
// prefers AWS_ACCESS_KEY_ID to IRSA) and stops every restore.
func TestSharedConfigHoldsNoIdentityOrCredentials(t *testing.T) {
	for _, d := range decodeStrict(t, "kubernetes/homesnap-config.yaml") {
		if _, ok := d.obj.(*corev1.ConfigMap); !ok {
			t.Errorf("%s holds a %T: only the ConfigMap belongs there", d.file, d.obj)
		}
	}
}

// TestNoPlaceholderCredentials: nothing a user applies carries a made-up
// key, a Secret's values, or a made-up cloud identity; an annotation for
// an account that does not exist fails the pod as surely as a wrong key.
func TestNoPlaceholderCredentials(t *testing.T) {
	files, _ := filepath.Glob("kubernetes/*.yaml")
	files = append(files, "helm/values.yaml", "operator/jenkins.yaml")
	placeholder := regexp.MustCompile(`(?i)replace-me|changeme|123456789012|00000000-0000-0000-0000-000000000000|my-project\.iam`)
	secretVar := regexp.MustCompile(`(?m)^\s*-?\s*(name: )?(AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN|AZURE_CLIENT_SECRET|AZURE_STORAGE_KEY|HOMESNAP_AGE_IDENTITY)\b`)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Only what is applied: comments may show what to fill in.
		applied := regexp.MustCompile(`(?m)\s*#.*$`).ReplaceAllString(string(data), "")
		if m := placeholder.FindString(applied); m != "" {
			t.Errorf("%s applies a placeholder (%q)", f, m)
		}
		if m := secretVar.FindString(applied); m != "" {
			t.Errorf("%s sets a credential inline (%q): take it from a Secret the user creates", f, strings.TrimSpace(m))
		}
		if strings.Contains(applied, "kind: Secret") {
			t.Errorf("%s applies a Secret: its values would be placeholders", f)
		}
	}
}

// TestPermissions checks the least-privilege files parse and grant what
// the stores use: read, write, list and delete (prune) of objects, nothing
// on the bucket or account itself.
func TestPermissions(t *testing.T) {
	var iam struct {
		Statement []struct {
			Action   []string
			Resource string
		}
	}
	readJSON(t, "permissions/aws-iam-policy.json", &iam)
	var actions []string
	for _, s := range iam.Statement {
		actions = append(actions, s.Action...)
		if s.Resource == "*" {
			t.Error("IAM policy grants on every resource")
		}
	}
	wantAll(t, "IAM policy", actions, "s3:ListBucket", "s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
		"kms:GenerateDataKey", "kms:Decrypt") // sse=aws:kms, which docs/limits.md recommends, needs both

	var azure struct {
		Actions, DataActions []string
	}
	readJSON(t, "permissions/azure-role.json", &azure)
	if len(azure.Actions) != 0 {
		t.Errorf("Azure role has management actions %v; it needs data actions only", azure.Actions)
	}
	blob := "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/"
	wantAll(t, "Azure role", azure.DataActions, blob+"read", blob+"write", blob+"delete")

	data, err := os.ReadFile("permissions/gcs-role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var gcs struct {
		Title               string   `json:"title"`
		Description         string   `json:"description"`
		Stage               string   `json:"stage"`
		IncludedPermissions []string `json:"includedPermissions"`
	}
	if err := yaml.UnmarshalStrict(data, &gcs); err != nil {
		t.Fatalf("gcs-role.yaml: %v", err)
	}
	wantAll(t, "GCS role", gcs.IncludedPermissions, "storage.objects.create", "storage.objects.get", "storage.objects.list", "storage.objects.delete")
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func wantAll(t *testing.T, what string, have []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(have, w) {
			t.Errorf("%s lacks %s", what, w)
		}
	}
}
