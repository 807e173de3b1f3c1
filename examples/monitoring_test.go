package examples

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/homesnap/homesnap/internal/lease"
	"github.com/homesnap/homesnap/internal/metrics"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/store/file"
	"github.com/homesnap/homesnap/internal/testenv"
)

// TestPrometheusRules runs promtool on the PrometheusRule's spec: `check
// rules` (syntax, PromQL, templates) and `test rules` (each alert fires on
// the series its test group writes, and stays quiet where it must), and
// checks that every alert has a test in which it fires.
func TestPrometheusRules(t *testing.T) {
	promtool := testenv.Tool(t, "promtool")
	var cr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []struct {
				Name  string           `json:"name"`
				Rules []map[string]any `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	data, err := os.ReadFile("monitoring/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &cr); err != nil {
		t.Fatalf("monitoring/prometheusrule.yaml: %v", err)
	}
	if cr.APIVersion != "monitoring.coreos.com/v1" || cr.Kind != "PrometheusRule" {
		t.Fatalf("monitoring/prometheusrule.yaml is %s %s, want monitoring.coreos.com/v1 PrometheusRule", cr.APIVersion, cr.Kind)
	}
	rules, err := yaml.Marshal(cr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests, err := os.ReadFile("monitoring/prometheusrule-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"rules.yaml": rules, "prometheusrule-test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "prometheusrule-test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s (on monitoring/prometheusrule.yaml's spec): %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	var unit struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &unit); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, g := range unit.Tests {
		for _, a := range g.AlertRuleTest {
			fires[a.Alertname] = fires[a.Alertname] || len(a.ExpAlerts) > 0
		}
	}
	alerts := 0
	for _, g := range cr.Spec.Groups {
		for _, r := range g.Rules {
			name, _ := r["alert"].(string)
			if name == "" {
				continue
			}
			alerts++
			if !fires[name] {
				t.Errorf("alert %s has no test in monitoring/prometheusrule-test.yaml in which it fires", name)
			}
		}
	}
	if alerts == 0 {
		t.Error("monitoring/prometheusrule.yaml has no alert")
	}
}

// TestMonitoringUsesExportedMetrics holds the alerts, their tests and the
// dashboard to the metrics the sidecar exports: every homesnap_*, process_*
// and go_* name they use must be one its registry gathers (with _bucket,
// _sum and _count for a histogram), so that a renamed metric cannot leave
// an alert silently matching nothing.
func TestMonitoringUsesExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	if !exported["homesnap_failures_total"] || !exported["process_start_time_seconds"] {
		t.Fatalf("the registry gathered too little to check against: %v", exported)
	}
	name := regexp.MustCompile(`\b(homesnap|process|go)_[a-z0-9_]*[a-z0-9]\b`)
	for _, f := range []string{"monitoring/prometheusrule.yaml", "monitoring/prometheusrule-test.yaml", "monitoring/grafana-dashboard.json"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		used := name.FindAllString(string(data), -1)
		if len(used) == 0 {
			t.Errorf("%s uses no homesnap metric", f)
		}
		for _, n := range used {
			if !exported[n] {
				t.Errorf("%s uses %s, which the sidecar does not export", f, n)
			}
		}
	}
}

// TestPodMonitorFindsTheSidecar checks the wiring a typo would break: the
// PodMonitor scrapes the port every example names for the sidecar, and
// the sidecar-down alert selects the job the PodMonitor's name makes.
func TestPodMonitorFindsTheSidecar(t *testing.T) {
	var pm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Selector            map[string]any `json:"selector"`
			PodMetricsEndpoints []struct {
				Port     string `json:"port"`
				Path     string `json:"path"`
				Interval string `json:"interval"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	data, err := os.ReadFile("monitoring/podmonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &pm); err != nil {
		t.Fatalf("monitoring/podmonitor.yaml: %v", err)
	}
	if pm.APIVersion != "monitoring.coreos.com/v1" || pm.Kind != "PodMonitor" || len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("monitoring/podmonitor.yaml: want one monitoring.coreos.com/v1 PodMonitor endpoint, got %s %s %d", pm.APIVersion, pm.Kind, len(pm.Spec.PodMetricsEndpoints))
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	if ep.Path != "/metrics" {
		t.Errorf("the PodMonitor scrapes %q, the sidecar serves /metrics", ep.Path)
	}
	port := regexp.MustCompile(`-\s+name:\s+` + regexp.QuoteMeta(ep.Port) + `\s+containerPort:\s+9090\b`)
	files, _ := filepath.Glob("kubernetes/jenkins-*.yaml")
	files = append(files, "helm/values.yaml", "operator/jenkins.yaml")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !port.Match(data) {
			t.Errorf("%s has no sidecar port named %q on 9090 (the listener): the PodMonitor would not find it", f, ep.Port)
		}
	}
	rules, err := os.ReadFile("monitoring/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rules), `up{job=~".+/`+pm.Metadata.Name+`"}`) {
		t.Errorf("HomesnapSidecarDown does not select job <namespace>/%s, the PodMonitor's", pm.Metadata.Name)
	}
}

// TestGrafanaDashboard checks that the dashboard is JSON Grafana can import
// and that every panel queries something.
func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile("monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("monitoring/grafana-dashboard.json: %v", err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatal("monitoring/grafana-dashboard.json: no uid or no panels")
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("panel %q has an empty query", p.Title)
			}
		}
	}
}

// exportedMetrics returns the names a sidecar's /metrics shows once every
// labelled family has a child: one failed and one committed snapshot, the
// lease held, and each store operation through the metering wrapper, one
// of them failing.
func exportedMetrics(t *testing.T) map[string]bool {
	m := metrics.New()
	now := time.Now()
	m.Observe(now, now, nil, lease.ErrLost)
	m.Observe(now, now, &snapshot.Result{ID: "s"}, nil)
	m.LeaseHeld(true)
	m.Repacked(1, 1)
	m.StoreContents([]store.Object{{Key: repo.ArchiveKey(repo.NewID(now)), Size: 1}})

	ctx := context.Background()
	fs, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := m.Store(fs)
	if err := st.Put(ctx, "archives/a", strings.NewReader("data")); err != nil {
		t.Fatal(err)
	}
	if rc, err := st.Get(ctx, "archives/a", 0, -1); err == nil {
		rc.Close()
	}
	st.List(ctx, "", func(store.Object) error { return nil })
	st.Delete(ctx, "archives/a")
	st.Swap(ctx, "lease", []byte("x"), "")
	st.Load(ctx, "lease")
	if err := m.Store(brokenStore{}).Put(ctx, "archives/b", strings.NewReader("")); err == nil {
		t.Fatal("the broken store's Put succeeded")
	}

	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		if len(f.Metric) > 0 && f.Metric[0].Histogram != nil {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

// brokenStore fails every Put: the store_errors_total family appears only
// once an operation has failed.
type brokenStore struct{ store.Store }

func (brokenStore) Put(context.Context, string, io.Reader) error {
	return errors.New("broken")
}
