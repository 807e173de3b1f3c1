package metrics

import (
	"runtime"
	"testing"

	"github.com/homesnap/homesnap/internal/version"
)

func TestBuildInfo(t *testing.T) {
	families, err := New().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"version": version.Version, "revision": version.Get().Revision, "goversion": runtime.Version()}
	for _, f := range families {
		if f.GetName() != "homesnap_build_info" {
			continue
		}
		if len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != 1 {
			t.Fatalf("homesnap_build_info: %v", f.Metric)
		}
		got := map[string]string{}
		for _, l := range f.Metric[0].Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("homesnap_build_info{%s=%q}, want %q", k, got[k], v)
			}
		}
		return
	}
	t.Error("no homesnap_build_info metric")
}
