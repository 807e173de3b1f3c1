package store

import (
	"fmt"
	"testing"
)

// backend is a bottom layer: it wraps nothing.
type backend struct{ Store }

// over is a layer of some other package, stacked on any store.
type over struct{ Store }

func (o over) Unwrap() Store { return o.Store }

// TestAsFindsALayerWhereverItSits: a layer inserted above the one looked
// for does not hide it, and Beneath returns what that layer wraps.
func TestAsFindsALayerWhereverItSits(t *testing.T) {
	b := backend{}
	c := Checked(b)
	for _, s := range []Store{c, over{c}, over{over{c}}} {
		got, ok := As[checked](s)
		if !ok || got != c {
			t.Errorf("As[checked](%T) = %v, %v; want the Checked layer", s, got, ok)
		}
		if got := Beneath[checked](s); got != Store(b) {
			t.Errorf("Beneath[checked](%T) = %T, want the backend", s, got)
		}
	}
	if _, ok := As[over](c); ok {
		t.Error("As found a layer the stack does not hold")
	}
	if got := Beneath[over](c); got != c {
		t.Errorf("Beneath a layer the stack does not hold = %T, want the stack itself", got)
	}
	var names []string
	for _, l := range Layers(over{c}) {
		names = append(names, fmt.Sprintf("%T", l))
	}
	if fmt.Sprint(names) != "[store.over store.checked store.backend]" {
		t.Errorf("Layers = %v", names)
	}
}
