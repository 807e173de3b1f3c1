package snapshot

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckShrink(t *testing.T) {
	home := census{files: 100, bytes: 1000, top: map[string]int64{"jobs": 90, "secrets": 5, "nodes": 5}}
	vital := []string{"secrets", "nodes"}
	for _, c := range []struct {
		name string
		next census
		want string // substring of the refusal; "" for accepted
	}{
		{"same", home, ""},
		{"grew", census{files: 300, bytes: 9000, top: home.top}, ""},
		{"lost exactly half the files", census{files: 50, bytes: 900, top: home.top}, ""},
		{"lost over half the files", census{files: 49, bytes: 900, top: home.top}, "files 100 → 49"},
		{"lost over half the bytes", census{files: 90, bytes: 499, top: home.top}, "bytes 1000 → 499"},
		{"emptied", census{}, "files 100 → 0, bytes 1000 → 0, secrets/ vanished, nodes/ vanished"},
		{"secrets gone", census{files: 95, bytes: 990, top: map[string]int64{"jobs": 90, "nodes": 5}}, "secrets/ vanished"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkShrink(home, c.next, vital)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (!errors.Is(err, ErrShrunk) || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want a refusal naming %q", err, c.want)
			}
		})
	}
	// A first snapshot, or a parent that never had the vital paths, is
	// never a shrink.
	if err := checkShrink(census{}, census{}, vital); err != nil {
		t.Errorf("empty parent: %v", err)
	}
	if err := checkShrink(census{files: 1, top: map[string]int64{"jobs": 1}}, census{files: 1, top: map[string]int64{"jobs": 1}}, vital); err != nil {
		t.Errorf("no vital paths in the parent: %v", err)
	}
}
