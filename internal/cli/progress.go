package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"

	"github.com/homesnap/homesnap/internal/engine"
)

// ProgressConfig is how restore shows its progress.
type ProgressConfig struct {
	Progress string `envconfig:"HOMESNAP_PROGRESS" default:"auto" flag:"progress" oldenv:"HOMESNAP_RESTORE_PROGRESS" desc:"auto (a bar on a terminal, a log line every few seconds otherwise), bar, log or off"`
}

func (c ProgressConfig) validate() error {
	switch c.Progress {
	case "auto", "bar", "log", "off":
		return nil
	}
	return usageError{fmt.Errorf("--progress/HOMESNAP_PROGRESS %q: want auto, bar, log or off", c.Progress)}
}

// logEvery is how often the log variant reports.
const logEvery = 5 * time.Second

// reporter is an engine.Progress the CLI shows; stop shows the end.
type reporter interface {
	engine.Progress
	stop()
}

// newProgress returns the reporter mode asks for (nil: off). what names
// the work ("restore", "verify").
func newProgress(mode, what string, stderr io.Writer, log zerolog.Logger) reporter {
	if mode == "auto" {
		mode = "log"
		if f, ok := stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
			mode = "bar"
		}
	}
	switch mode {
	case "bar":
		return newBarProgress(what, stderr)
	case "log":
		return startLogProgress(what, log, logEvery)
	}
	return nil
}

// counts are a progress's totals so far.
type counts struct {
	files, filesTotal, bytes, bytesTotal atomic.Int64
}

func (c *counts) Planned(files, bytes int64) {
	c.filesTotal.Add(files)
	c.bytesTotal.Add(bytes)
}

func (c *counts) Done(files, bytes int64) {
	c.files.Add(files)
	c.bytes.Add(bytes)
}

// logProgress logs a progress line at info level every interval, and a
// last one when stopped: for logs collected off a terminal.
type logProgress struct {
	counts
	what  string
	log   zerolog.Logger
	start time.Time
	quit  chan struct{}
	wg    sync.WaitGroup
}

func startLogProgress(what string, log zerolog.Logger, every time.Duration) *logProgress {
	p := &logProgress{what: what, log: log, start: time.Now(), quit: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.line()
			}
		}
	}()
	return p
}

func (p *logProgress) line() {
	if p.filesTotal.Load() == 0 {
		return // nothing to do (yet): no noise
	}
	done := p.bytes.Load()
	rate := float64(done) / max(time.Since(p.start).Seconds(), 0.001)
	p.log.Info().Int64("files_done", p.files.Load()).Int64("files_total", p.filesTotal.Load()).
		Int64("bytes_done", done).Int64("bytes_total", p.bytesTotal.Load()).
		Int64("bytes_per_second", int64(rate)).Msg(p.what + " progress")
}

func (p *logProgress) stop() {
	close(p.quit)
	p.wg.Wait()
	p.line()
}

// barProgress draws a bar on a terminal: bytes, files, rate and ETA.
type barProgress struct {
	counts
	bar *progressbar.ProgressBar
	w   io.Writer
}

func newBarProgress(what string, w io.Writer) *barProgress {
	return &barProgress{bar: progressbar.NewOptions64(0,
		progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true), progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true),
		progressbar.OptionShowElapsedTimeOnFinish(), progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionUseIECUnits(true)), w: w}
}

func (p *barProgress) Planned(files, bytes int64) {
	p.counts.Planned(files, bytes)
	p.bar.AddMax64(bytes)
}

func (p *barProgress) Done(files, bytes int64) {
	p.counts.Done(files, bytes)
	if n := p.files.Load(); n%256 == 0 || n == p.filesTotal.Load() {
		p.describe()
	}
	p.bar.Add64(bytes)
}

func (p *barProgress) describe() {
	p.bar.Describe(fmt.Sprintf("%d/%d files", p.files.Load(), p.filesTotal.Load()))
}

func (p *barProgress) stop() {
	if p.filesTotal.Load() == 0 {
		p.bar.Exit() // nothing to do: nothing was drawn
		return
	}
	p.describe()
	if p.files.Load() < p.filesTotal.Load() {
		p.bar.Exit() // stopped short: the bar stays where it is
	} else {
		p.bar.Finish()
	}
	fmt.Fprintln(p.w) // the log continues below the bar
}

// progressOf returns r as the engine's option (a nil interface when off).
func progressOf(r reporter) engine.Progress {
	if r == nil {
		return nil
	}
	return r
}
