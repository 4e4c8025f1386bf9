package cpython

import "strings"

// Error is a Python exception carried to Go.
type Error struct {
	// Traceback is the formatted exception, traceback included.
	Traceback string
}

func newError(tb string) *Error { return &Error{Traceback: tb} }

// Error returns the exception's last line, "TypeError: message".
func (e *Error) Error() string { return "python: " + e.Exception() }

// Exception is the traceback's last line: the exception, "TypeError:
// message"; or the text itself when it is one line.
func (e *Error) Exception() string {
	tb := strings.TrimRight(e.Traceback, "\n ")
	if i := strings.LastIndexByte(tb, '\n'); i >= 0 {
		return tb[i+1:]
	}
	return tb
}

// LogAttrs are the attributes of a log line about the failure: "error",
// the exception, and "traceback", the whole text, when it has more than
// that line (the server's log prints it below the line).
func LogAttrs(text string) []any {
	e := Error{Traceback: text}
	attrs := []any{"error", e.Exception()}
	if strings.Contains(strings.TrimRight(text, "\n "), "\n") {
		attrs = append(attrs, "traceback", text)
	}
	return attrs
}
