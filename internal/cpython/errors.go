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

// Exception is the exception's own line of the traceback, "TypeError:
// message": the first line after the frames of the last traceback (its
// header, then its indented lines), so that what a message of several
// lines or a note adds after it does not take its place. For an exception
// group, whose lines are all drawn inside a box, it is the group's line;
// for a text that is no traceback, its first line.
func (e *Error) Exception() string {
	lines := strings.Split(strings.Trim(e.Traceback, "\n"), "\n")
	from, group := 0, false
	for i, l := range lines {
		switch {
		case l == "Traceback (most recent call last):":
			from, group = i+1, false
		case strings.HasPrefix(l, "  + Exception Group Traceback (most recent call last):"):
			from, group = i+1, true
		}
	}
	for _, l := range lines[from:] {
		if group {
			// The group's frames are "  |   ...", its line "  | Name: ...".
			if rest, ok := strings.CutPrefix(l, "  | "); ok && rest != "" && rest[0] != ' ' {
				return rest
			}
			continue
		}
		if l != "" && l[0] != ' ' {
			return l
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
