package wsgi

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"sync"

	"github.com/m0serve/m0/internal/cpython"
)

// job is one request on its way through the pool.
type job struct {
	r    *http.Request
	w    http.ResponseWriter
	env  cpython.Environ
	body bytes.Buffer

	// Filled by the Python thread.
	err   error  // the application failed before its head
	abort bool   // the stream failed after its head: end the connection
	sent  bool   // the thread wrote the response itself
	out   []byte // a buffered body for the handler to write
	done  chan struct{}
}

var jobs = sync.Pool{New: func() any { return &job{done: make(chan struct{}, 1)} }}

// keep bounds what a pooled job holds on to between requests.
const keep = 64 << 10

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	j := jobs.Get().(*job)
	defer h.release(j)
	j.r, j.w = r, w

	if h.maxBody >= 0 && r.ContentLength > h.maxBody {
		http.Error(w, "Request Entity Too Large", http.StatusRequestEntityTooLarge)
		return
	}
	if r.ContentLength != 0 {
		body := r.Body
		if h.maxBody >= 0 {
			body = http.MaxBytesReader(w, r.Body, h.maxBody)
		}
		if _, err := j.body.ReadFrom(body); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, "Request Entity Too Large", http.StatusRequestEntityTooLarge)
			} else {
				http.Error(w, "Bad Request", http.StatusBadRequest)
			}
			return
		}
	}
	buildEnviron(&j.env, r, j.body.Len())

	if !h.pool.submit(r.Context(), j) {
		if r.Context().Err() == nil {
			http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
		}
		return
	}
	<-j.done
	switch {
	case j.abort:
		// The body failed after its head: the client must see truncation,
		// not a complete response, so no chunked terminator is written.
		panic(http.ErrAbortHandler)
	case j.err != nil:
		h.fail(w, r, j.err)
	case !j.sent:
		w.Write(j.out)
	}
}

func (h *handler) release(j *job) {
	j.r, j.w, j.err, j.abort, j.sent = nil, nil, nil, false, false
	if j.body.Cap() > keep {
		j.body = bytes.Buffer{}
	}
	j.body.Reset()
	if cap(j.out) > keep {
		j.out = nil
	}
	j.out = j.out[:0]
	if cap(j.env.B) > keep {
		j.env.B = nil
	}
	jobs.Put(j)
}

// fail answers 500 and logs the application's traceback as one line.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	h.logError(r, "wsgi: application error", err)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", "22")
	w.WriteHeader(http.StatusInternalServerError)
	io.WriteString(w, "Internal Server Error\n")
}

func (h *handler) logError(r *http.Request, msg string, err error) {
	attrs := []any{"method", r.Method, "path", r.URL.Path, "error", err.Error()}
	var pe *cpython.Error
	if errors.As(err, &pe) {
		attrs = append(attrs, "traceback", pe.Traceback)
	}
	h.log.Error(msg, attrs...)
}

// smallBody is written by the Python thread itself: it fits the response
// buffer, so the write cannot block on a slow client.
const smallBody = 2048

// serve runs on a Python thread: it calls the application and either hands
// the body back to the handler or streams it.
func (h *handler) serve(t *cpython.Thread, j *job) {
	defer func() { j.done <- struct{}{} }()
	res, err := t.Call(h.app, &j.env, j.body.Bytes(), h.stream)
	if err != nil {
		j.err = err
		return
	}
	hdr := j.w.Header()
	contentLength := setHeaders(hdr, t)
	body := t.Body()
	if res.Stream {
		j.sent = true
		h.stream1(t, j, res.Status, body)
		return
	}
	if res.Late != nil {
		h.logError(j.r, "wsgi: close() failed", res.Late)
	}
	switch {
	case res.Status == http.StatusNoContent || res.Status == http.StatusNotModified:
		if res.Status == http.StatusNoContent {
			delete(hdr, "Content-Length")
		}
		body = nil
	case j.r.Method == http.MethodHead && contentLength:
		// The application's length is that of the GET; the body is not sent.
	default:
		hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	j.w.WriteHeader(res.Status)
	if len(body) <= smallBody {
		j.sent = true
		j.w.Write(body)
		return
	}
	j.out = append(j.out[:0], body...)
}

// stream1 sends a streamed body as the application produces it, holding its
// thread until the end or until the client leaves.
func (h *handler) stream1(t *cpython.Thread, j *job, status int, first []byte) {
	w := j.w
	rc := http.NewResponseController(w)
	w.WriteHeader(status)
	if len(first) > 0 {
		w.Write(first)
	}
	if err := rc.Flush(); err != nil {
		h.closeGone(t, j)
		return
	}
	for {
		res, err := t.Next()
		if err != nil {
			h.logError(j.r, "wsgi: application error after the response started", err)
			j.abort = true
			return
		}
		if b := t.Body(); len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				h.closeGone(t, j)
				return
			}
			if err := rc.Flush(); err != nil {
				h.closeGone(t, j)
				return
			}
		}
		if !res.Stream {
			if res.Late != nil {
				h.logError(j.r, "wsgi: close() failed", res.Late)
			}
			return
		}
	}
}

// closeGone calls close() on a body whose client has left.
func (h *handler) closeGone(t *cpython.Thread, j *job) {
	if err := t.Close(); err != nil {
		h.logError(j.r, "wsgi: close() failed", err)
	}
}

// setHeaders copies the application's headers into hdr and reports whether
// it named a Content-Length.
func setHeaders(hdr http.Header, t *cpython.Thread) bool {
	contentLength, contentType := false, false
	t.Headers(func(name, value []byte) {
		key, ok := canonical[string(name)]
		if !ok {
			key = textproto.CanonicalMIMEHeaderKey(string(name))
		}
		switch key {
		case "Content-Length":
			contentLength = true
		case "Content-Type":
			contentType = true
		case "Transfer-Encoding", "Keep-Alive":
			return // the server frames the response
		}
		hdr[key] = append(hdr[key], string(value))
	})
	if !contentType {
		hdr["Content-Type"] = nil // no sniffed type: send none, as the application did
	}
	return contentLength
}

// canonical maps common spellings of response header names to their
// canonical form without an allocation.
var canonical = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Content-Type", "Content-Length", "Content-Encoding", "Content-Disposition",
		"Content-Language", "Cache-Control", "Set-Cookie", "Location", "Vary", "ETag",
		"Last-Modified", "Expires", "X-Frame-Options", "X-Content-Type-Options",
		"Referrer-Policy", "Cross-Origin-Opener-Policy", "Strict-Transport-Security",
		"Content-Security-Policy", "Access-Control-Allow-Origin", "Server", "Date",
		"Connection", "Transfer-Encoding", "Keep-Alive", "Allow", "Accept-Ranges",
	} {
		m[k] = k
		m[textproto.CanonicalMIMEHeaderKey(k)] = k
		lower := []byte(k)
		for i, c := range lower {
			if 'A' <= c && c <= 'Z' {
				lower[i] = c + 'a' - 'A'
			}
		}
		m[string(lower)] = k
	}
	return m
}()
