package operatorcheck

import (
	"fmt"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"
)

// Decode reads one Jenkins resource as the operator's CRD would take it:
// a field the operator's API does not have is an error (the API server
// rejects it under kubectl's strict field validation, or prunes it), and so
// is a field the CRD marks required left out.
func Decode(data []byte) (*Jenkins, error) {
	var cr Jenkins
	if err := yaml.UnmarshalStrict(data, &cr); err != nil {
		return nil, err
	}
	if cr.APIVersion != APIVersion || cr.Kind != Kind {
		return nil, fmt.Errorf("apiVersion %q kind %q, want %s %s", cr.APIVersion, cr.Kind, APIVersion, Kind)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if err := required(reflect.TypeOf(cr), doc, ""); err != nil {
		return nil, err
	}
	return &cr, nil
}

// required reports the first field of the operator's own types that is
// absent from doc although its CRD requires it. controller-gen makes every
// field without omitempty required; the Kubernetes types inside are left to
// their own rules (the strict decoding has checked their field names).
func required(t reflect.Type, doc any, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() != reflect.TypeOf(Jenkins{}).PkgPath() && t.Kind() != reflect.Slice {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice:
		items, _ := doc.([]any)
		for i, item := range items {
			if err := required(t.Elem(), item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		fields, _ := doc.(map[string]any)
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" { // inline: TypeMeta, ObjectMeta
				continue
			}
			at := strings.TrimPrefix(path+"."+name, ".")
			v, ok := fields[name]
			if !ok {
				if !strings.Contains(opts, "omitempty") {
					return fmt.Errorf("%s: required by the operator's CRD, missing", at)
				}
				continue
			}
			if err := required(f.Type, v, at); err != nil {
				return err
			}
		}
	}
	return nil
}
