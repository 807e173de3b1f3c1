package restore_test

import (
	"reflect"
	"testing"

	"github.com/homesnap/homesnap/internal/restore"
)

// TestOptionsAreAllExplicit: everything that steers a restore is an input
// its caller sets and can see; what the decision derives (delta, the
// record read meanwhile, the recovery done) travels apart, never as a
// hidden field of Options that one entry point sets for another.
func TestOptionsAreAllExplicit(t *testing.T) {
	typ := reflect.TypeFor[restore.Options]()
	for f := range typ.Fields() {
		if !f.IsExported() {
			t.Errorf("restore.Options.%s is unexported: a back channel the caller cannot set", f.Name)
		}
	}
}
