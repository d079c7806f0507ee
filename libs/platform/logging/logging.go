// Package logging builds the logger of every no8s process: the services, `no8s
// dev`, no8s-reconciler and every reconciler built on the SDK. One format and
// one level, chosen the same way everywhere:
//
//	NO8S_LOG_FORMAT  text (default) or json
//	NO8S_LOG_LEVEL   debug, info (default), warn or error
//
// Logs go to stderr. Callers add their own attributes (service=store,
// reconciler=hello) with Logger.With, once.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// The environment variables read by New.
const (
	EnvFormat = "NO8S_LOG_FORMAT"
	EnvLevel  = "NO8S_LOG_LEVEL"
)

// The formats.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Options are a logger's settings; zero fields take the defaults (text,
// info).
type Options struct {
	// Format is FormatText or FormatJSON.
	Format string
	// Level is debug, info, warn or error.
	Level string
}

// FromEnv reads the options from getenv (os.Getenv, or a flag-aware
// lookup).
func FromEnv(getenv func(string) string) Options {
	return Options{Format: getenv(EnvFormat), Level: getenv(EnvLevel)}
}

// New returns a logger writing to w as o says, or an error naming the bad
// setting.
func New(w io.Writer, o Options) (*slog.Logger, error) {
	var level slog.Level
	if o.Level != "" {
		if err := level.UnmarshalText([]byte(o.Level)); err != nil {
			return nil, fmt.Errorf("%s=%q: debug, info, warn or error", EnvLevel, o.Level)
		}
	}
	ho := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(o.Format) {
	case "", FormatText:
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case FormatJSON:
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("%s=%q: text or json", EnvFormat, o.Format)
}
