package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// newLogger writes logs to stderr; stdout stays for results. By default a
// person reads them: short "warning: ..." lines. With -v, or a --log-format,
// they are slog records (text key=value, or JSON) down to debug with -v.
func newLogger(w io.Writer, o globalOptions) (*slog.Logger, error) {
	level := slog.LevelWarn
	switch {
	case o.quiet:
		level = slog.LevelError
	case o.verbose:
		level = slog.LevelDebug
	case o.logFormat != "":
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	format := o.logFormat
	if format == "" && o.verbose {
		format = "text"
	}
	switch format {
	case "":
		return slog.New(&humanHandler{w: w, level: level, mu: &sync.Mutex{}}), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError("--log-format %q: want text or json", o.logFormat)
}

// humanHandler writes one short line a record: "warning: MESSAGE (key value,
// ...)"; no time, no level names a person must decode.
type humanHandler struct {
	w     io.Writer
	level slog.Level
	mu    *sync.Mutex
	attrs []slog.Attr
	group string
}

func (h *humanHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *humanHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	}
	b.WriteString(r.Message)
	var parts []string
	add := func(a slog.Attr) bool {
		if a.Equal(slog.Attr{}) {
			return true
		}
		key := a.Key
		if h.group != "" {
			key = h.group + "." + key
		}
		parts = append(parts, fmt.Sprintf("%s %v", key, a.Value.Resolve()))
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if len(parts) > 0 {
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *humanHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *humanHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}
