package engine

import (
	"context"
	"io"
	"sync"

	"github.com/homesnap/homesnap/internal/store"
)

// upload streams writes into a store object through a pipe: the object is
// stored when finish returns nil and never becomes visible after abort.
type upload struct {
	pw   *io.PipeWriter
	done chan error
	n    int64
}

func newUpload(ctx context.Context, s store.Store, key string) *upload {
	pr, pw := io.Pipe()
	u := &upload{pw: pw, done: make(chan error, 1)}
	go func() {
		err := s.Put(ctx, key, pr)
		pr.CloseWithError(err) // unblock the writer if Put gave up early
		u.done <- err
	}()
	return u
}

func (u *upload) Write(p []byte) (int, error) {
	n, err := u.pw.Write(p)
	u.n += int64(n)
	return n, err
}

func (u *upload) finish() error {
	u.pw.Close()
	return <-u.done
}

// abort fails the upload with err (so no object appears) and returns err.
func (u *upload) abort(err error) error {
	u.pw.CloseWithError(err)
	<-u.done
	return err
}

// lazyUpload starts its upload on the first write, so that a snapshot that
// adds no bytes stores no archive.
type lazyUpload struct {
	ctx  context.Context
	st   store.Store
	key  string
	once sync.Once
	up   *upload
	n    int64
}

func (l *lazyUpload) Write(p []byte) (int, error) {
	l.once.Do(func() { l.up = newUpload(l.ctx, l.st, l.key) })
	n, err := l.up.Write(p)
	l.n += int64(n)
	return n, err
}

func (l *lazyUpload) started() bool { return l.up != nil }

func (l *lazyUpload) finish() error {
	if l.up == nil {
		return nil
	}
	return l.up.finish()
}

func (l *lazyUpload) abort(err error) error {
	if l.up == nil {
		return err
	}
	return l.up.abort(err)
}
