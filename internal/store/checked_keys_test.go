package store

import "testing"

func TestCheckKey(t *testing.T) {
	for _, bad := range []string{"", "/a", "a//b", "a/", "../a", "a/../b", "."} {
		if CheckKey(bad) == nil {
			t.Errorf("CheckKey(%q) = nil", bad)
		}
	}
	if err := CheckKey("jobs/a b/ü+x"); err != nil {
		t.Error(err)
	}
}
