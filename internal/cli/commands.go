package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/store"
	_ "github.com/homesnap/homesnap/internal/store/all" // every backend
)

// setup loads the configuration, the logger and the store.
func setup(ctx context.Context, name, about string, cfg any, c *Common, args []string, stderr io.Writer) (zerolog.Logger, store.Store, error) {
	log, err := configure(name, about, cfg, c, args, stderr)
	if err != nil {
		return log, nil, err
	}
	if o, ok := cfg.(interface{ storeOptional() bool }); ok && o.storeOptional() && c.Store == "" {
		return log, nil, nil
	}
	st, err := openStore(ctx, c, log)
	return log, st, err
}

// configure loads and checks the configuration and sets up the logger.
func configure(name, about string, cfg any, c *Common, args []string, stderr io.Writer) (zerolog.Logger, error) {
	rest, err := load(name, about, cfg, args, stderr)
	if err != nil {
		return zerolog.Logger{}, err
	}
	if len(rest) > 0 {
		return zerolog.Logger{}, usageError{fmt.Errorf("unexpected argument %q (see homesnap %s --help)", rest[0], name)}
	}
	if v, ok := cfg.(validator); ok {
		if err := v.validate(); err != nil {
			return zerolog.Logger{}, err
		}
	}
	if c.Home != "" {
		// A relative home is taken from the working directory.
		if c.Home, err = filepath.Abs(c.Home); err != nil {
			return zerolog.Logger{}, usageError{fmt.Errorf("home %q: %w", c.Home, err)}
		}
	}
	log, err := newLogger(c, stderr)
	for _, d := range c.deprecated {
		log.Warn().Msg(d)
	}
	return log, err
}

// withTimeout bounds an operation when a timeout is set.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
