package fetch

import (
	"testing"

	"github.com/homesnap/homesnap/internal/archive"
)

// Runs are formed while the manifest streams; offsets that go backwards
// within an archive only start a new run.
func TestRunFormingToleratesAnyOrder(t *testing.T) {
	e := func(off, n int64) *archive.Entry {
		return &archive.Entry{Path: "f", Type: archive.TypeFile, Archive: "a", Offset: off, Length: n, Size: n}
	}
	rn := newRun(e(100, 10))
	if !rn.add(e(120, 10)) || rn.end != 130 {
		t.Fatalf("a close entry was not added: %+v", rn)
	}
	if !rn.add(e(105, 5)) || rn.end != 130 {
		t.Fatalf("an entry inside the run was not added: %+v", rn)
	}
	if rn.add(e(50, 10)) {
		t.Fatal("an entry before the run's start was added")
	}
	if rn.add(e(130+maxGap+1, 10)) {
		t.Fatal("an entry past the gap was added")
	}
	if rn.add(e(130, maxRun)) {
		t.Fatal("the run grew past maxRun")
	}
	if len(rn.entries) != 3 {
		t.Fatalf("entries: %d", len(rn.entries))
	}
}

// A run of many tiny files stops at maxRunFiles entries, whatever its byte
// span: the entries of every run in flight are held in memory.
func TestRunHoldsAtMostMaxRunFiles(t *testing.T) {
	e := func(off int64) *archive.Entry {
		return &archive.Entry{Path: "f", Type: archive.TypeFile, Archive: "a", Offset: off, Length: 1, Size: 1}
	}
	rn := newRun(e(0))
	for i := int64(1); i < maxRunFiles; i++ {
		if !rn.add(e(i)) {
			t.Fatalf("entry %d of a %d-byte run was refused", i, i)
		}
	}
	if rn.add(e(maxRunFiles)) {
		t.Fatalf("the run grew past %d files", maxRunFiles)
	}
}
