package examples

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/homesnap/homesnap/internal/testenv"
)

// TestHelmChartRendersTheValues renders helm/values.yaml with the real
// Jenkins chart (a pinned copy in testdata/helm) and checks the pod the
// chart makes: the restore first, before the chart's own init container,
// the snapshot as a native sidecar, both on the chart's home volume with
// resources, and nothing the chart renders clashing with what
// homesnap-config.yaml applies beside it.
func TestHelmChartRendersTheValues(t *testing.T) {
	helm := testenv.Tool(t, "helm")
	out, err := exec.Command(helm, "template", "jenkins", "testdata/helm/jenkins", "-f", "helm/values.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	var set *appsv1.StatefulSet
	rendered := map[string]bool{} // kind/name
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("helm template output: %v", err)
		}
		rendered[meta.Kind+"/"+meta.Metadata.Name] = true
		if meta.Kind == "StatefulSet" {
			set = &appsv1.StatefulSet{}
			if err := yaml.UnmarshalStrict([]byte(doc), set); err != nil {
				t.Fatalf("the chart's StatefulSet: %v", err)
			}
		}
	}
	if set == nil {
		t.Fatalf("the chart rendered no StatefulSet:\n%s", out)
	}
	for _, d := range decodeStrict(t, "kubernetes/homesnap-config.yaml") {
		var kind, name string
		switch o := d.obj.(type) {
		case *corev1.ConfigMap:
			kind, name = "ConfigMap", o.Name
		case *corev1.ServiceAccount:
			kind, name = "ServiceAccount", o.Name
		case *corev1.Secret:
			kind, name = "Secret", o.Name
		}
		if rendered[kind+"/"+name] {
			t.Errorf("homesnap-config.yaml applies %s %s, which the chart also renders: the install aborts", kind, name)
		}
	}

	spec := &set.Spec.Template.Spec
	var order []string
	for _, c := range spec.InitContainers {
		order = append(order, c.Name)
	}
	if len(order) < 3 || order[0] != "homesnap-restore" || order[1] != "homesnap-snapshot" {
		t.Errorf("init containers run in the order %v: want homesnap-restore, homesnap-snapshot, then the chart's", order)
	}
	version, _ := dockerfile(t)
	home := ""
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if c.Name != "jenkins" {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == "jenkins-home" {
				home = m.MountPath
			}
		}
		if env(c, "JENKINS_HOME") == "" { // the jenkins/jenkins image's ENV
			c.Env = append(c.Env, corev1.EnvVar{Name: "JENKINS_HOME", Value: "/var/jenkins_home"})
		}
		// checkPod finds Jenkins by the official image's name.
		c.Image = strings.TrimPrefix(c.Image, "docker.io/")
	}
	if home == "" {
		t.Fatal("the chart's jenkins container does not mount jenkins-home")
	}
	checkIdentityScope(t, "helm template", set.Spec.Template.Annotations, spec, "ghcr.io/homesnap/homesnap:"+version)
	if p := checkPod(t, "helm template", spec, "ghcr.io/homesnap/homesnap:"+version, map[string]string{"HOMESNAP_HOME": home}); !p.native {
		t.Error("helm template: the snapshot is not a native sidecar")
	}
}
