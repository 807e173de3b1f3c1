package k8s

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// journalDelay is the test hook that slows the sidecar's change-journal
// open down (issue 29, scenario 4): a cold million-file home takes about
// 53 s to open, and the example's startup probe allows 2 s × 30.
const journalDelay = "HOMESNAP_TEST_JOURNAL_OPEN_DELAY"

// TestSlowJournalNeverHoldsJenkins: with a journal that takes longer to open
// than the startup probe's budget, the sidecar passes its probe at once,
// Jenkins starts before the journal is open, the metric says it is
// opening, and the sidecar is never restarted.
func TestSlowJournalNeverHoldsJenkins(t *testing.T) {
	e := cluster(t)
	const ns, pod = "homesnap-journal", "jenkins-0"
	e.namespace(t, ns)
	store := e.dir(t, ns, "store")
	e.volume(t, ns+"-pv0", e.dir(t, ns, "pv0"), ns, "jenkins-home-"+pod)
	x := e.loadExample(t, "jenkins-native-sidecar.yaml", store)
	side := &x.set.Spec.Template.Spec.InitContainers[1]
	if side.Name != "homesnap-snapshot" || side.StartupProbe == nil {
		t.Fatalf("the example's second init container is %s (startup probe %v), want the sidecar with one", side.Name, side.StartupProbe)
	}
	probe := side.StartupProbe
	budget := time.Duration(probe.PeriodSeconds*probe.FailureThreshold) * time.Second
	delay := budget + 30*time.Second
	side.Env = append(side.Env, corev1.EnvVar{Name: journalDelay, Value: delay.String()})
	e.apply(t, ns, x)

	p := e.waitPod(t, ns, pod, "Jenkins ready", delay, "", jenkinsReady)
	up := find(e.logs(t, ns, pod, "jenkins", false), "jenkins-standin: up")
	if up == nil {
		t.Fatalf("Jenkins is ready but did not say it is up")
	}
	if opened := entries(e.logs(t, ns, pod, "homesnap-snapshot", false), "change journal on"); len(opened) > 0 {
		t.Fatalf("the journal opened at %v, before Jenkins was up (%v): the hook did not slow it", opened[0].At, up.At)
	}
	if got := metric(t, p, `homesnap_journal_state{state="opening"}`); got != "1" {
		t.Errorf(`homesnap_journal_state{state="opening"} is %s while the journal opens, want 1`, got)
	}

	// Past the probe's budget, the journal opens; the sidecar was never
	// restarted meanwhile.
	var opened []entry
	for deadline := time.Now().Add(delay + 2*time.Minute); opened == nil; time.Sleep(2 * time.Second) {
		opened = entries(e.logs(t, ns, pod, "homesnap-snapshot", false), "change journal on")
		if opened == nil && time.Now().After(deadline) {
			t.Fatalf("the journal did not open within %v:\n%s", delay+2*time.Minute, texts(e.logs(t, ns, pod, "homesnap-snapshot", false)))
		}
	}
	var took struct {
		OpenedIn float64 `json:"opened_in"` // ms
	}
	for _, l := range e.logs(t, ns, pod, "homesnap-snapshot", false) {
		if strings.Contains(l.Text, "change journal on") {
			must(t, json.Unmarshal([]byte(l.Text), &took))
		}
	}
	if d := time.Duration(took.OpenedIn * float64(time.Millisecond)); d < delay {
		t.Fatalf("the journal opened in %v, less than the %v %s asks: the image ignores the hook", d, delay, journalDelay)
	}
	p = e.waitPod(t, ns, pod, "running", time.Minute, "", func(*corev1.Pod) bool { return true })
	if s := status(p, "homesnap-snapshot"); s.RestartCount != 0 || s.Started == nil || !*s.Started {
		t.Fatalf("the sidecar was restarted while its journal opened:\n%s", podSummary(p))
	}
	if got := metric(t, p, `homesnap_journal_state{state="on"}`); got != "1" {
		t.Errorf(`homesnap_journal_state{state="on"} is %s once the journal is open, want 1`, got)
	}
	t.Logf("Jenkins up %v before the journal opened (probe budget %v, journal open %v)", opened[0].At.Sub(up.At).Round(time.Millisecond), budget, delay)
}
