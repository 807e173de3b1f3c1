//go:build linux

package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/scan"
	"github.com/homesnap/homesnap/internal/selector"
)

// injectOverflow does what a real queue overflow does: the queued events
// are lost and IN_Q_OVERFLOW is read instead.
func (j *Journal) injectOverflow() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.drain(true)
	j.handle(-1, unix.IN_Q_OVERFLOW, 0, "")
}

func walkAll(t testing.TB, home string, sel *selector.Selector) []*archive.Entry {
	t.Helper()
	h, err := homefs.OpenHome(home) // closed at once: helpers run in loops
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var es []*archive.Entry
	if err := scan.Walk(context.Background(), h, sel, nil, func(e *archive.Entry) error {
		es = append(es, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return es
}

// tellLinked does what a snapshot's full walk does with the journal.
func tellLinked(j *Journal, es []*archive.Entry) {
	for _, e := range es {
		if e.Type == archive.TypeFile && e.Links > 1 {
			j.Linked(e.Path, e.Inode, e.CTime)
		}
	}
}

func rescanAll(t testing.TB, home string, sel *selector.Selector, base []*archive.Entry, ch *Changes) []*archive.Entry {
	t.Helper()
	h, err := homefs.OpenHome(home)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ch = resolve(t, ch, base)
	var es []*archive.Entry
	sb := &spanned{es: base, r: rand.New(rand.NewSource(int64(len(base)))), out: &es}
	if err := Rescan(context.Background(), h, sel, sb, ch, nil, func(e *archive.Entry) error {
		es = append(es, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return es
}

// spanned is a base that offers about half its entries in spans of 1 to
// 8, as a manifest's spans are offered where no later layer changes them.
// The entries of the spans Rescan passes over go to out where the rescan
// passed them, so out holds all that the rescan reports.
type spanned struct {
	es    []*archive.Entry
	r     *rand.Rand
	out   *[]*archive.Entry
	run   int           // entries left of the run being read
	offer *archive.Span // the span offered at es[0]
}

func (b *spanned) Span() (*archive.Span, error) {
	if b.run > 0 || len(b.es) == 0 {
		return nil, nil
	}
	if b.offer == nil {
		n := min(len(b.es), 1+b.r.Intn(8))
		if b.r.Intn(2) == 0 {
			b.run = n // read one by one
			return nil, nil
		}
		b.offer = &archive.Span{}
		for _, e := range b.es[:n] {
			b.offer.Add(e)
		}
	}
	return b.offer, nil
}

func (b *spanned) SkipSpan() error {
	if b.offer == nil || b.run > 0 {
		return errors.New("no span offered")
	}
	n := int(b.offer.Entries)
	*b.out = append(*b.out, b.es[:n]...)
	b.es, b.offer = b.es[n:], nil
	return nil
}

func (b *spanned) Next() (*archive.Entry, error) {
	if len(b.es) == 0 {
		return nil, io.EOF
	}
	if b.offer != nil { // a span begun: read one by one
		b.run, b.offer = int(b.offer.Entries), nil
	}
	e := b.es[0]
	b.es = b.es[1:]
	b.run = max(b.run-1, 0)
	return e, nil
}

// resolve turns ch's hard-linked inodes into the paths base has for them.
func resolve(t testing.TB, ch *Changes, base []*archive.Entry) *Changes {
	t.Helper()
	ch, err := ch.ResolveInodes(Entries(base))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// next takes the journal's changes and returns the entries they lead to,
// or a full walk when the journal asks for one (and why); that walk tells
// the journal of the files with several names, as a snapshot's does.
func next(t testing.TB, j *Journal, home string, sel *selector.Selector, base []*archive.Entry) ([]*archive.Entry, *FullWalkError) {
	t.Helper()
	ch, err := j.Take()
	var fw *FullWalkError
	if errors.As(err, &fw) {
		es := walkAll(t, home, sel)
		tellLinked(j, es)
		return es, fw
	}
	if err != nil {
		t.Fatal(err)
	}
	return rescanAll(t, home, sel, base, ch), nil
}

// trusted takes the journal's next interval, which must not ask for a
// full walk, and returns its rescan after checking it against a walk.
func trusted(t testing.TB, j *Journal, home string, sel *selector.Selector, base []*archive.Entry, step string) []*archive.Entry {
	t.Helper()
	got, fw := next(t, j, home, sel, base)
	if fw != nil {
		t.Fatalf("%s: %v", step, fw)
	}
	if ds := diff(walkAll(t, home, sel), got, 5); len(ds) > 0 {
		t.Fatalf("%s: journal + rescan differs from a walk:\n%s", step, strings.Join(ds, "\n"))
	}
	return got
}

// diff lists the differences between two walks, field by field (every
// field a walk fills in), at most max of them.
func diff(want, got []*archive.Entry, max int) []string {
	var out []string
	i, k := 0, 0
	for (i < len(want) || k < len(got)) && len(out) < max {
		switch {
		case k == len(got) || i < len(want) && archive.ComparePaths(want[i].Path, got[k].Path) < 0:
			out = append(out, "missing "+show(want[i]))
			i++
		case i == len(want) || archive.ComparePaths(want[i].Path, got[k].Path) > 0:
			out = append(out, "extra   "+show(got[k]))
			k++
		default:
			if a, b := show(want[i]), show(got[k]); a != b {
				out = append(out, "want    "+a+"\n    got     "+b)
			}
			i++
			k++
		}
	}
	return out
}

func show(e *archive.Entry) string {
	return fmt.Sprintf("%s type=%v mode=%v uid=%d gid=%d size=%d mtime=%d ctime=%d ino=%d dev=%d link=%q implied=%v",
		e.Path, e.Type, e.Mode, e.UID, e.GID, e.Size, e.MTime, e.CTime, e.Inode, e.Dev, e.Link, e.Implied)
}
