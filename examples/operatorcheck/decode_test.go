package operatorcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const examples = "../operator/*.yaml"

// TestOperatorExamples decodes every operator example as the operator's
// API (k8s.io/api v0.30.3) takes it.
func TestOperatorExamples(t *testing.T) {
	files, err := filepath.Glob(examples)
	if err != nil || len(files) == 0 {
		t.Fatalf("no operator examples at %s (%v)", examples, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cr, err := Decode(data)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(cr.Spec.Master.Containers) < 2 {
			t.Errorf("%s: %d containers, want Jenkins and the homesnap sidecar", f, len(cr.Spec.Master.Containers))
		}
	}
}

// TestOperatorRejects changes the example the way earlier versions of it
// (or a user copying from a newer Kubernetes' documentation) did, and
// expects the operator's API to refuse each change by the field's name.
// The first case is a valid change made the same way: it must pass, so
// that the refusals are the fields', not the editing's.
func TestOperatorRejects(t *testing.T) {
	master := func(cr map[string]any) map[string]any {
		return cr["spec"].(map[string]any)["master"].(map[string]any)
	}
	container := func(cr map[string]any, i int) map[string]any {
		return master(cr)["containers"].([]any)[i].(map[string]any)
	}
	addVolume := func(v map[string]any) func(map[string]any) {
		return func(cr map[string]any) {
			m := master(cr)
			vols, _ := m["volumes"].([]any)
			m["volumes"] = append(vols, v)
		}
	}
	cases := []struct {
		name, field string // field: what the error must name; "" = must decode
		edit        func(cr map[string]any)
	}{
		{"an emptyDir volume (valid)", "", addVolume(map[string]any{"name": "tmp", "emptyDir": map[string]any{}})},
		// Kubernetes 1.31's image volume source: unknown to k8s.io/api v0.30.
		{"an image volume", "image", addVolume(map[string]any{
			"name":  "homesnap",
			"image": map[string]any{"reference": "ghcr.io/homesnap/homesnap:0.1.0", "pullPolicy": "IfNotPresent"},
		})},
		{"init containers", "initContainers", func(cr map[string]any) {
			master(cr)["initContainers"] = []any{map[string]any{"name": "restore", "image": "ghcr.io/homesnap/homesnap:0.1.0"}}
		}},
		{"a native sidecar", "restartPolicy", func(cr map[string]any) { container(cr, 1)["restartPolicy"] = "Always" }},
		{"a startup probe", "startupProbe", func(cr map[string]any) {
			container(cr, 0)["startupProbe"] = map[string]any{"httpGet": map[string]any{"path": "/login", "port": "http"}}
		}},
		{"a misspelt field", "runAsUsr", func(cr map[string]any) {
			master(cr)["securityContext"].(map[string]any)["runAsUsr"] = 1000
		}},
		{"no imagePullPolicy", "imagePullPolicy", func(cr map[string]any) { delete(container(cr, 1), "imagePullPolicy") }},
		{"no jenkinsAPISettings", "jenkinsAPISettings", func(cr map[string]any) {
			delete(cr["spec"].(map[string]any), "jenkinsAPISettings")
		}},
	}
	files, err := filepath.Glob(examples)
	if err != nil || len(files) == 0 {
		t.Fatalf("no operator examples at %s (%v)", examples, err)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cr map[string]any
			if err := yaml.Unmarshal(data, &cr); err != nil {
				t.Fatal(err)
			}
			c.edit(cr)
			edited, err := yaml.Marshal(cr)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Decode(edited)
			if err != nil {
				t.Logf("refused: %v", err)
			}
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("%s with %s: %v", files[0], c.name, err)
			case c.field != "" && err == nil:
				t.Fatalf("%s with %s decoded; the operator's API has no such field", files[0], c.name)
			case c.field != "" && !strings.Contains(err.Error(), c.field):
				t.Fatalf("%s with %s: error %q does not name %s", files[0], c.name, err, c.field)
			}
		})
	}
}
