package container

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homesnap/homesnap/internal/selector"
	"github.com/homesnap/homesnap/internal/testenv"
	"github.com/homesnap/homesnap/internal/testhome"
)

// image is the name the tests build the image under, one per test process
// (so concurrent runs do not share it), removed at the end.
var image = fmt.Sprintf("localhost/homesnap:container-test-%d", os.Getpid())

var build struct {
	once sync.Once
	err  error
	log  []byte
}

// needImage builds the image once per test binary. It follows testenv's
// rule: skipped under -short; without podman, buildah or runc, skipped, or
// failed when HOMESNAP_TEST_SERVERS=1 (the test command), so CI cannot
// silently lose these tests.
func needImage(t *testing.T) {
	t.Helper()
	testenv.Needs(t, "a container runtime (podman, buildah, runc)")
	for _, tool := range []string{"podman", "buildah", "runc"} {
		testenv.Tool(t, tool)
	}
	if os.Getuid() != 0 {
		t.Skip("needs root: the tests run podman with runc and chown volumes to uid 1000")
	}
	build.once.Do(func() {
		cmd := exec.Command("bash", "../../../scripts/image.sh")
		cmd.Env = append(os.Environ(), "IMAGE="+image)
		build.log, build.err = cmd.CombinedOutput()
	})
	if build.err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", build.err, build.log)
	}
}

func TestMain(m *testing.M) {
	// kube play has no --ulimit or --runtime flags: a configuration of our
	// own with runc (crun refuses this kernel's hybrid cgroups) and ulimits
	// within the machine's hard limits.
	dir, err := os.MkdirTemp("", "homesnap-containers-conf-")
	if err != nil {
		panic(err)
	}
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte(containersConf), 0o644); err != nil {
		panic(err)
	}
	os.Setenv("CONTAINERS_CONF", conf)
	code := m.Run()
	if build.err == nil && len(build.log) > 0 {
		exec.Command("podman", "rmi", "--force", image).Run()
	}
	if standinBuild.err == nil && len(standinBuild.log) > 0 {
		exec.Command("podman", "rmi", "--force", standin).Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

const containersConf = `[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "runc"
`

// result is what a podman command did.
type result struct {
	stdout, stderr string
	code           int
}

func podman(t *testing.T, args ...string) result {
	t.Helper()
	// crun, podman's default runtime, refuses this kernel's hybrid cgroups.
	cmd := exec.Command("podman", append([]string{"--runtime", "runc"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout.String(), stderr.String(), 0}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("podman %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// container is how a pod runs homesnap: uid 1000, a read-only root with no
// tmpfs, no capabilities, no privilege escalation. Volumes map host
// directories to container paths.
type container struct {
	volumes map[string]string
	env     []string
	network string // "none" unless a store is reached over the network
}

func (c container) args(extra ...string) []string {
	args := []string{"--user", "1000:1000", "--read-only", "--read-only-tmpfs=false",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		"--env", "HOMESNAP_LOG_FORMAT=json"}
	network := c.network
	if network == "" {
		network = "none"
	}
	args = append(args, "--network", network)
	for host, dir := range c.volumes {
		args = append(args, "--volume", host+":"+dir)
	}
	for _, e := range c.env {
		args = append(args, "--env", e)
	}
	return append(args, extra...)
}

// run runs one command of the image to its end.
func (c container) run(t *testing.T, command ...string) result {
	t.Helper()
	return podman(t, append(append([]string{"run", "--rm"}, c.args()...), append([]string{image}, command...)...)...)
}

func ok(t *testing.T, what string, r result) string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", what, r.code, r.stdout, tail(r.stderr))
	}
	return strings.TrimSpace(r.stdout)
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}

// volume makes an empty directory owned by uid 1000, as a fresh
// PersistentVolume with fsGroup looks to the pod.
func volume(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chown(dir, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	return dir
}

// jenkinsHome builds a home with testhome's edge cases, owned by uid 1000
// as the Jenkins image leaves it.
func jenkinsHome(t *testing.T) string {
	t.Helper()
	home := volume(t)
	if err := testhome.Build(home); err != nil {
		t.Fatal(err)
	}
	chown(t, home)
	return home
}

func chown(t *testing.T, path string) {
	t.Helper()
	if out, err := exec.Command("chown", "-R", "-h", "1000:1000", path).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v\n%s", err, out)
	}
}

// writeAsJenkins writes a file into the home as Jenkins (uid 1000) would.
func writeAsJenkins(t *testing.T, home, rel, content string) {
	t.Helper()
	p := filepath.Join(home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for d := p; d != home; d = filepath.Dir(d) {
		if err := os.Lchown(d, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
}

// selected is what a snapshot of home with the default preset holds.
func selected(t *testing.T, home string) testhome.Tree {
	t.Helper()
	sel, err := selector.New(selector.Spec{Preset: "jenkins"})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := testhome.Read(home, sel.Selected)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// restored is everything in dir but the home's mark, which restore adds.
func restored(t *testing.T, dir string) testhome.Tree {
	t.Helper()
	tree, err := testhome.Read(dir, func(rel string) bool { return rel != ".homesnap-home.json" })
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func same(t *testing.T, what string, want, got testhome.Tree) {
	t.Helper()
	if d := testhome.Diff(want, got); len(d) > 0 {
		if len(d) > 15 {
			d = append(d[:15], "...")
		}
		t.Fatalf("%s differs:\n%s", what, strings.Join(d, "\n"))
	}
}

// decision is restore's outcome line: "ACTION\tSNAPSHOT".
func decision(r result) (action, id string) {
	action, id, _ = strings.Cut(strings.TrimSpace(r.stdout), "\t")
	return action, id
}

// TestImageVersion: homesnap, and each link to it, names the release and
// the commit the image's labels name.
func TestImageVersion(t *testing.T) {
	needImage(t)
	labels := ok(t, "inspect", podman(t, "image", "inspect", "--format",
		`{{index .Labels "org.opencontainers.image.version"}} {{index .Labels "org.opencontainers.image.revision"}}`, image))
	version, revision, _ := strings.Cut(labels, " ")
	if version == "" || revision == "" {
		t.Fatalf("image labels: version %q revision %q", version, revision)
	}
	for _, program := range []string{"homesnap", "restore", "snapshot", "prune"} {
		got := ok(t, program+" --version", container{}.run(t, program, "--version"))
		if want := fmt.Sprintf("%s %s (revision %s, go", program, version, revision); !strings.HasPrefix(got, want) {
			t.Errorf("%s --version printed %q, want it to start with %q", program, got, want)
		}
	}
}

// TestRestoreAsInitContainer: the init container restores the head into an
// empty volume byte for byte, and leaves a volume holding data newer than
// the store as it is.
func TestRestoreAsInitContainer(t *testing.T) {
	needImage(t)
	home, store := jenkinsHome(t), volume(t)
	with := func(dir string) container {
		return container{volumes: map[string]string{dir: "/var/jenkins_home", store: "/store"},
			env: []string{"HOMESNAP_STORE=/store"}}
	}
	id := ok(t, "snapshot --once", with(home).run(t, "snapshot", "--once"))
	want := selected(t, home)

	empty := volume(t)
	r := with(empty).run(t, "restore")
	if action, got := decision(r); r.code != 0 || action != "restore" || got != id {
		t.Fatalf("restore into an empty volume: exit %d, %q %q; want restore of %s\n%s", r.code, action, got, id, tail(r.stderr))
	}
	same(t, "the home restored into an empty volume", want, restored(t, empty))

	// Jenkins wrote a job after the last snapshot; the pod restarts.
	writeAsJenkins(t, empty, "jobs/after-snapshot/config.xml", "<project/>\n")
	before := restored(t, empty)
	r = with(empty).run(t, "restore")
	if action, _ := decision(r); r.code != 0 || action != "nothing" {
		t.Fatalf("restore into a newer home: exit %d, %q; want nothing (left as it is)\n%s", r.code, action, tail(r.stderr))
	}
	same(t, "the newer home after the restore", before, restored(t, empty))
}

// TestSidecarFinalSnapshotOnStop: the sidecar takes scheduled snapshots;
// `podman stop` sends SIGTERM and the sidecar takes a final snapshot and
// exits 0 before the grace period ends (podman would SIGKILL it, exit 137);
// a second container restores that final snapshot byte for byte.
func TestSidecarFinalSnapshotOnStop(t *testing.T) {
	needImage(t)
	home, store := jenkinsHome(t), volume(t)
	name := fmt.Sprintf("homesnap-sidecar-%d", os.Getpid())
	sidecar := container{volumes: map[string]string{home: "/var/jenkins_home", store: "/store"},
		env: []string{"HOMESNAP_STORE=/store", "HOMESNAP_INTERVAL=1s", "HOMESNAP_FORCE=true", "HOMESNAP_FINAL_TIMEOUT=10s"}}
	ok(t, "start the sidecar", podman(t, append(append([]string{"run", "--detach", "--name", name}, sidecar.args()...), image, "snapshot")...))
	t.Cleanup(func() { podman(t, "rm", "--force", "--time", "0", name) })

	ids := func() []string {
		return strings.Fields(podman(t, "logs", "--since", "0", name).stdout) // stdout: one ID per snapshot
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(ids()) < 2 {
		if time.Now().After(deadline) {
			r := podman(t, "logs", name)
			t.Fatalf("no two scheduled snapshots within 60s; the sidecar printed:\n%s%s", r.stdout, tail(r.stderr))
		}
		time.Sleep(500 * time.Millisecond)
	}
	writeAsJenkins(t, home, "jobs/last-minute/builds/1/log", strings.Repeat("Finished: SUCCESS\n", 100))
	scheduled := len(ids())

	// A grace period of 20s, twice the final snapshot's deadline.
	ok(t, "podman stop", podman(t, "stop", "--time", "20", name))
	code := ok(t, "inspect", podman(t, "inspect", "--format", "{{.State.ExitCode}}", name))
	logs := podman(t, "logs", name)
	if code != "0" {
		t.Fatalf("the sidecar exited %s after SIGTERM, want 0 (137: killed at the end of the grace period)\n%s", code, tail(logs.stderr))
	}
	if !strings.Contains(logs.stderr, "taking the final snapshot") {
		t.Errorf("the sidecar did not log its final snapshot:\n%s", tail(logs.stderr))
	}
	all := ids()
	if len(all) <= scheduled {
		t.Fatalf("no snapshot after SIGTERM: %d before, %d after", scheduled, len(all))
	}
	final := all[len(all)-1]

	// The next pod, on a new volume.
	fresh := volume(t)
	r := container{volumes: map[string]string{fresh: "/var/jenkins_home", store: "/store"},
		env: []string{"HOMESNAP_STORE=/store"}}.run(t, "restore")
	if action, got := decision(r); r.code != 0 || action != "restore" || got != final {
		t.Fatalf("restore after the stop: exit %d, %q %q; want restore of the final snapshot %s\n%s", r.code, action, got, final, tail(r.stderr))
	}
	same(t, "the home restored from the final snapshot", selected(t, home), restored(t, fresh))
}
