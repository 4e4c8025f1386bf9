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

// Exception is the exception's line of the traceback, "TypeError:
// message": the first line after the last indented one (the frames' lines
// are), so that a message of several lines or a note after it does not
// take its place; for an exception group, whose lines are all indented,
// the group's own line; or the text's first line when it is no traceback.
func (e *Error) Exception() string {
	tb := strings.Trim(e.Traceback, "\n ")
	lines := strings.Split(tb, "\n")
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(l, " ") {
			last = i
		}
	}
	if last >= 0 && last+1 < len(lines) {
		return lines[last+1]
	}
	for _, l := range lines {
		if s := strings.TrimLeft(l, " |+"); strings.Contains(s, "Group: ") && strings.Contains(s, " sub-exception") {
			return s
		}
	}
	return lines[0]
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
