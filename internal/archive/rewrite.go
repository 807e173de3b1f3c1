package archive

import (
	"errors"
	"io"
)

// RewriteLayer copies one manifest (a full one or a delta layer) from r to
// w line for line, passing each entry through relocate, which may change
// where its bytes live (Archive, Offset, Length) and nothing else, and the
// trailer's archive list through archives. The header, the order, the
// deletion markers and the totals stay as they were, so every chain the
// layer belongs to resolves to the same tree with its bytes elsewhere (a
// repack). It returns how many entries relocate changed.
func RewriteLayer(r *ManifestReader, w io.Writer, relocate func(*Entry) bool, archives func([]string) []string) (int64, error) {
	mw, err := NewManifestWriter(w, r.Header)
	if err != nil {
		return 0, err
	}
	var moved int64
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return moved, err
		}
		if err := mw.order(e.Path); err != nil {
			return moved, err
		}
		if e.Type != TypeDeleted && relocate(e) {
			moved++
		}
		if err := mw.put(e); err != nil {
			return moved, err
		}
	}
	t := *r.Totals
	t.Archives, t.Lines = archives(t.Archives), mw.n
	if t.Archives == nil {
		t.Archives = []string{}
	}
	return moved, mw.finish(&t)
}
