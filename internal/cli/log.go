package cli

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
)

// newLogger returns a JSON logger, or a human console one on a terminal.
func newLogger(c *Common, w io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(c.LogLevel)
	if err != nil || c.LogLevel == "" {
		return zerolog.Logger{}, usageError{fmt.Errorf("log level %q: want debug, info, warn or error", c.LogLevel)}
	}
	console := false
	switch c.LogFormat {
	case "json":
	case "console":
		console = true
	case "auto", "":
		if f, ok := w.(*os.File); ok {
			console = isatty.IsTerminal(f.Fd())
		}
	default:
		return zerolog.Logger{}, usageError{fmt.Errorf("log format %q: want json, console or auto", c.LogFormat)}
	}
	if console {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	zerolog.ErrorMarshalFunc = logHinted // every logged error carries its flag hint
	return zerolog.New(w).Level(level).Hook(countErrors{}).With().Timestamp().Logger(), nil
}

// loggedErrors counts the error lines written by this process's logger.
// report trusts an error marked as reported only when one was written, so
// that an error marked by mistake, or hidden by --log-level, still reaches
// stderr.
var loggedErrors atomic.Int64

type countErrors struct{}

// Run is called for the events the level lets through, just before they
// are written.
func (countErrors) Run(_ *zerolog.Event, level zerolog.Level, _ string) {
	if level >= zerolog.ErrorLevel && level <= zerolog.PanicLevel {
		loggedErrors.Add(1)
	}
}
