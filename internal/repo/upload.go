package repo

import (
	"context"
	"io"
	"sync"

	"github.com/homesnap/homesnap/internal/store"
)

// An Upload streams writes into a store object through a pipe: the object
// is stored when Finish returns nil and never becomes visible after Abort.
type Upload struct {
	pw   *io.PipeWriter
	done chan error
	n    int64
}

// NewUpload starts storing key.
func NewUpload(ctx context.Context, s store.Store, key string) *Upload {
	pr, pw := io.Pipe()
	u := &Upload{pw: pw, done: make(chan error, 1)}
	go func() {
		err := s.Put(ctx, key, pr)
		pr.CloseWithError(err) // unblock the writer if Put gave up early
		u.done <- err
	}()
	return u
}

func (u *Upload) Write(p []byte) (int, error) {
	n, err := u.pw.Write(p)
	u.n += int64(n)
	return n, err
}

// Written is how many bytes were written so far.
func (u *Upload) Written() int64 { return u.n }

// Finish ends the object and waits for the store to keep it.
func (u *Upload) Finish() error {
	u.pw.Close()
	return <-u.done
}

// Abort fails the upload with err (so no object appears) and returns err.
func (u *Upload) Abort(err error) error {
	u.pw.CloseWithError(err)
	<-u.done
	return err
}

// A LazyUpload starts its upload on the first write, so that a snapshot
// that adds no bytes stores no archive.
type LazyUpload struct {
	ctx  context.Context
	st   store.Store
	key  string
	once sync.Once
	up   *Upload
	n    int64
}

// NewLazyUpload prepares storing key on the first write.
func NewLazyUpload(ctx context.Context, s store.Store, key string) *LazyUpload {
	return &LazyUpload{ctx: ctx, st: s, key: key}
}

func (l *LazyUpload) Write(p []byte) (int, error) {
	l.once.Do(func() { l.up = NewUpload(l.ctx, l.st, l.key) })
	n, err := l.up.Write(p)
	l.n += int64(n)
	return n, err
}

// Started reports whether anything was written.
func (l *LazyUpload) Started() bool { return l.up != nil }

// Written is how many bytes were written so far.
func (l *LazyUpload) Written() int64 { return l.n }

// Finish ends the object, if one was started.
func (l *LazyUpload) Finish() error {
	if l.up == nil {
		return nil
	}
	return l.up.Finish()
}

// Abort fails the upload, if one was started, and returns err.
func (l *LazyUpload) Abort(err error) error {
	if l.up == nil {
		return err
	}
	return l.up.Abort(err)
}
