package k8s

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// journalDelay is the test hook that slows the sidecar's change-journal
// open (issue 29, scenario 4: a cold million-file home takes about 53 s,
// the example's startup probe allows 2 s × 30). The hook and the fix
// (health served first, the journal opened after) come with branch
// `probe`; until the image under test has them the test skips, saying so.
const journalDelay = "HOMESNAP_TEST_JOURNAL_OPEN_DELAY"

// TestSlowJournalNeverHoldsJenkins: with a journal that takes longer to open
// than the startup probe's budget, the sidecar still passes its probe at
// once and Jenkins starts before the journal is open.
func TestSlowJournalNeverHoldsJenkins(t *testing.T) {
	e := cluster(t)
	const ns, pod = "homesnap-journal", "jenkins-0"
	store := e.dir(t, ns, "store")
	e.volume(t, ns+"-pv0", e.dir(t, ns, "pv0"))
	x := e.loadExample(t, "jenkins-native-sidecar.yaml", store)
	side := &x.set.Spec.Template.Spec.InitContainers[1]
	if side.Name != "homesnap-snapshot" {
		t.Fatalf("the example's second init container is %s, want the sidecar", side.Name)
	}
	delay := 90 * time.Second // more than the probe's 60 s
	side.Env = append(side.Env, corev1.EnvVar{Name: journalDelay, Value: delay.String()})
	e.apply(t, ns, x)

	p := e.waitPod(t, ns, pod, "Jenkins ready", 4*time.Minute, "", jenkinsReady)
	lines := e.logs(t, ns, pod, "homesnap-snapshot", false)
	if opened := entries(lines, "change journal on"); len(opened) > 0 {
		var took struct {
			OpenedIn float64 `json:"opened_in"` // ms
		}
		for _, l := range lines {
			if strings.Contains(l.Text, "change journal on") {
				json.Unmarshal([]byte(l.Text), &took)
			}
		}
		if time.Duration(took.OpenedIn*float64(time.Millisecond)) < delay {
			t.Skipf("the image ignores %s (the journal opened in %v): scenario 4 waits for branch probe", journalDelay, time.Duration(took.OpenedIn*float64(time.Millisecond)))
		}
	}
	s := status(p, "homesnap-snapshot")
	if s.RestartCount != 0 || s.Started == nil || !*s.Started {
		t.Fatalf("the sidecar was restarted or never started while its journal opened:\n%s", podSummary(p))
	}
	up := find(e.logs(t, ns, pod, "jenkins", false), "jenkins-standin: up")
	if opened := entries(e.logs(t, ns, pod, "homesnap-snapshot", false), "change journal on"); up == nil || (len(opened) > 0 && opened[0].At.Before(up.At)) {
		t.Fatalf("Jenkins was up at %v, want it before the journal opened (%+v)", up, opened)
	}
}
