package crypt

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// An age file is a header, a 16-byte nonce, then the payload: the plaintext
// in chunks of 64 KiB, each sealed with ChaCha20-Poly1305 (16-byte tag)
// under a key derived from the file key and the nonce, with the chunk's
// index as nonce and a flag on the final chunk. Plaintext byte p therefore
// lives in chunk p/64Ki at a fixed ciphertext offset, and a ranged read
// fetches just the chunks that cover its range. The file key comes from
// age's own header decryption (age.DecryptHeader), once per object.
const (
	chunkSize    = 64 << 10
	sealedSize   = chunkSize + chacha20poly1305.Overhead
	nonceSize    = 16
	headerProbe  = 16 << 10 // first read of an object's header
	maxHeaderLen = 1 << 20  // a header is ~100 bytes per recipient
)

// payload is an opened age file: where its chunks start, and their key.
type payload struct {
	offset int64
	aead   cipher.AEAD
}

// open reads and decrypts the header of key's age file, once per object.
func (s *Store) open(ctx context.Context, key string) (*payload, error) {
	s.mu.Lock()
	p := s.headers[key]
	s.mu.Unlock()
	if p != nil {
		return p, nil
	}
	if len(s.identities) == 0 {
		if err := s.exists(ctx, key); err != nil {
			return nil, err
		}
		return nil, s.fail(key, nil)
	}
	var hdr, head []byte
	for probe := int64(headerProbe); ; probe *= 4 {
		rc, err := s.inner.Get(ctx, s.stored(key), 0, probe)
		if err != nil {
			return nil, err
		}
		head, err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		hdr, err = age.ExtractHeader(bytes.NewReader(head))
		if err == nil && len(head) >= len(hdr)+nonceSize {
			break
		}
		if int64(len(head)) < probe || probe >= maxHeaderLen {
			if err == nil {
				err = errors.New("no payload after the header")
			}
			return nil, s.fail(key, err)
		}
	}
	fileKey, err := age.DecryptHeader(hdr, s.identities...)
	if err != nil {
		return nil, s.fail(key, err)
	}
	nonce := head[len(hdr) : len(hdr)+nonceSize]
	streamKey, err := hkdf.Key(sha256.New, fileKey, nonce, "payload", chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.New(streamKey)
	if err != nil {
		return nil, err
	}
	p = &payload{offset: int64(len(hdr) + nonceSize), aead: aead}
	s.mu.Lock()
	if len(s.headers) >= maxHeaders {
		clear(s.headers)
	}
	s.headers[key] = p
	s.mu.Unlock()
	return p, nil
}

// exists reports a missing object as the store does (ErrNotExist).
func (s *Store) exists(ctx context.Context, key string) error {
	rc, err := s.inner.Get(ctx, s.stored(key), 0, 1)
	if err != nil {
		return err
	}
	return rc.Close()
}

// getRange returns length plaintext bytes of key from offset (length < 0:
// to the end), reading only the chunks that hold them.
func (s *Store) getRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 {
		return nil, fmt.Errorf("get %s: negative offset %d", s.name(key), offset)
	}
	p, err := s.open(ctx, key)
	if err != nil {
		return nil, err
	}
	if length == 0 {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	first := offset / chunkSize
	span := int64(-1)
	if length > 0 {
		last := (offset + length - 1) / chunkSize
		span = (last - first + 1) * sealedSize
	}
	body, err := s.inner.Get(ctx, s.stored(key), p.offset+first*sealedSize, span)
	if err != nil {
		return nil, err
	}
	return &chunkReader{s: s, key: key, body: body, aead: p.aead, index: first,
		skip: int(offset - first*chunkSize), left: length,
		buf: make([]byte, sealedSize), out: make([]byte, 0, chunkSize)}, nil
}

// chunkReader decrypts consecutive chunks of a payload from a ranged read.
type chunkReader struct {
	s     *Store
	key   string
	body  io.ReadCloser
	aead  cipher.AEAD
	index int64  // of the next chunk
	skip  int    // plaintext bytes to drop before the range starts
	left  int64  // plaintext bytes still wanted; < 0: to the end
	buf   []byte // one sealed chunk
	out   []byte // its plaintext: a failed Open may clobber its output, so never in place
	plain []byte // decrypted, not yet read
	read  bool   // a chunk was read
	final bool   // the final chunk was read: the object ends here
	err   error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.plain) == 0 {
		switch {
		case r.err != nil:
			return 0, r.err
		case r.left == 0 || r.final:
			return 0, io.EOF
		}
		r.err = r.next()
		if r.left >= 0 && int64(len(r.plain)) > r.left {
			r.plain = r.plain[:r.left]
		}
	}
	n := copy(p, r.plain)
	r.plain = r.plain[n:]
	if r.left >= 0 {
		r.left -= int64(n)
	}
	return n, nil
}

// next reads and opens one chunk. A short chunk must be the final one; a
// full chunk is the final one when it opens only with the final flag.
func (r *chunkReader) next() error {
	n, err := io.ReadFull(r.body, r.buf)
	switch {
	case err == io.EOF && !r.read:
		return io.EOF // the range starts past the end: a short read, as a plain store gives
	case err == io.EOF:
		return r.s.fail(r.key, fmt.Errorf("truncated before chunk %d", r.index))
	case err == io.ErrUnexpectedEOF:
	case err != nil:
		return r.s.fail(r.key, err)
	}
	r.read = true
	sealed := r.buf[:n]
	plain, err := r.aead.Open(r.out[:0], chunkNonce(r.index, false), sealed, nil)
	if err != nil {
		plain, err = r.aead.Open(r.out[:0], chunkNonce(r.index, true), sealed, nil)
		r.final = true
	} else if n < sealedSize {
		err = errors.New("a short chunk not marked final")
	}
	if err != nil {
		return r.s.fail(r.key, fmt.Errorf("chunk %d: %v", r.index, err))
	}
	r.index++
	if r.skip > len(plain) {
		return io.EOF // the range starts past the end
	}
	r.plain, r.skip = plain[r.skip:], 0
	return nil
}

// chunkNonce is age's STREAM nonce: the chunk index as an 11-byte big-endian
// counter, then 1 for the final chunk.
func chunkNonce(index int64, final bool) []byte {
	var n [chacha20poly1305.NonceSize]byte
	for i := 10; i >= 0 && index > 0; i-- {
		n[i] = byte(index)
		index >>= 8
	}
	if final {
		n[11] = 1
	}
	return n[:]
}

func (r *chunkReader) Close() error { return r.body.Close() }
