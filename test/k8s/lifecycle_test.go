package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// writing makes the stand-in append to its build's log five times a
// second until SIGTERM, as a running build does.
var writing = corev1.EnvVar{Name: "STANDIN_WRITE_EVERY", Value: "200ms"}

// TestNativeSidecarLifecycle runs examples/kubernetes/jenkins-native-sidecar.yaml
// through the moments homesnap exists for, in order, on one store: the
// first boot from a populated store, the pod deleted and evicted while
// Jenkins writes, the sidecar killed, a second StatefulSet on the same
// store, and the volume lost.
func TestNativeSidecarLifecycle(t *testing.T) {
	e := cluster(t)
	const ns, pod = "homesnap-native", "jenkins-0"
	s := e.newSite(t, ns, pod, "jenkins-home-"+pod) // the StatefulSet's volumeClaimTemplate
	e.apply(t, ns, e.loadExample(t, "jenkins-native-sidecar.yaml", s.store, writing))
	store, home := s.store, s.home

	var current *corev1.Pod
	ok := t.Run("first boot restores before Jenkins starts", func(t *testing.T) {
		current = s.firstBoot(t, nil)
	})
	if !ok {
		return
	}

	ok = t.Run("pod deleted while Jenkins writes", func(t *testing.T) {
		current = s.stopWhileWriting(t, current, "nothing", func(p *corev1.Pod) error {
			return e.cs.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
		})
	})
	if !ok {
		return
	}

	t.Run("pod evicted while Jenkins writes", func(t *testing.T) {
		current = s.stopWhileWriting(t, current, "nothing", func(p *corev1.Pod) error {
			return e.cs.PolicyV1().Evictions(ns).Evict(context.Background(),
				&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}})
		})
	})

	t.Run("sidecar killed", func(t *testing.T) {
		current = e.waitPod(t, ns, pod, "Jenkins ready", 5*time.Minute, "", jenkinsReady)
		side, jenkins := status(current, "homesnap-snapshot"), status(current, "jenkins")
		killContainer(t, current, side.ContainerID)
		head := last(e.history(t, store)) // the killed sidecar commits nothing more
		p := e.waitPod(t, ns, pod, "the sidecar restarted", 3*time.Minute, "", func(p *corev1.Pod) bool {
			s := status(p, "homesnap-snapshot")
			return s.RestartCount > side.RestartCount && s.Started != nil && *s.Started
		})
		if j := status(p, "jenkins"); j.ContainerID != jenkins.ContainerID || j.RestartCount != jenkins.RestartCount {
			t.Errorf("Jenkins was restarted with its sidecar: %+v", j)
		}
		// The killed one could not release its lease: the new one takes it
		// when it expires (HOMESNAP_LEASE_TTL, 60 s), then snapshots on top
		// of the head the killed one left.
		var commit []entry
		deadline := time.Now().Add(4 * time.Minute)
		for commit == nil {
			commit = entries(e.logs(t, ns, pod, "homesnap-snapshot", false), "snapshot committed")
			if commit == nil && time.Now().After(deadline) {
				t.Fatalf("the restarted sidecar took no snapshot within 4 minutes:\n%s", texts(e.logs(t, ns, pod, "homesnap-snapshot", false)))
			}
			time.Sleep(2 * time.Second)
		}
		if commit[0].Parent != head.ID {
			t.Errorf("the restarted sidecar's first snapshot %s has parent %s, want the head %s the killed one left", commit[0].Snapshot, commit[0].Parent, head.ID)
		}
		linear(t, e.history(t, store))
		if got := metric(t, p, "homesnap_lease_held"); got != "1" {
			t.Errorf("homesnap_lease_held %s after the restart, want 1", got)
		}
		current = p
	})

	t.Run("two StatefulSets on one store", func(t *testing.T) {
		const ns2 = "homesnap-second"
		e.namespace(t, ns2)
		e.volume(t, ns2+"-pv0", e.dir(t, ns2, "pv0"), ns2, "jenkins-home-"+pod)
		x := e.loadExample(t, "jenkins-native-sidecar.yaml", store, writing)
		// Two pods asking for a core each do not fit a 2-core node: this
		// one's Jenkins asks for less.
		j := &x.set.Spec.Template.Spec.Containers[0]
		j.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("100m")
		e.apply(t, ns2, x)
		second := e.waitPod(t, ns2, pod, "Jenkins ready", 5*time.Minute, "", jenkinsReady)
		var refused []entry
		for deadline := time.Now().Add(2 * time.Minute); refused == nil; time.Sleep(2 * time.Second) {
			refused = entries(e.logs(t, ns2, pod, "homesnap-snapshot", false), "not the store's writer")
			if refused == nil && time.Now().After(deadline) {
				t.Fatalf("the second sidecar never said it is not the writer:\n%s", texts(e.logs(t, ns2, pod, "homesnap-snapshot", false)))
			}
		}
		t.Logf("the second sidecar: %s: %s", refused[0].Message, refused[0].Error)
		if holder := ns + "/" + pod; !strings.Contains(refused[0].Error, holder+" (pid 1), holds the store's lease") {
			t.Errorf("the second sidecar does not say that %s writes: %q", holder, refused[0].Error)
		}
		if got := metric(t, second, "homesnap_lease_held"); got != "0" {
			t.Errorf("the second sidecar's homesnap_lease_held is %s, want 0", got)
		}
		if got := metric(t, current, "homesnap_lease_held"); got != "1" {
			t.Errorf("the first sidecar's homesnap_lease_held is %s, want 1", got)
		}
		if code, body := get(t, second, "/readyz"); code == http.StatusOK {
			t.Errorf("the second sidecar's /readyz answers %d %q while another writes", code, body)
		}
		if c := entries(e.logs(t, ns2, pod, "homesnap-snapshot", false), "snapshot committed"); c != nil {
			t.Errorf("the second sidecar committed snapshots: %+v", c)
		}
		linear(t, e.history(t, store))

		// The first controller is scaled down (maintenance): the second
		// takes the lease, but its home is behind the store (the first
		// wrote since the second was restored), so it stands down instead
		// of making its older home the head.
		e.scale(t, ns, "jenkins", 0)
		e.podGone(t, ns, current)
		head := last(e.history(t, store)) // the first controller's final snapshot
		var down []entry
		for deadline := time.Now().Add(4 * time.Minute); down == nil; time.Sleep(2 * time.Second) {
			down = entries(e.logs(t, ns2, pod, "homesnap-snapshot", false), "standing down")
			if down == nil && time.Now().After(deadline) {
				t.Fatalf("the second sidecar did not stand down within 4 minutes:\n%s", texts(e.logs(t, ns2, pod, "homesnap-snapshot", false)))
			}
		}
		t.Logf("the second sidecar: %s: %s", down[0].Message, down[0].Error)
		if h := last(e.history(t, store)); h.ID != head.ID {
			t.Fatalf("the head moved from %s to %s while the first controller was down", head.ID, h.ID)
		}
		if code, body := get(t, second, "/readyz"); code == http.StatusOK || !strings.Contains(body, "home behind the store") {
			t.Errorf("the second sidecar's /readyz: %d %q, want not ready: home behind the store", code, body)
		}
		if got := metric(t, second, "homesnap_lease_held"); got != "0" {
			t.Errorf("the second sidecar's homesnap_lease_held is %s after standing down, want 0", got)
		}
		// Back up, the first takes its store again and goes on from its head.
		e.scale(t, ns, "jenkins", 1)
		current = e.waitPod(t, ns, pod, "scaled up, Jenkins ready", 5*time.Minute, current.UID, jenkinsReady)
		var commit []entry
		for deadline := time.Now().Add(4 * time.Minute); commit == nil; time.Sleep(2 * time.Second) {
			commit = entries(e.logs(t, ns, pod, "homesnap-snapshot", false), "snapshot committed")
			if commit == nil && time.Now().After(deadline) {
				t.Fatalf("the first controller's sidecar took no snapshot within 4 minutes:\n%s", texts(e.logs(t, ns, pod, "homesnap-snapshot", false)))
			}
		}
		if commit[0].Parent != head.ID {
			t.Errorf("the first controller's next snapshot %s has parent %s, want its own head %s", commit[0].Snapshot, commit[0].Parent, head.ID)
		}
		if c := entries(e.logs(t, ns2, pod, "homesnap-snapshot", false), "snapshot committed"); c != nil {
			t.Errorf("the second sidecar committed snapshots: %+v", c)
		}
		linear(t, e.history(t, store))
		e.deleteNamespace(t, ns2)
	})

	t.Run("volume lost", func(t *testing.T) {
		old := home(t)
		// The claim goes (its volume is kept: Retain); an empty volume waits
		// for the claim the StatefulSet makes for the next pod.
		must(t, e.cs.CoreV1().PersistentVolumeClaims(ns).Delete(context.Background(), s.claim, metav1.DeleteOptions{}))
		s.newVolume(t, "pv1")
		next := s.stopWhileWriting(t, current, "restore", func(p *corev1.Pod) error {
			return e.cs.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
		})
		if home(t) == old {
			t.Fatalf("the new pod's claim is bound to the old volume %s", old)
		}
		boot := standinBuild(t, e.logs(t, ns, next.Name, "jenkins", false))
		sameFiles(t, "the home on the new volume", selectedFiles(t, old, nil), selectedFiles(t, home(t), func(rel string) bool {
			return strings.HasPrefix(rel, "jobs/standin/builds/"+boot)
		}))
		checkAgents(t, e, home(t), store)
	})
}

// site is one controller as a test deploys it: its namespace, a store
// seeded from a generated home, and the local volumes its claim may bind.
type site struct {
	e                *env
	ns, pod, claim   string
	store, src, seed string            // the store, the home it was seeded from, that snapshot
	homes            map[string]string // volume name: host directory
}

// newSite makes the namespace, seeds a store with a snapshot of a
// generated home, and makes the first volume for the claim (none for a
// home on an emptyDir).
func (e *env) newSite(t *testing.T, ns, pod, claim string) *site {
	t.Helper()
	e.namespace(t, ns)
	s := &site{e: e, ns: ns, pod: pod, claim: claim, homes: map[string]string{}}
	s.store = e.dir(t, ns, "store")
	s.src = filepath.Join(e.dir(t, ns, "source"), "home")
	e.run(t, "genhome", "-preset", "tiny", "-seed", "1", s.src)
	chown(t, s.src) // as the Jenkins image leaves its home
	s.seed = strings.TrimSpace(e.run(t, "snapshot", "--once", "--home", s.src, "--store", s.store))
	chown(t, s.store) // the sidecar (uid 1000) writes there next
	if claim != "" {
		s.newVolume(t, "pv0")
	}
	return s
}

func (s *site) newVolume(t *testing.T, n string) {
	t.Helper()
	name := s.ns + "-" + n
	s.homes[name] = s.e.dir(t, s.ns, n)
	s.e.volume(t, name, s.homes[name], s.ns, s.claim)
}

// home is the host directory of the volume the pod's claim is bound to,
// or of the pod's emptyDir jenkins-home when the site has no claim.
func (s *site) home(t *testing.T) string {
	t.Helper()
	if s.claim == "" {
		p, err := s.e.cs.CoreV1().Pods(s.ns).Get(context.Background(), s.pod, metav1.GetOptions{})
		must(t, err)
		return filepath.Join(s.e.state, "kubelet/pods", string(p.UID), "volumes/kubernetes.io~empty-dir/jenkins-home")
	}
	c, err := s.e.cs.CoreV1().PersistentVolumeClaims(s.ns).Get(context.Background(), s.claim, metav1.GetOptions{})
	must(t, err)
	return s.homes[c.Spec.VolumeName]
}

// firstBoot waits for the first pod on an empty volume and checks that the
// restore of the seeded snapshot completed before Jenkins started, by the
// kubelet's account and by their own, byte-exact, with the agents' keys
// in place. chartWrites are paths something else writes after the restore.
func (s *site) firstBoot(t *testing.T, chartWrites func(rel string) bool) *corev1.Pod {
	t.Helper()
	e, ns, pod := s.e, s.ns, s.pod
	p := e.waitPod(t, ns, pod, "Jenkins ready", 5*time.Minute, "", jenkinsReady)
	restore := status(p, "homesnap-restore").State.Terminated
	started := status(p, "jenkins").State.Running
	if restore == nil || restore.ExitCode != 0 || started == nil {
		t.Fatalf("want the restore done (exit 0) and Jenkins running:\n%s", podSummary(p))
	}
	if started.StartedAt.Before(&restore.FinishedAt) {
		t.Errorf("Jenkins started at %v, before the restore finished at %v", started.StartedAt, restore.FinishedAt)
	}
	done := entries(e.logs(t, ns, pod, "homesnap-restore", false), "restore complete")
	up := find(e.logs(t, ns, pod, "jenkins", false), "jenkins-standin: up")
	if len(done) != 1 || done[0].Decision != "restore" || done[0].Snapshot != s.seed || up == nil {
		t.Fatalf("want one complete restore of %s, then Jenkins up: %+v, %v", s.seed, done, up)
	}
	if !up.At.After(done[0].At) {
		t.Errorf("Jenkins printed it was up at %v, before the restore completed at %v", up.At, done[0].At)
	}
	t.Logf("restore complete %s, Jenkins up %s later", done[0].At.Format(time.RFC3339Nano), up.At.Sub(done[0].At))
	sameFiles(t, "the restored home", selectedFiles(t, s.src, chartWrites), selectedFiles(t, s.home(t), nil))
	checkAgents(t, e, s.home(t), s.store)
	return p
}

// stopWhileWriting stops the pod with stop while the stand-in writes and
// checks the termination: Jenkins stopped first, the sidecar's final
// snapshot came after Jenkins' last write, within the grace period, and
// holds it; the StatefulSet made a new pod, whose restore decided want
// (without walking the home) from that final snapshot.
func (s *site) stopWhileWriting(t *testing.T, p *corev1.Pod, want string, stop func(*corev1.Pod) error) *corev1.Pod {
	t.Helper()
	e, ns, store, home := s.e, s.ns, s.store, s.home
	p = e.waitPod(t, ns, p.Name, "Jenkins ready", 5*time.Minute, "", jenkinsReady)
	boot := standinBuild(t, e.logs(t, ns, p.Name, "jenkins", false))
	oldHome := home(t)
	buildLog := filepath.Join(oldHome, "jobs/standin/builds", boot, "log")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		data, _ := os.ReadFile(buildLog)
		if strings.Count(string(data), "step ") >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stand-in is not writing %s", buildLog)
		}
	}
	jenkinsOut, sidecarOut := e.follow(t, ns, p.Name, "jenkins"), e.follow(t, ns, p.Name, "homesnap-snapshot")
	final := e.watchTermination(t, ns, p)
	asked := time.Now()
	must(t, stop(p))
	gone := final(4 * time.Minute)
	next := e.waitPod(t, ns, p.Name, "recreated, Jenkins ready", 5*time.Minute, p.UID, jenkinsReady)

	// The kubelet's account: Jenkins stopped first, both cleanly.
	j, side := status(gone, "jenkins").State.Terminated, status(gone, "homesnap-snapshot").State.Terminated
	if j == nil || side == nil || j.ExitCode != 0 || side.ExitCode != 0 {
		t.Fatalf("want Jenkins and the sidecar terminated with exit 0:\n%s", podSummary(gone))
	}
	if side.FinishedAt.Before(&j.FinishedAt) {
		t.Errorf("the sidecar finished at %v, before Jenkins at %v", side.FinishedAt, j.FinishedAt)
	}
	// Their own: Jenkins' last write, then the sidecar's final snapshot.
	jl, sl := jenkinsOut.wait(t, time.Minute), sidecarOut.wait(t, time.Minute)
	stopped := find(jl, "jenkins-standin: stopped after")
	stopping := entries(sl, "stopping: waiting for Jenkins")
	commits := entries(sl, "snapshot committed")
	if stopped == nil || len(stopping) != 1 || len(commits) == 0 {
		t.Fatalf("want Jenkins stopped, the sidecar stopping and committing:\nJenkins:\n%s\nsidecar:\n%s", texts(jl), texts(sl))
	}
	last := commits[len(commits)-1]
	if !last.At.After(stopping[0].At) || !last.At.After(stopped.At) {
		t.Fatalf("the last snapshot %s (at %v) is not after Jenkins stopped (%v) and the sidecar got SIGTERM (%v)", last.Snapshot, last.At, stopped.At, stopping[0].At)
	}
	var rec *record
	for _, r := range e.history(t, store) {
		if r.ID == last.Snapshot {
			rec = &r
		}
	}
	grace := time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	if rec == nil || rec.Trigger != "final" || rec.Time.Sub(asked) > grace {
		t.Fatalf("the final snapshot %s: %+v, want trigger final within %v of the request at %v", last.Snapshot, rec, grace, asked)
	}
	t.Logf("asked %s; Jenkins stopped +%v; final snapshot %s committed +%v (grace %v)", asked.Format(time.RFC3339Nano),
		stopped.At.Sub(asked).Round(time.Millisecond), last.Snapshot, last.At.Sub(asked).Round(time.Millisecond), grace)

	// The final snapshot holds every write the stand-in made, the last
	// (build.xml, written after SIGTERM) included.
	snap := t.TempDir()
	e.run(t, "restore", "--store", store, "--snapshot", last.Snapshot, "--home", snap)
	var steps int
	fmt.Sscanf(stopped.Text[strings.Index(stopped.Text, "after"):], "after %d steps", &steps)
	logData, _ := os.ReadFile(filepath.Join(snap, "jobs/standin/builds", boot, "log"))
	if _, err := os.Stat(filepath.Join(snap, "jobs/standin/builds", boot, "build.xml")); err != nil || steps == 0 || strings.Count(string(logData), "step ") != steps {
		t.Fatalf("the final snapshot lacks Jenkins' last writes: build.xml: %v; %d steps logged, %d written", err, strings.Count(string(logData), "step "), steps)
	}
	newBoot := standinBuild(t, e.logs(t, ns, next.Name, "jenkins", false))
	nextBuild := func(rel string) bool { return strings.HasPrefix(rel, "jobs/standin/builds/"+newBoot) }
	if s.claim != "" {
		sameFiles(t, "the final snapshot", selectedFiles(t, oldHome, nextBuild), selectedFiles(t, snap, nil))
	} else { // the emptyDir went with the pod: the next pod's must hold the final snapshot
		sameFiles(t, "the next pod's home", selectedFiles(t, snap, nil), selectedFiles(t, home(t), nextBuild))
	}

	// The next pod's restore decided from that snapshot, without walking.
	var decided []entry
	for _, en := range entries(e.logs(t, ns, next.Name, "homesnap-restore", false), "") {
		if en.Decision != "" {
			decided = append(decided, en)
		}
	}
	if len(decided) != 1 || decided[0].Decision != want || decided[0].Snapshot != last.Snapshot || decided[0].Walked == nil || *decided[0].Walked {
		t.Fatalf("the next pod's restore: %+v, want %q of %s without a walk", decided, want, last.Snapshot)
	}
	up := find(e.logs(t, ns, next.Name, "jenkins", false), "jenkins-standin: up")
	if up == nil || !up.At.After(decided[0].At) {
		t.Fatalf("Jenkins up %v, restore done at %v", up, decided[0].At)
	}
	t.Logf("the next pod: restore %q (%s), Jenkins up %v later", decided[0].Decision, decided[0].Message, up.At.Sub(decided[0].At).Round(time.Millisecond))
	return next
}

// watchTermination watches the pod from now on; the function it returns
// waits until the pod is deleted and returns its last state, which holds
// the containers' terminations as the kubelet reported them.
func (e *env) watchTermination(t *testing.T, ns string, p *corev1.Pod) func(time.Duration) *corev1.Pod {
	t.Helper()
	w, err := e.cs.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", p.Name).String(), ResourceVersion: p.ResourceVersion})
	must(t, err)
	return func(limit time.Duration) *corev1.Pod {
		t.Helper()
		defer w.Stop()
		last := p
		timeout := time.After(limit)
		for {
			select {
			case ev, open := <-w.ResultChan():
				if !open {
					t.Fatalf("the watch on %s ended before the pod was deleted", p.Name)
				}
				q, isPod := ev.Object.(*corev1.Pod)
				if !isPod || q.UID != p.UID {
					continue
				}
				last = q
				if ev.Type == watch.Deleted {
					return last
				}
			case <-timeout:
				t.Fatalf("%s not deleted within %v:\n%s", p.Name, limit, podSummary(last))
			}
		}
	}
}

// standinBuild is the build the stand-in started ("up, build ID").
func standinBuild(t *testing.T, lines []line) string {
	t.Helper()
	l := find(lines, "jenkins-standin: up, build ")
	if l == nil {
		t.Fatalf("the stand-in did not say it is up:\n%s", texts(lines))
	}
	return strings.TrimSpace(l.Text[strings.Index(l.Text, "build ")+len("build "):])
}

func texts(lines []line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.At.Format(time.RFC3339Nano) + " " + l.Text + "\n")
	}
	return b.String()
}

func last(h []record) record {
	if len(h) == 0 || !h[len(h)-1].Head {
		panic(fmt.Sprintf("no head in %+v", h))
	}
	return h[len(h)-1]
}

// linear fails unless each snapshot's parent is the one before it: one
// writer, history never forked.
func linear(t *testing.T, h []record) {
	t.Helper()
	for i := 1; i < len(h); i++ {
		if h[i].Parent != h[i-1].ID {
			t.Errorf("history forks: %s has parent %s, the snapshot before it is %s", h[i].ID, h[i].Parent, h[i-1].ID)
		}
	}
}

// checkAgents runs `homesnap check-agents` on the pod's home against the
// store's head, as an operator does after a move.
func checkAgents(t *testing.T, e *env, home, store string) {
	t.Helper()
	out := e.run(t, "homesnap", "check-agents", "--home", home, "--store", store, "--compare", "head", "--output", "json")
	var rep struct {
		Continuity bool `json:"continuity"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Continuity {
		t.Fatalf("homesnap check-agents: continuity %v (%v)\n%s", rep.Continuity, err, out)
	}
}

// killContainer kills every process of one container (as the OOM killer
// would): the kubelet, not the pod, must bring it back.
func killContainer(t *testing.T, p *corev1.Pod, id string) {
	t.Helper()
	id = strings.TrimPrefix(id, "containerd://")
	dirs, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/pids/kubepods/*pod%s/%s", p.UID, id))
	more, _ := filepath.Glob(fmt.Sprintf("/sys/fs/cgroup/pids/kubepods/*/pod%s/%s", p.UID, id))
	dirs = append(dirs, more...)
	if len(dirs) != 1 {
		t.Fatalf("container %s of pod %s: cgroups %v", id, p.UID, dirs)
	}
	procs, err := os.ReadFile(filepath.Join(dirs[0], "cgroup.procs"))
	must(t, err)
	pids := strings.Fields(string(procs))
	if len(pids) == 0 {
		t.Fatalf("container %s runs no process", id)
	}
	for _, pid := range pids {
		var n int
		fmt.Sscan(pid, &n)
		proc, err := os.FindProcess(n)
		must(t, err)
		must(t, proc.Kill())
	}
}

// get asks the sidecar's HTTP endpoint (:9090 in the examples), as a
// kubelet probe or Prometheus does.
func get(t *testing.T, p *corev1.Pod, path string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + p.Status.PodIP + ":9090" + path)
	if err != nil {
		t.Fatalf("GET %s of %s: %v", path, p.Name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metric is one unlabelled sample of the sidecar's /metrics.
func metric(t *testing.T, p *corev1.Pod, name string) string {
	t.Helper()
	_, body := get(t, p, "/metrics")
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	t.Fatalf("%s: no %s in /metrics", p.Name, name)
	return ""
}

// TestClassicSidecarLifecycle runs examples/kubernetes/jenkins-classic-sidecar.yaml
// (clusters before native sidecars): the sidecar and Jenkins get SIGTERM
// together, and the sidecar's final snapshot must still come after
// Jenkins' last write, because it waits for Jenkins' port to close and
// the home to go quiet.
func TestClassicSidecarLifecycle(t *testing.T) {
	e := cluster(t)
	const ns, pod = "homesnap-classic", "jenkins-0"
	s := e.newSite(t, ns, pod, "") // the example's home is an emptyDir
	e.apply(t, ns, e.loadExample(t, "jenkins-classic-sidecar.yaml", s.store, writing))
	var current *corev1.Pod
	if !t.Run("first boot restores before Jenkins starts", func(t *testing.T) { current = s.firstBoot(t, nil) }) {
		return
	}
	t.Run("pod deleted while Jenkins writes", func(t *testing.T) {
		// A new emptyDir: the next pod restores the final snapshot in full.
		s.stopWhileWriting(t, current, "restore", func(p *corev1.Pod) error {
			return e.cs.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
		})
	})
}
