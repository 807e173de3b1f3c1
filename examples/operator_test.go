package examples

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// operatorJenkins mirrors the fields of the Jenkins kubernetes-operator's
// custom resource (jenkins.io/v1alpha2, kind Jenkins) the example uses; the
// operator embeds the Kubernetes types where this does. Strict decoding
// makes any field the operator does not know (initContainers, a
// startupProbe, a typo) an error.
type operatorJenkins struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		JenkinsAPISettings struct {
			AuthorizationStrategy string `json:"authorizationStrategy"`
		} `json:"jenkinsAPISettings"`
		ServiceAccount struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"serviceAccount"`
		Master struct {
			Labels                        map[string]string          `json:"labels"`
			DisableCSRFProtection         bool                       `json:"disableCSRFProtection"`
			TerminationGracePeriodSeconds *int64                     `json:"terminationGracePeriodSeconds"`
			SecurityContext               *corev1.PodSecurityContext `json:"securityContext"`
			Containers                    []operatorContainer        `json:"containers"`
			Volumes                       []corev1.Volume            `json:"volumes"`
		} `json:"master"`
		// The operator's exec-driven backup and restore: the sidecar
		// replaces them, so the example must leave them out.
		Backup *struct {
			ContainerName               string         `json:"containerName"`
			Action                      operatorAction `json:"action"`
			Interval                    uint64         `json:"interval"`
			MakeBackupBeforePodDeletion bool           `json:"makeBackupBeforePodDeletion"`
		} `json:"backup"`
		Restore *struct {
			ContainerName   string         `json:"containerName"`
			Action          operatorAction `json:"action"`
			GetLatestAction operatorAction `json:"getLatestAction"`
			RecoveryOnce    uint64         `json:"recoveryOnce"`
		} `json:"restore"`
	} `json:"spec"`
}

type operatorAction struct {
	Exec *corev1.ExecAction `json:"exec"`
}

// operatorContainer is the operator's own container type: a subset of
// corev1.Container's fields (no startupProbe, no restartPolicy).
type operatorContainer struct {
	Name            string                      `json:"name"`
	Image           string                      `json:"image"`
	ImagePullPolicy corev1.PullPolicy           `json:"imagePullPolicy"`
	Resources       corev1.ResourceRequirements `json:"resources"`
	Command         []string                    `json:"command"`
	Args            []string                    `json:"args"`
	WorkingDir      string                      `json:"workingDir"`
	Ports           []corev1.ContainerPort      `json:"ports"`
	EnvFrom         []corev1.EnvFromSource      `json:"envFrom"`
	Env             []corev1.EnvVar             `json:"env"`
	VolumeMounts    []corev1.VolumeMount        `json:"volumeMounts"`
	LivenessProbe   *corev1.Probe               `json:"livenessProbe"`
	ReadinessProbe  *corev1.Probe               `json:"readinessProbe"`
	Lifecycle       *corev1.Lifecycle           `json:"lifecycle"`
	SecurityContext *corev1.SecurityContext     `json:"securityContext"`
}

// pod returns the container as the operator puts it into the pod. For
// Jenkins (the first container) it adds what the operator adds: the
// jenkins-home emptyDir at JENKINS_HOME (default /var/lib/jenkins) and the
// http (8080) and agent (50000) ports.
func (c operatorContainer) pod(first bool) corev1.Container {
	k := corev1.Container{
		Name: c.Name, Image: c.Image, ImagePullPolicy: c.ImagePullPolicy, Resources: c.Resources,
		Command: c.Command, Args: c.Args, WorkingDir: c.WorkingDir, Ports: c.Ports, EnvFrom: c.EnvFrom,
		Env: c.Env, VolumeMounts: c.VolumeMounts, LivenessProbe: c.LivenessProbe,
		ReadinessProbe: c.ReadinessProbe, Lifecycle: c.Lifecycle, SecurityContext: c.SecurityContext,
	}
	if first {
		home := env(&k, "JENKINS_HOME")
		if home == "" {
			home = "/var/lib/jenkins"
			k.Env = append(k.Env, corev1.EnvVar{Name: "JENKINS_HOME", Value: home})
		}
		k.VolumeMounts = append([]corev1.VolumeMount{{Name: "jenkins-home", MountPath: home}}, k.VolumeMounts...)
		k.Ports = []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
			{Name: "slavelistener", ContainerPort: 50000, Protocol: corev1.ProtocolTCP},
		}
	}
	return k
}

func decodeOperator(t *testing.T) *operatorJenkins {
	t.Helper()
	data, err := os.ReadFile("operator/jenkins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cr operatorJenkins
	if err := yaml.UnmarshalStrict(data, &cr); err != nil {
		t.Fatalf("operator/jenkins.yaml: %v", err)
	}
	if cr.APIVersion != "jenkins.io/v1alpha2" || cr.Kind != "Jenkins" {
		t.Fatalf("operator/jenkins.yaml is %s %s, want jenkins.io/v1alpha2 Jenkins", cr.APIVersion, cr.Kind)
	}
	return &cr
}

// sharedConfig returns the ConfigMap of kubernetes/homesnap-config.yaml
// and the keys of the optional Secret homesnap-store, as its comment tells
// users to create it (kubectl create secret ... --from-literal=KEY=...).
func sharedConfig(t *testing.T) (config map[string]string, secretKeys []string) {
	for _, d := range decodeStrict(t, "kubernetes/homesnap-config.yaml") {
		if o, ok := d.obj.(*corev1.ConfigMap); ok && o.Name == "homesnap" {
			config = o.Data
		}
	}
	data, err := os.ReadFile("kubernetes/homesnap-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`--from-literal=([A-Z_]+)=`).FindAllSubmatch(data, -1) {
		secretKeys = append(secretKeys, string(m[1]))
	}
	if config == nil || len(secretKeys) == 0 {
		t.Fatal("kubernetes/homesnap-config.yaml: no ConfigMap homesnap, or no kubectl create secret homesnap-store --from-literal=KEY=... line")
	}
	return config, secretKeys
}

// TestOperatorExample checks the Jenkins CR: restore runs in the Jenkins
// container before the operator's start command, from the image the
// Dockerfile builds; the sidecar replaces the operator's backup, sees the
// home at the same path, waits for Jenkins before its first snapshot and
// fits its final one into the grace period; the pod runs as the image's
// user; and the fields the API server defaults are written out, since the
// operator recreates the pod when the pod differs from the CR.
func TestOperatorExample(t *testing.T) {
	cr := decodeOperator(t)
	version, user := dockerfile(t)
	image := "ghcr.io/homesnap/homesnap:" + version
	config, secretKeys := sharedConfig(t)
	m := &cr.Spec.Master
	if cr.Spec.Backup != nil || cr.Spec.Restore != nil {
		t.Error("spec.backup/spec.restore are set: the operator would exec its backup scripts in the homesnap container, which has no shell")
	}
	if len(m.Containers) != 2 {
		t.Fatalf("want Jenkins and the snapshot sidecar, got %d containers", len(m.Containers))
	}
	jenkins, snap := m.Containers[0].pod(true), m.Containers[1].pod(false)
	if jenkins.Name != "jenkins-master" {
		t.Errorf("the first container is %s; the operator takes it as Jenkins", jenkins.Name)
	}

	// The restore: the Jenkins image of operator/Dockerfile carries
	// homesnap's restore, run before the operator's init.sh and Jenkins.
	// The operator's API (k8s.io/api v0.30) has no image volumes: the API
	// server would drop one and the restore would be missing.
	for _, v := range m.Volumes {
		if v.Image != nil {
			t.Errorf("volume %s is an image volume, which the operator's API does not have", v.Name)
		}
	}
	binary := jenkinsImageRestore(t, image)
	if data, _ := os.ReadFile("../Dockerfile"); !regexp.MustCompile(`(?m)^COPY --from=build /out/bin/ /usr/local/bin/$`).Match(data) || !regexp.MustCompile(`-o /out/bin/homesnap `).Match(data) {
		t.Error("the Dockerfile no longer installs homesnap in /usr/local/bin/, where operator/Dockerfile copies it from")
	}
	script := ""
	if len(jenkins.Command) == 3 && jenkins.Command[0] == "bash" && jenkins.Command[1] == "-c" {
		script = jenkins.Command[2]
	}
	restoreAt := strings.Index(script, binary)
	initAt := strings.Index(script, "/var/jenkins/scripts/init.sh")
	jenkinsAt := strings.Index(script, "exec /usr/bin/tini -s -- /usr/local/bin/jenkins.sh")
	if restoreAt < 0 || initAt < restoreAt || jenkinsAt < initAt || !strings.Contains(script, "set -e") {
		t.Errorf("jenkins-master must run `set -e`, %s, the operator's init.sh, then exec Jenkins; it runs %q", binary, jenkins.Command)
	}
	if env(&jenkins, "HOMESNAP_ALLOW_EMPTY") != "true" {
		t.Error("the restore lacks HOMESNAP_ALLOW_EMPTY=true: the first boot, on an empty store, would never start Jenkins")
	}
	// The store's authentication key: restore (in Jenkins' container) and
	// the sidecar use the same one, from a Secret.
	rk, err := storeKey(&jenkins, m.Volumes)
	if err != nil {
		t.Errorf("the restore in jenkins-master: %v", err)
	}
	if sk, err := storeKey(&snap, m.Volumes); err != nil {
		t.Errorf("the sidecar: %v", err)
	} else if sk != rk {
		t.Errorf("the restore authenticates with %s, the sidecar with %s: a restore would refuse every snapshot", rk, sk)
	}
	for _, e := range jenkins.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secretKeys = append(secretKeys, e.Name)
		}
	}
	for _, vm := range jenkins.VolumeMounts {
		for _, v := range m.Volumes {
			if v.Name == vm.Name && v.Secret != nil {
				t.Errorf("jenkins-master mounts Secret %s: every build could read it; give the restore a variable it unsets", v.Secret.SecretName)
			}
		}
	}
	for _, k := range secretKeys { // the store's keys stay out of the JVM
		unset := regexp.MustCompile(`(?m)^\s*unset .*\b` + k + `\b`).FindStringIndex(script)
		if unset == nil || unset[0] > initAt {
			t.Errorf("jenkins-master does not unset %s (from a Secret) before starting Jenkins", k)
		}
	}
	deadline, err := time.ParseDuration(env(&jenkins, "HOMESNAP_TIMEOUT"))
	if err != nil {
		t.Fatalf("jenkins-master: HOMESNAP_TIMEOUT: %v", err)
	}
	if p := jenkins.LivenessProbe; p == nil || time.Duration(p.InitialDelaySeconds)*time.Second <= deadline {
		t.Errorf("jenkins-master's liveness probe could kill it while the restore (deadline %v) still runs", deadline)
	}

	// The home: one volume at one path for Jenkins and the sidecar.
	home := config["HOMESNAP_HOME"]
	if jh := env(&jenkins, "JENKINS_HOME"); jh != home {
		t.Errorf("Jenkins' JENKINS_HOME is %q, the ConfigMap's HOMESNAP_HOME %q", jh, home)
	}
	mountAt := func(c *corev1.Container) string {
		for _, vm := range c.VolumeMounts {
			if vm.MountPath == home {
				return vm.Name
			}
		}
		return ""
	}
	if mountAt(&jenkins) != "jenkins-home" || mountAt(&snap) != "jenkins-home" {
		t.Errorf("the sidecar must mount the operator's jenkins-home at %s: it mounts %q", home, mountAt(&snap))
	}

	// The sidecar.
	if snap.Image != image || len(snap.Command) != 1 || snap.Command[0] != "snapshot" {
		t.Errorf("sidecar runs %s %q, want %s snapshot", snap.Image, snap.Command, image)
	}
	if sc := snap.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the sidecar must have a read-only root filesystem")
	}
	for _, name := range []string{"HOMESNAP_START_WAIT_URL", "HOMESNAP_FINAL_WAIT_URL"} {
		if u := env(&snap, name); !strings.HasPrefix(u, "http://127.0.0.1:8080/") {
			t.Errorf("sidecar %s=%q: want Jenkins' port in the pod, http://127.0.0.1:8080/...", name, u)
		}
	}
	grace := int64(30)
	if m.TerminationGracePeriodSeconds != nil {
		grace = *m.TerminationGracePeriodSeconds
	}
	if final := seconds(t, env(&snap, "HOMESNAP_FINAL_TIMEOUT")); final == 0 || final >= grace {
		t.Errorf("final snapshot timeout %ds does not fit in the grace period %ds", final, grace)
	}
	if snap.LivenessProbe != nil {
		t.Error("the sidecar has a livenessProbe: the operator's pod has restartPolicy Never, so one failure would take Jenkins down")
	}
	if snap.ReadinessProbe != nil {
		t.Error("the sidecar has a readinessProbe: the operator would hold Jenkins back on a failed snapshot")
	}

	// The pod's user is the image's.
	uid, _, _ := strings.Cut(user, ":")
	sc := m.SecurityContext
	if sc == nil || sc.RunAsUser == nil || strconv.FormatInt(*sc.RunAsUser, 10) != uid || sc.FSGroup == nil {
		t.Errorf("the pod must run as uid %s (the Dockerfile's USER) with an fsGroup", uid)
	}
	for _, c := range m.Containers {
		checkOperatorDefaults(t, c)
	}
	for _, v := range m.Volumes {
		if v.Secret != nil && v.Secret.DefaultMode == nil || v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil {
			t.Errorf("volume %s leaves a field to the API server's defaults; the operator would see a changed pod and recreate it", v.Name)
		}
	}
}

// jenkinsImageRestore reads operator/Dockerfile: it must build on homesnap's
// image (the release the Dockerfile builds) and copy homesnap into the
// Jenkins image under a name that runs the restore; it returns where.
func jenkinsImageRestore(t *testing.T, image string) string {
	t.Helper()
	data, err := os.ReadFile("operator/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^ARG HOMESNAP=(\S+)$`).FindSubmatch(data); m == nil || string(m[1]) != image {
		t.Errorf("operator/Dockerfile does not build on %s (ARG HOMESNAP=...)", image)
	}
	// The file itself, not the restore link: a link copied out of the
	// image would point at nothing.
	m := regexp.MustCompile(`(?m)^COPY --from=homesnap /usr/local/bin/homesnap (/\S+/homesnap-restore)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("operator/Dockerfile does not copy /usr/local/bin/homesnap from homesnap's image as homesnap-restore")
	}
	return string(m[1])
}

// checkOperatorDefaults reports fields the API server fills in when left
// out: the operator compares them with reflect.DeepEqual and recreates the
// pod in a loop.
func checkOperatorDefaults(t *testing.T, c operatorContainer) {
	t.Helper()
	fail := func(what string) { t.Errorf("%s: %s is left to the API server's default", c.Name, what) }
	if c.ImagePullPolicy == "" {
		fail("imagePullPolicy")
	}
	for _, p := range c.Ports {
		if p.Protocol == "" {
			fail(fmt.Sprintf("port %s's protocol", p.Name))
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.APIVersion == "" {
			fail(e.Name + "'s fieldRef.apiVersion")
		}
	}
	for name, p := range map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
		if p == nil {
			continue
		}
		if p.TimeoutSeconds == 0 || p.PeriodSeconds == 0 || p.SuccessThreshold == 0 || p.FailureThreshold == 0 {
			fail(name + "'s timeoutSeconds, periodSeconds, successThreshold or failureThreshold")
		}
		if p.HTTPGet != nil && p.HTTPGet.Scheme == "" {
			fail(name + "'s scheme")
		}
	}
}
