// Package metrics exposes the sidecar's Prometheus metrics, all named
// homesnap_*: how snapshots went, and what crossed the wire to the store
// (counted by wrapping the Store interface, so every backend is measured
// the same way without knowing about it).
package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/homesnap/homesnap/internal/archive"
	"github.com/homesnap/homesnap/internal/lease"
	"github.com/homesnap/homesnap/internal/repo"
	"github.com/homesnap/homesnap/internal/snapshot"
	"github.com/homesnap/homesnap/internal/store"
	"github.com/homesnap/homesnap/internal/version"
)

// Metrics holds the collectors of one process.
type Metrics struct {
	Registry *prometheus.Registry

	lastSuccess, lastAttempt  prometheus.Gauge
	duration                  prometheus.Histogram
	snapshots, failures       *prometheus.CounterVec
	entries, changed, deleted prometheus.Gauge
	archives, leaseHeld       prometheus.Gauge
	authenticated             prometheus.Gauge
	bytesRead, bytesStored    prometheus.Counter
	storeOps, storeBytes      *prometheus.CounterVec
	storeErrors               *prometheus.CounterVec
	repackBytes, repacked     prometheus.Counter
	journalModes, fallbacks   *prometheus.CounterVec
	journalWatches            prometheus.Gauge
	journalState              *prometheus.GaugeVec
	journalDifferences        prometheus.Counter
	linkedLeftOut             prometheus.Counter
	interval                  prometheus.Gauge

	// What the store holds, by kind: known once a listing said so, then
	// kept up to date by every put (contents guards both).
	contents                sync.Mutex
	contentsKnown           bool
	storeSize, storeObjects *prometheus.GaugeVec
}

// New registers the collectors (and the Go runtime's) on a fresh registry.
func New() *Metrics {
	r := prometheus.NewRegistry()
	f := func(c prometheus.Collector) { r.MustRegister(c) }
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "homesnap_" + name, Help: help})
		f(g)
		return g
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "homesnap_" + name, Help: help})
		f(c)
		return c
	}
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "homesnap_" + name, Help: help}, labels)
		f(c)
		return c
	}
	m := &Metrics{
		Registry:    r,
		lastSuccess: gauge("last_success_timestamp_seconds", "When the last snapshot attempt succeeded (committed, or found nothing changed)."),
		lastAttempt: gauge("last_attempt_timestamp_seconds", "When the last snapshot attempt ended."),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "homesnap_snapshot_duration_seconds", Help: "Duration of snapshot attempts.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 14),
		}),
		snapshots:   vec("snapshots_total", "Snapshot attempts by result: committed, unchanged, failed.", "result"),
		failures:    vec("failures_total", "Failed snapshot attempts by kind.", "kind"),
		entries:     gauge("files_scanned", "Paths the last snapshot selected."),
		changed:     gauge("files_changed", "Paths the last snapshot found new or changed."),
		deleted:     gauge("files_deleted", "Paths of the parent the last snapshot found gone."),
		archives:    gauge("head_archives", "Archives the newest snapshot references (what a restore reads)."),
		leaseHeld:   gauge("lease_held", "1 while this process holds the store's one-writer lease."),
		bytesRead:   counter("home_read_bytes_total", "Bytes of changed files read from the home."),
		bytesStored: counter("stored_bytes_total", "Archive bytes written to the store, as stored: compressed, and encrypted when the store is (snapshots and consolidations)."),
		storeOps:    vec("store_operations_total", "Store operations by kind.", "op"),
		storeErrors: vec("store_errors_total", "Failed store operations by kind.", "op"),
		storeBytes:  vec("store_bytes_total", "Bytes transferred to and from the store.", "direction"),
		repackBytes: counter("repack_written_bytes_total", "Bytes of the archives repacks wrote (the kept snapshots' live files copied out of mostly dead archives)."),
		repacked:    counter("repacked_archives_total", "Archives repacks replaced; prune deletes them after the repack grace period."),
	}
	m.journalModes = vec("journal_snapshots_total", "Successful snapshots of a sidecar with the change journal, by how they read the home: journal (only what changed), walk (a full walk: see journal_fallbacks_total), verify (the scheduled verification walk).", "mode")
	m.fallbacks = vec("journal_fallbacks_total", "Snapshots that walked the whole home although the change journal is on, by reason.", "reason")
	m.journalWatches = gauge("journal_watches", "Inotify watches the change journal holds (each costs about 1 KiB of kernel memory; fs.inotify.max_user_watches bounds them).")
	m.journalState = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "homesnap_journal_state",
		Help: "1 for the change journal's state, 0 for the others: opening (snapshots walk the whole home until it is open), on, off (--journal=off, or it could not be opened: the log says why)."}, []string{"state"})
	f(m.journalState)
	m.journalDifferences = counter("journal_differences_total", "Paths a verification walk found otherwise than the change journal said (the walk's entries were stored).")
	m.linkedLeftOut = counter("linked_left_out_total", "Hard-linked files of another owner than the home's user that a sidecar running as root left out of snapshots (each logged; SECURITY.md).")
	m.authenticated = gauge("store_authenticated", "1 when the sidecar authenticates the store (an age identity or HOMESNAP_AUTH_KEY_FILE), 0 when anyone who can write to the bucket decides what a restore puts in the home.")
	m.interval = gauge("snapshot_interval_seconds", "The sidecar's --interval: alerts measure lateness in intervals.")
	m.storeSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "homesnap_store_bytes",
		Help: "Bytes the store holds by kind of object (archive, manifest, record, tag), as stored: from the listing of the last prune (or one at the sidecar's first snapshot), plus what was written since."}, []string{"kind"})
	m.storeObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "homesnap_store_objects",
		Help: "Objects the store holds by kind, counted as homesnap_store_bytes."}, []string{"kind"})
	f(m.storeSize)
	f(m.storeObjects)
	f(m.duration)
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f(buildInfo())
	return m
}

// buildInfo is the constant 1 labelled with the running build, so a
// dashboard can show which release each sidecar runs.
func buildInfo() prometheus.Collector {
	i := version.Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "homesnap_build_info",
		Help: "Always 1; the labels name the build: version, revision and the Go version it was built with.",
		ConstLabels: prometheus.Labels{
			"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion,
		},
	}, func() float64 { return 1 })
}

// Observe records one snapshot attempt.
func (m *Metrics) Observe(start, end time.Time, res *snapshot.Result, err error) {
	m.lastAttempt.Set(float64(end.Unix()))
	m.duration.Observe(end.Sub(start).Seconds())
	switch {
	case err != nil:
		m.snapshots.WithLabelValues("failed").Inc()
		m.failures.WithLabelValues(Kind(err)).Inc()
		return
	case res.Unchanged:
		m.snapshots.WithLabelValues("unchanged").Inc()
	default:
		m.snapshots.WithLabelValues("committed").Inc()
		m.entries.Set(float64(res.Totals.Entries))
		m.changed.Set(float64(res.Totals.New))
		m.deleted.Set(float64(res.Deleted))
		m.archives.Set(float64(len(res.Totals.Archives)))
		m.bytesRead.Add(float64(res.Totals.NewBytes))
	}
	m.linkedLeftOut.Add(float64(res.LinkedLeftOut))
	if j := res.ChangeJournal; j != nil {
		m.journalModes.WithLabelValues(j.Mode).Inc()
		if j.Fallback != "" {
			m.fallbacks.WithLabelValues(j.Fallback).Inc()
		}
		m.journalDifferences.Add(float64(j.Differences))
		m.journalWatches.Set(float64(j.Watches))
	}
	m.lastSuccess.Set(float64(end.Unix()))
}

// Repacked records one repack; a nil Metrics records nothing.
func (m *Metrics) Repacked(written int64, archives int) {
	if m == nil {
		return
	}
	m.repackBytes.Add(float64(written))
	m.repacked.Add(float64(archives))
}

// Interval records the sidecar's schedule.
func (m *Metrics) Interval(d time.Duration) { m.interval.Set(d.Seconds()) }

// The change journal's states (JournalState).
const (
	JournalOpening = "opening"
	JournalOn      = "on"
	JournalOff     = "off"
)

// JournalState records the change journal's state: one of the constants
// above.
func (m *Metrics) JournalState(state string) {
	for _, s := range []string{JournalOpening, JournalOn, JournalOff} {
		v := 0.0
		if s == state {
			v = 1
		}
		m.journalState.WithLabelValues(s).Set(v)
	}
}

// StoreAuthenticated records whether the store's snapshots are tagged
// and checked with a key.
func (m *Metrics) StoreAuthenticated(yes bool) { m.authenticated.Set(one(yes)) }

// LeaseHeld records whether this process holds the store's lease.
func (m *Metrics) LeaseHeld(held bool) { m.leaseHeld.Set(one(held)) }

func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Kind names the class of a failure for alerts.
func Kind(err error) string {
	switch {
	case errors.Is(err, snapshot.ErrShrunk):
		return "shrink_refused"
	case errors.Is(err, snapshot.ErrBehind):
		return "home_behind"
	case errors.Is(err, lease.ErrLost):
		return "lease_lost"
	case errors.Is(err, store.ErrPrecondition):
		return "conflict"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, archive.ErrCorrupt):
		return "corrupt"
	case errors.Is(err, store.ErrNotExist):
		return "missing_object"
	}
	return "other"
}

// Store wraps s so that every operation, error and byte is counted. Wrap
// the backend itself, beneath any encryption, so that the bytes counted
// are those stored.
func (m *Metrics) Store(s store.Store) store.Store { return &metered{Store: s, m: m} }

type metered struct {
	store.Store
	m *Metrics
}

func (s *metered) Unwrap() store.Store { return s.Store }

func (s *metered) op(name string, err error) error {
	s.m.storeOps.WithLabelValues(name).Inc()
	if err != nil && !errors.Is(err, store.ErrNotExist) {
		s.m.storeErrors.WithLabelValues(name).Inc()
	}
	return err
}

func (s *metered) Put(ctx context.Context, key string, r io.Reader) error {
	c := &counting{r: r, c: s.m.storeBytes.WithLabelValues("out")}
	err := s.Store.Put(ctx, key, c)
	if h, ok := repo.ParseKey(key); err == nil && ok {
		if h.Kind == repo.KindArchive {
			s.m.bytesStored.Add(float64(c.n))
		}
		s.m.added(h.Kind, c.n)
	}
	return s.op("put", err)
}

func (s *metered) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	rc, err := s.Store.Get(ctx, key, offset, length)
	if s.op("get", err) != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{&counting{r: rc, c: s.m.storeBytes.WithLabelValues("in")}, rc}, nil
}

func (s *metered) List(ctx context.Context, prefix string, fn func(store.Object) error) error {
	return s.op("list", s.Store.List(ctx, prefix, fn))
}

func (s *metered) Delete(ctx context.Context, keys ...string) error {
	return s.op("delete", s.Store.Delete(ctx, keys...))
}

func (s *metered) Load(ctx context.Context, key string) ([]byte, store.Version, error) {
	data, v, err := s.Store.Load(ctx, key)
	s.m.storeBytes.WithLabelValues("in").Add(float64(len(data)))
	return data, v, s.op("load", err)
}

func (s *metered) Swap(ctx context.Context, key string, data []byte, old store.Version) (store.Version, error) {
	v, err := s.Store.Swap(ctx, key, data, old)
	s.m.storeBytes.WithLabelValues("out").Add(float64(len(data)))
	return v, s.op("swap", err)
}

type counting struct {
	r io.Reader
	c prometheus.Counter
	n int64
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.c.Add(float64(n))
	c.n += int64(n)
	return n, err
}

// StoreContentsKnown reports whether a listing has set the store's
// contents yet (StoreContents).
func (m *Metrics) StoreContentsKnown() bool {
	m.contents.Lock()
	defer m.contents.Unlock()
	return m.contentsKnown
}

// StoreContents sets homesnap_store_bytes and homesnap_store_objects from
// a listing of every object snapshots write; puts through the metered
// store add to them from then on. Objects of no kind snapshots write are
// left out.
func (m *Metrics) StoreContents(objects []store.Object) {
	m.contents.Lock()
	defer m.contents.Unlock()
	m.contentsKnown = true
	for _, k := range kinds {
		m.storeSize.WithLabelValues(kindName(k)).Set(0)
		m.storeObjects.WithLabelValues(kindName(k)).Set(0)
	}
	for _, o := range objects {
		if h, ok := repo.ParseKey(o.Key); ok {
			m.storeSize.WithLabelValues(kindName(h.Kind)).Add(float64(o.Size))
			m.storeObjects.WithLabelValues(kindName(h.Kind)).Inc()
		}
	}
}

// added counts an object written, once the contents are known (before,
// the listing that sets them will count it).
func (m *Metrics) added(k repo.Kind, n int64) {
	m.contents.Lock()
	defer m.contents.Unlock()
	if m.contentsKnown {
		m.storeSize.WithLabelValues(kindName(k)).Add(float64(n))
		m.storeObjects.WithLabelValues(kindName(k)).Inc()
	}
}

var kinds = []repo.Kind{repo.KindArchive, repo.KindManifest, repo.KindRecord, repo.KindTag}

func kindName(k repo.Kind) string {
	switch k {
	case repo.KindArchive:
		return "archive"
	case repo.KindManifest:
		return "manifest"
	case repo.KindRecord:
		return "record"
	case repo.KindTag:
		return "tag"
	}
	return "other"
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}
