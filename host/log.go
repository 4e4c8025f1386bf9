package host

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// tracebackKey is the attribute of a log record that holds a Python
// traceback: the server's log prints it after the record, as it reads.
const tracebackKey = "traceback"

// newLogHandler returns the handler of the server's own log (stderr): one
// line per record, as Go's log package writes it
//
//	2026/11/30 12:00:00 ERROR wsgi: application error method=GET path=/boom error="RuntimeError: boom"
//
// followed, when the record carries a traceback, by the traceback's lines
// as Python prints them (real newlines, as gunicorn and uvicorn print
// them). Each record is one Write, so records written at once never mix.
func newLogHandler(w io.Writer, level slog.Leveler) slog.Handler {
	return &logHandler{out: &lockedWriter{w: w}, level: level}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(p)
}

type logHandler struct {
	out   *lockedWriter
	level slog.Leveler
	with  []func(slog.Handler) slog.Handler // WithAttrs and WithGroup, in order
	group int                               // groups opened: a traceback inside one is an ordinary value
}

func (h *logHandler) Enabled(_ context.Context, l slog.Level) bool {
	min := slog.LevelInfo
	if h.level != nil {
		min = h.level.Level()
	}
	return l >= min
}

// builtin drops the keys the line writes itself.
func builtin(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
		return slog.Attr{}
	}
	return a
}

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	var tb string
	rest := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == tracebackKey && h.group == 0 {
			tb = a.Value.String()
		} else {
			rest.AddAttrs(a)
		}
		return true
	})
	var b bytes.Buffer
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	b.WriteString(t.Format("2006/01/02 15:04:05 "))
	b.WriteString(r.Level.String())
	b.WriteByte(' ')
	b.WriteString(r.Message)
	var attrs bytes.Buffer
	var th slog.Handler = slog.NewTextHandler(&attrs, &slog.HandlerOptions{ReplaceAttr: builtin})
	for _, f := range h.with {
		th = f(th)
	}
	th.Handle(ctx, rest)
	if a := bytes.TrimSpace(attrs.Bytes()); len(a) > 0 {
		b.WriteByte(' ')
		b.Write(a)
	}
	b.WriteByte('\n')
	if tb = trimNewlines(tb); tb != "" {
		b.WriteString(tb)
		b.WriteByte('\n')
	}
	h.out.write(b.Bytes())
	return nil
}

func trimNewlines(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.with = append(append([]func(slog.Handler) slog.Handler{}, h.with...),
		func(th slog.Handler) slog.Handler { return th.WithAttrs(attrs) })
	return &c
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.group++
	c.with = append(append([]func(slog.Handler) slog.Handler{}, h.with...),
		func(th slog.Handler) slog.Handler { return th.WithGroup(name) })
	return &c
}
