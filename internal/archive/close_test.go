package archive

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"testing"
)

// closeRecorder is a source that says whether it was closed.
type closeRecorder struct {
	io.Reader
	closed int
}

func (c *closeRecorder) Close() error { c.closed++; return nil }

// A manifest closed before its trailer closes its source (a store's
// response body), or the connection stays taken.
func TestManifestReaderCloseClosesItsSource(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewManifestWriter(&buf, Header{ID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		h := Hash(sha256.Sum256([]byte(fmt.Sprint(i))))
		if err := w.Write(&Entry{Path: fmt.Sprintf("f%04d", i), Type: TypeFile, Hash: &h}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Close(0, 0); err != nil {
		t.Fatal(err)
	}
	src := &closeRecorder{Reader: bytes.NewReader(buf.Bytes())}
	m, err := NewManifestReader(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Next(); err != nil {
		t.Fatal(err)
	}
	if src.closed != 0 {
		t.Fatal("the source was closed before the manifest was")
	}
	m.Close()
	if src.closed != 1 {
		t.Errorf("Close closed the source %d times, want once", src.closed)
	}
}
