package strict

import (
	"bytes"
	"net/http"
)

// Rejection is a request the Framer refuses: the status to answer and why.
// A refusal in a head comes before its request reaches any handler; one in
// a body (InBody) is a read error of that body.
type Rejection struct {
	Status int
	Reason string
	// Method and Target are the refused request's, as far as they were
	// read, for the log.
	Method, Target string
	InBody         bool
}

func (r *Rejection) Error() string { return "m0: refused request: " + r.Reason }

// Body is the text sent with a refusal.
func (r *Rejection) Body() string { return http.StatusText(r.Status) + ": " + r.Reason + "\n" }

// refuse makes a refusal of the head that begins b.
func refuse(b []byte, status int, reason string) *Rejection {
	r := &Rejection{Status: status, Reason: reason}
	line := b
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	if m, rest, ok := bytes.Cut(line, []byte(" ")); ok {
		r.Method = printable(m, 32)
		t, _, _ := bytes.Cut(rest, []byte(" "))
		r.Target = printable(t, 256)
	}
	return r
}

// printable is b, at most n bytes, with every byte outside printable ASCII
// as '?': a refused request's words are safe to log.
func printable(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	out := make([]byte, len(b))
	for i, c := range b {
		if c < ' ' || c > '~' {
			c = '?'
		}
		out[i] = c
	}
	return string(out)
}
