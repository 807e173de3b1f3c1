package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/runner"
	"github.com/homesnap/homesnap/internal/snapshot"
)

func TestTriggerToken(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const tok = "0123456789abcdef0123"
	for _, c := range []struct {
		name      string
		sidecar   Sidecar
		want, bad string // the token, or what the error says
	}{
		{name: "none: the endpoint is off"},
		{name: "a Secret's file, final newline dropped", sidecar: Sidecar{TokenFile: file("ok", tok+"\n")}, want: tok},
		{name: "the variable", sidecar: Sidecar{Token: " " + tok + " "}, want: tok},
		{name: "both", sidecar: Sidecar{TokenFile: file("both", tok), Token: tok}, bad: "set twice"},
		{name: "too short", sidecar: Sidecar{Token: "hunter2"}, bad: "at least 16"},
		{name: "two lines", sidecar: Sidecar{TokenFile: file("lines", tok+"\n"+tok)}, bad: "one line"},
		{name: "empty file", sidecar: Sidecar{TokenFile: file("empty", "\n")}, bad: "at least 16"},
		{name: "missing file", sidecar: Sidecar{TokenFile: filepath.Join(dir, "absent")}, bad: "absent"},
		{name: "not a token file", sidecar: Sidecar{TokenFile: file("big", strings.Repeat("x", 5<<10))}, bad: "over 4 KiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.sidecar.token()
			switch {
			case c.bad != "":
				var u usageError
				if !errors.As(err, &u) || !strings.Contains(err.Error(), c.bad) {
					t.Errorf("%v, want a usage error saying %q", err, c.bad)
				}
				if err != nil && strings.Contains(err.Error(), tok) {
					t.Errorf("the error shows the token: %v", err)
				}
			case err != nil || string(got) != c.want:
				t.Errorf("%q %v, want %q", got, err, c.want)
			}
		})
	}
}

// The token's variable has no flag (flags show in ps) and --help names it.
func TestTriggerTokenHasNoFlag(t *testing.T) {
	var cfg snapshotConfig
	if _, err := load("snapshot", "", &cfg, []string{"--trigger-token", "x"}, io.Discard); err == nil {
		t.Error("--trigger-token accepted: a token on the command line shows in ps")
	}
	var help strings.Builder
	load("snapshot", "", &cfg, []string{"--help"}, &help)
	for _, want := range []string{"--trigger-token-file", "HOMESNAP_TRIGGER_TOKEN]", "--trigger-min-interval", "--listen-max-connections", "--keep-on-demand"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("--help lacks %s", want)
		}
	}
}

func TestListenerSettingsAreValidated(t *testing.T) {
	for _, args := range [][]string{
		{"--listen-max-connections", "0"},
		{"--trigger-min-interval", "-1s"},
		{"--keep-on-demand", "-1"},
	} {
		var cfg snapshotConfig
		if _, err := load("snapshot", "", &cfg, args, io.Discard); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var ue usageError
		if err := cfg.validate(); !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// secretVolume lays a file out as the kubelet mounts a Secret's key:
// name → ..data/name, ..data → a directory named by the time, swapped
// atomically on every update.
type secretVolume struct {
	t   *testing.T
	dir string
	n   int
}

func newSecretVolume(t *testing.T, name, content string) (*secretVolume, string) {
	v := &secretVolume{t: t, dir: t.TempDir()}
	v.publish(map[string]string{name: content})
	if err := os.Symlink(filepath.Join("..data", name), filepath.Join(v.dir, name)); err != nil {
		t.Fatal(err)
	}
	return v, filepath.Join(v.dir, name)
}

// publish writes a new version of the Secret as the kubelet's atomic
// writer does: a new directory, ..data swapped to it by a rename, the old
// directory removed.
func (v *secretVolume) publish(files map[string]string) {
	t := v.t
	v.n++
	ts := fmt.Sprintf("..2026_12_06_08_00_%02d.%09d", v.n, v.n)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(v.dir, ts, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	if err := os.Symlink(ts, filepath.Join(v.dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(v.dir, "..data_tmp"), filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		os.RemoveAll(filepath.Join(v.dir, old))
	}
}

// syncLog is a log sink the listener's goroutines may write to.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Issue 31: the trigger token was read once at start, so rotating its
// Secret needed a restart and the old token kept working. Now the token
// file is read again when it changes, as a peer on the port sees; one
// that turns empty or unreadable refuses every request until fixed.
func TestTriggerTokenRotatesWithTheSecret(t *testing.T) {
	const (
		old   = "0ld-token-0123456789abcdef"
		fresh = "n3w-token-0123456789abcdef"
		third = "thr33-token-0123456789abcdef"
	)
	vol, path := newSecretVolume(t, "token", old+"\n")
	logs := &syncLog{}
	log := zerolog.New(logs)
	src, err := (&Sidecar{TokenFile: path}).tokenSource(log)
	if err != nil {
		t.Fatal(err)
	}
	taken := make(chan string, 16)
	r := runner.New(runner.Options{Interval: time.Hour, Log: log,
		Take: func(_ context.Context, trigger string, _ *snapshot.ChangeJournal) (*snapshot.Result, error) {
			taken <- trigger
			return &snapshot.Result{ID: "x"}, nil
		}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := runner.Serve(ln, r, runner.Listen{Token: src, Log: log})
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-taken // the first, scheduled

	post := func(tok string) int {
		t.Helper()
		for range 200 {
			req, _ := http.NewRequest("POST", "http://"+srv.Addr().String()+"/snapshot", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusConflict { // the last one still finishing
				if resp.StatusCode == http.StatusAccepted {
					<-taken
				}
				return resp.StatusCode
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("the runner stayed busy")
		return 0
	}
	want := func(step, tok string, code int) {
		t.Helper()
		if got := post(tok); got != code {
			t.Errorf("%s: POST /snapshot with the token %.5s…: %d, want %d", step, tok, got, code)
		}
	}
	want("before the rotation", old, http.StatusAccepted)
	vol.publish(map[string]string{"token": fresh + "\n"})
	want("after the rotation", old, http.StatusUnauthorized)
	want("after the rotation", fresh, http.StatusAccepted)

	vol.publish(map[string]string{"token": "\n"}) // emptied
	want("the file emptied", fresh, http.StatusServiceUnavailable)
	want("the file emptied", "", http.StatusServiceUnavailable)
	vol.publish(map[string]string{"other": "x"}) // the key gone: a dangling link
	want("the file gone", fresh, http.StatusServiceUnavailable)
	if n := strings.Count(logs.String(), "cannot be used: POST /snapshot is refused"); n != 2 {
		t.Errorf("the log says %d times that the token file cannot be used, want 2 (once per change):\n%s", n, logs.String())
	}

	vol.publish(map[string]string{"token": third})
	want("fixed", fresh, http.StatusUnauthorized)
	want("fixed", third, http.StatusAccepted)
	for _, tok := range []string{old, fresh, third} {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("the log holds a token:\n%s", logs.String())
		}
	}
}
