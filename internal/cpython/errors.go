package cpython

import "strings"

// Error is a Python exception carried to Go.
type Error struct {
	// Traceback is the formatted exception, traceback included.
	Traceback string
}

func newError(tb string) *Error { return &Error{Traceback: tb} }

// Error returns the exception's last line, "TypeError: message".
func (e *Error) Error() string {
	tb := strings.TrimRight(e.Traceback, "\n")
	if i := strings.LastIndexByte(tb, '\n'); i >= 0 {
		return "python: " + tb[i+1:]
	}
	return "python: " + tb
}
