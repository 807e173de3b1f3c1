// Package lease makes one process the writer of a store: a small object
// naming its holder and an expiry, taken and renewed with the store's
// compare-and-swap. A second sidecar waits and takes over once the lease
// expires; a holder that loses its lease is fenced: the Store it writes
// through refuses to move the head or delete anything.
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/store"
)

// Key is the lease object, beside the head.
const Key = repo.LeaseKey

// Holder names a writer for people: which pod, host and process.
type Holder struct {
	ID  string `json:"id"` // random per process: tells two holders on one host apart
	Pod string `json:"pod,omitempty"`
	// Namespace: two StatefulSets named alike in two namespaces have pods
	// of the same name (jenkins-0), each its container's pid 1.
	Namespace string `json:"namespace,omitempty"`
	Host      string `json:"host"`
	PID       int    `json:"pid"`
}

func (h Holder) String() string {
	name := h.Host
	if h.Pod != "" {
		name = h.Pod
		if h.Namespace != "" {
			name = h.Namespace + "/" + h.Pod
		}
	}
	return fmt.Sprintf("%s (pid %d)", name, h.PID)
}

// Me describes this process; POD_NAME and POD_NAMESPACE (the downward
// API) name the pod.
func Me() Holder {
	host, _ := os.Hostname()
	return Holder{ID: repo.NewID(time.Now()), Pod: os.Getenv("POD_NAME"), Namespace: os.Getenv("POD_NAMESPACE"),
		Host: host, PID: os.Getpid()}
}

// record is the lease object's content.
type record struct {
	Holder  Holder    `json:"holder"`
	Expires time.Time `json:"expires"`
}

// HeldError says another live holder has the lease.
type HeldError struct {
	Holder  Holder
	Expires time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("another snapshot process, %s, holds the store's lease until %s: one writer per store prefix; waiting for it to stop or its lease to expire", e.Holder, e.Expires.UTC().Format(time.RFC3339))
}

// ErrLost means this process's lease was taken over (it expired while the
// process was stalled): it must stop writing.
var ErrLost = errors.New("the store's lease was lost to another writer")

// Lease is this process's claim on a store.
type Lease struct {
	st  store.Store
	me  Holder
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	version store.Version // of the lease object when we hold it; "" when not
	expires time.Time
}

// New prepares a lease on st for me, valid ttl after each renewal; now is
// the clock (nil: time.Now).
func New(st store.Store, me Holder, ttl time.Duration, now func() time.Time) *Lease {
	if now == nil {
		now = time.Now
	}
	return &Lease{st: st, me: me, ttl: ttl, now: now}
}

// Acquire takes or renews the lease. It returns a *HeldError while another
// holder's lease is live, and ErrLost when ours was taken over.
func (l *Lease) Acquire(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	data, v, err := l.st.Load(ctx, Key)
	if errors.Is(err, store.ErrNotExist) {
		// Never write into a prefix that holds something else.
		if err := repo.CheckMarker(ctx, l.st); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	now := l.now()
	if err == nil {
		var cur record
		if jerr := json.Unmarshal(data, &cur); jerr == nil && cur.Holder.ID != l.me.ID && now.Before(cur.Expires) {
			lost := l.version != ""
			l.version = ""
			if lost {
				return fmt.Errorf("%w: %s holds it now", ErrLost, cur.Holder)
			}
			return &HeldError{Holder: cur.Holder, Expires: cur.Expires}
		}
		// Ours, expired, or garbage: take it at the version we read.
	}
	next := record{Holder: l.me, Expires: now.Add(l.ttl)}
	body, _ := json.Marshal(next)
	nv, err := store.CompareAndSwap(ctx, l.st, Key, body, v)
	if errors.Is(err, store.ErrPrecondition) {
		l.version = ""
		return &HeldError{Holder: Holder{Host: "another process"}, Expires: now.Add(l.ttl)}
	}
	if err != nil {
		return err
	}
	l.version, l.expires = nv, next.Expires
	return nil
}

// Check returns nil while this process holds a lease that has not expired
// and that nobody replaced: the fence before every head move and delete.
func (l *Lease) Check(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.version == "" {
		return fmt.Errorf("%w: not holding it", ErrLost)
	}
	if !l.now().Before(l.expires) {
		return fmt.Errorf("%w: it expired at %s before it was renewed", ErrLost, l.expires.UTC().Format(time.RFC3339))
	}
	_, v, err := l.st.Load(ctx, Key)
	if err != nil {
		return fmt.Errorf("check the store's lease: %w", err)
	}
	if v != l.version {
		l.version = ""
		return fmt.Errorf("%w: %s was rewritten by another process", ErrLost, repo.Name(l.st, Key))
	}
	return nil
}

// Held reports whether this process believes it holds the lease.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.version != "" && l.now().Before(l.expires)
}

// Release gives the lease up at once (the pod is stopping), so the next
// pod need not wait for it to expire. Losing it in between is not an error.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.version == "" {
		return nil
	}
	body, _ := json.Marshal(record{Holder: l.me, Expires: l.now()})
	defer func() { l.version = "" }()
	// Retried within ctx: a lease left behind by one dropped connection
	// would refuse the next writer for a whole TTL. A retry after a swap
	// that landed finds the version moved, which is success too.
	for wait := 50 * time.Millisecond; ; wait *= 2 {
		_, err := l.st.Swap(ctx, Key, body, l.version)
		if err == nil || errors.Is(err, store.ErrPrecondition) {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// Fence wraps st so that moving the head and deleting objects first check
// that this process still holds the lease.
func (l *Lease) Fence(st store.Store) store.Store { return &fenced{Store: st, l: l} }

type fenced struct {
	store.Store
	l *Lease
}

func (f *fenced) Unwrap() store.Store { return f.Store }

func (f *fenced) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	if key == repo.HeadKey {
		if err := f.l.Check(ctx); err != nil {
			return "", err
		}
	}
	return f.Store.Swap(ctx, key, data, old)
}

func (f *fenced) Delete(ctx context.Context, keys ...string) error {
	if err := f.l.Check(ctx); err != nil {
		return err
	}
	return f.Store.Delete(ctx, keys...)
}
