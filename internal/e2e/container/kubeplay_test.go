package container

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// standin is the image that plays Jenkins in the Pod examples
// (testdata/jenkins-standin): the real one cannot be pulled here.
var standin = fmt.Sprintf("localhost/jenkins-standin:container-test-%d", os.Getpid())

var standinBuild struct {
	once sync.Once
	err  error
	log  []byte
}

func needStandin(t *testing.T) {
	t.Helper()
	standinBuild.once.Do(func() {
		ctx, err := os.MkdirTemp("", "jenkins-standin-")
		if err != nil {
			standinBuild.err = err
			return
		}
		defer os.RemoveAll(ctx)
		steps := [][]string{
			{"go", "build", "-trimpath", "-o", filepath.Join(ctx, "jenkins-standin"), "./testdata/jenkins-standin"},
			{"cp", "testdata/jenkins-standin/Containerfile", ctx},
			{"buildah", "bud", "--layers=false", "-t", standin, ctx},
		}
		for _, s := range steps {
			cmd := exec.Command(s[0], s[1:]...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			out, err := cmd.CombinedOutput()
			standinBuild.log = append(standinBuild.log, out...)
			if err != nil {
				standinBuild.err = err
				return
			}
		}
	})
	if standinBuild.err != nil {
		t.Fatalf("building the Jenkins stand-in: %v\n%s", standinBuild.err, standinBuild.log)
	}
}

// examplePod turns the example StatefulSet's pod template into the Pod
// the StatefulSet controller would create, for `podman kube play`. Only
// what a cluster provides differently is replaced: the Jenkins image by
// the stand-in, the released image by the one under test, the PVC or
// emptyDir home by a host directory, the store by a host directory
// (HOMESNAP_STORE in the ConfigMap, mounted at /store), and the Secret
// volumes (the store's key) by the host directory secrets.
func examplePod(t *testing.T, file, name, home, store, secrets string) (pod, configMap []byte) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var set appsv1.StatefulSet
	if err := yaml.Unmarshal([]byte(strings.Split(string(data), "\n---")[0]), &set); err != nil || set.Kind != "StatefulSet" {
		t.Fatalf("%s: the first document is not a StatefulSet (%v)", file, err)
	}
	spec := set.Spec.Template.Spec
	dirType := corev1.HostPathDirectory
	for i := range spec.Volumes {
		switch {
		case spec.Volumes[i].Name == "jenkins-home":
			spec.Volumes[i].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: home, Type: &dirType}}
		case spec.Volumes[i].Secret != nil:
			spec.Volumes[i].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: secrets, Type: &dirType}}
		}
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "store",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: store, Type: &dirType}}})
	images := 0
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			c := &list[i]
			// podman 4.3 cannot resolve the downward API's namespace:
			// give POD_NAMESPACE the value a kubelet would.
			for j := range c.Env {
				if f := c.Env[j].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.FieldPath == "metadata.namespace" {
					c.Env[j].ValueFrom, c.Env[j].Value = nil, "default"
				}
			}
			switch {
			case strings.HasPrefix(c.Image, "ghcr.io/homesnap/homesnap:"):
				c.Image = image
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "store", MountPath: "/store"})
				images++
			case strings.HasPrefix(c.Image, "jenkins/jenkins:"):
				c.Image = standin
				images++
			}
		}
	}
	if images != 3 {
		t.Fatalf("%s: found %d of the restore, snapshot and Jenkins images", file, images)
	}
	// podman 4.3 applies the pod's restart policy to init containers too:
	// under Always (a StatefulSet's) it reruns the finished restore in a
	// loop and never starts the others. Nothing here should restart.
	spec.RestartPolicy = corev1.RestartPolicyNever
	p := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: set.Spec.Template.Labels,
			// podman removes "once" init containers after they ran; "always"
			// keeps them (their logs are read) and reruns them at every pod
			// start, as Kubernetes does.
			Annotations: map[string]string{"io.podman.annotations.init.container.type": "always"}},
		Spec: spec}
	if pod, err = yaml.Marshal(p); err != nil {
		t.Fatal(err)
	}

	var cm corev1.ConfigMap
	data, err = os.ReadFile("../../../examples/kubernetes/homesnap-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &cm); err != nil || cm.Kind != "ConfigMap" {
		t.Fatalf("homesnap-config.yaml: not a ConfigMap (%v)", err)
	}
	cm.Data["HOMESNAP_STORE"] = "/store"
	if configMap, err = yaml.Marshal(cm); err != nil {
		t.Fatal(err)
	}
	return pod, configMap
}

// TestClassicSidecarExampleInKubePlay runs the classic-sidecar example's
// pod with `podman kube play`: the restore init container on an empty
// store (first boot), Jenkins and the sidecar beside it; then the pod is
// stopped (SIGTERM to every container) and the sidecar's final snapshot,
// taken after Jenkins stopped answering, holds what Jenkins wrote while
// stopping; the next pod, on an empty home, starts with it.
func TestClassicSidecarExampleInKubePlay(t *testing.T) {
	needImage(t)
	needStandin(t)
	store, dir := volume(t), t.TempDir()
	// The Secret homesnap-auth, as homesnap-config.yaml says to make it.
	secrets := t.TempDir()
	os.Chmod(secrets, 0o755)
	if err := os.WriteFile(filepath.Join(secrets, "auth.key"), []byte(strings.Repeat("7e", 32)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	play := func(round string, home string) string {
		t.Helper()
		name := fmt.Sprintf("homesnap-example-%d-%s", os.Getpid(), round)
		pod, cm := examplePod(t, "../../../examples/kubernetes/jenkins-classic-sidecar.yaml", name, home, store, secrets)
		podFile, cmFile := filepath.Join(dir, name+".yaml"), filepath.Join(dir, name+"-config.yaml")
		if err := os.WriteFile(podFile, pod, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cmFile, cm, 0o644); err != nil {
			t.Fatal(err)
		}
		if os.Getenv("KEEP_POD") == "" {
			t.Cleanup(func() { podman(t, "pod", "rm", "--force", "--time", "0", name) })
		}
		r := podman(t, "kube", "play", "--configmap", cmFile, podFile)
		if r.code != 0 {
			t.Fatalf("kube play %s: exit %d\n%s%s", round, r.code, r.stdout, tail(r.stderr))
		}
		return name
	}
	logs := func(container string) result { return podman(t, "logs", container) }
	waitFor := func(what, container string, done func(stdout string) bool) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); !done(logs(container).stdout); time.Sleep(500 * time.Millisecond) {
			if time.Now().After(deadline) {
				r := logs(container)
				t.Fatalf("%s: not within 90s; %s printed:\n%s%s", what, container, r.stdout, tail(r.stderr))
			}
		}
	}

	// The first pod: an empty store and an empty home.
	first := volume(t)
	pod := play("first", first)
	restoreLog := logs(pod + "-homesnap-restore")
	if action, _ := decision(restoreLog); action != "first-boot" {
		t.Fatalf("the first pod's restore decided %q, want first-boot\n%s", action, tail(restoreLog.stderr))
	}
	waitFor("Jenkins' start", pod+"-jenkins", func(stdout string) bool { return strings.Contains(stdout, "up") })
	// The sidecar's snapshot at start saw the empty home of a first boot
	// (and refused it); ask for one now rather than wait for the interval.
	ok(t, "SIGUSR1", podman(t, "kill", "--signal", "USR1", pod+"-homesnap-snapshot"))
	waitFor("the on-demand snapshot", pod+"-homesnap-snapshot", func(stdout string) bool {
		return len(strings.Fields(stdout)) >= 1
	})
	ok(t, "pod stop", podman(t, "pod", "stop", "--time", "60", pod))
	for _, c := range []string{"jenkins", "homesnap-snapshot"} {
		if code := ok(t, "inspect", podman(t, "inspect", "--format", "{{.State.ExitCode}}", pod+"-"+c)); code != "0" {
			r := logs(pod + "-" + c)
			t.Fatalf("%s exited %s after SIGTERM, want 0\n%s%s", c, code, r.stdout, tail(r.stderr))
		}
	}
	ids := strings.Fields(logs(pod + "-homesnap-snapshot").stdout)
	if marker, err := os.ReadFile(filepath.Join(store, "homesnap.json")); !strings.Contains(string(marker), `"authenticated":true`) {
		t.Errorf("the example's store is not authenticated: homesnap.json %s (%v)", marker, err)
	}
	ended, _ := filepath.Glob(filepath.Join(first, "jobs/standin/builds/*/build.xml"))
	if len(ids) < 2 || len(ended) != 1 {
		t.Fatalf("want a snapshot at start and a final one, and the build Jenkins ended while stopping: snapshots %v, build.xml %v", ids, ended)
	}

	// The next pod, on an empty home, starts from the final snapshot.
	second := volume(t)
	pod = play("second", second)
	restoreLog = logs(pod + "-homesnap-restore")
	if action, id := decision(restoreLog); action != "restore" || id != ids[len(ids)-1] {
		t.Fatalf("the second pod's restore: %q %q, want restore of the final snapshot %s\n%s", action, id, ids[len(ids)-1], tail(restoreLog.stderr))
	}
	want, got := selected(t, first), restored(t, second)
	for rel, a := range want {
		if a.Type == "f" && got[rel] != a {
			t.Errorf("%s: restored as %+v, want %+v", rel, got[rel], a)
		}
	}
}

// TestOperatorJenkinsImage builds examples/operator/Dockerfile on the
// image under test (the stand-in in place of jenkins/jenkins) and runs the
// restore it copies in, from the path the operator example calls.
func TestOperatorJenkinsImage(t *testing.T) {
	needImage(t)
	needStandin(t)
	tag := fmt.Sprintf("localhost/jenkins-homesnap:container-test-%d", os.Getpid())
	cmd := exec.Command("buildah", "bud", "--layers=false", "--build-arg", "HOMESNAP="+image,
		"--build-arg", "JENKINS="+standin, "-t", tag, "../../../examples/operator")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building examples/operator/Dockerfile: %v\n%s", err, out)
	}
	defer podman(t, "rmi", "--force", tag)
	got := ok(t, "homesnap-restore --version", podman(t, "run", "--rm", "--network", "none", "--entrypoint", "/usr/local/bin/homesnap-restore", tag, "--version"))
	if !strings.HasPrefix(got, "restore ") {
		t.Errorf("the operator's Jenkins image runs homesnap-restore --version as %q", got)
	}
}
