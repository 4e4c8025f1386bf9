package asgi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/m0serve/m0/internal/cpython"
)

// ServeHTTP serves a request that net/http parsed. The body streams: the
// application receives each chunk as it arrives, when it asks for it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isNetUpgrade(r) {
		h.netWebSocket(w, r)
		return
	}
	if h.maxBody >= 0 && r.ContentLength > h.maxBody {
		http.Error(w, "Request Entity Too Large", http.StatusRequestEntityTooLarge)
		return
	}
	// The application may answer while the body still arrives.
	http.NewResponseController(w).EnableFullDuplex()
	body := r.Body
	if h.maxBody >= 0 {
		body = http.MaxBytesReader(w, r.Body, h.maxBody)
	}
	var sc scope
	sc.net(r, h.rootPath)
	req := h.ex.Start(cpython.AHTTP, sc.end(nil), r.ContentLength != 0)
	defer req.Done()
	ctx := r.Context()
	var (
		status  int
		head    []byte
		started bool // the head was written
		buf     []byte
	)
	for {
		m, err := req.Next(ctx)
		if err != nil { // the client left
			req.Post(cpython.ADisconnect, 0, nil)
			return
		}
		switch m.Kind {
		case cpython.CWant:
			if buf == nil {
				buf = make([]byte, 64<<10)
			}
			// What has arrived, as soon as anything has: a chunk does not
			// wait to fill the buffer.
			n, err := body.Read(buf)
			for n == 0 && err == nil {
				n, err = body.Read(buf)
			}
			var tooLarge *http.MaxBytesError
			switch {
			case err == nil:
				req.Post(cpython.ABody, cpython.FlagMore, buf[:n])
			case err == io.EOF:
				req.Post(cpython.ABody, 0, buf[:n])
			case errors.As(err, &tooLarge):
				req.Post(cpython.ADisconnect, 0, nil)
				if !started {
					http.Error(w, "Request Entity Too Large", http.StatusRequestEntityTooLarge)
				}
				return
			default: // the body was cut short: the client is gone
				req.Post(cpython.ADisconnect, 0, nil)
				return
			}
		case cpython.CStart:
			status, head = m.Flags, m.Data
		case cpython.CBody:
			if !started {
				started = true
				hdr := w.Header()
				appLength := eachHeader(head, func(name, value []byte) {
					hdr[http.CanonicalHeaderKey(string(name))] = append(hdr[http.CanonicalHeaderKey(string(name))], string(value))
				})
				switch {
				case m.Flags&cpython.FlagMore == 0 && bodyAllowed(status) &&
					!(r.Method == http.MethodHead && appLength >= 0 && len(m.Data) == 0):
					hdr.Set("Content-Length", strconv.Itoa(len(m.Data)))
				case appLength >= 0:
					// A stream's length, or a HEAD's (that of the GET).
					hdr.Set("Content-Length", strconv.FormatInt(appLength, 10))
				}
				w.WriteHeader(status)
			}
			if len(m.Data) > 0 && bodyAllowed(status) && r.Method != http.MethodHead {
				if _, err := w.Write(m.Data); err != nil {
					req.Post(cpython.ADisconnect, 0, nil)
					return
				}
			}
			if m.Flags&cpython.FlagMore == 0 {
				return
			}
			if err := http.NewResponseController(w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
				req.Post(cpython.ADisconnect, 0, nil)
				return
			}
			if m.Flags&cpython.FlagWait != 0 {
				req.Post(cpython.AResume, 0, nil)
			}
		case cpython.CPathSend:
			h.netPathSend(w, r, status, head, string(m.Data))
			return
		case cpython.CDone:
			if m.Flags&cpython.DoneFailed == 0 {
				return
			}
			if m.Flags&cpython.DoneQuiet != 0 { // the drain ended it, or the client left
				if !started {
					w.Header().Set("Connection", "close")
					http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
				} else {
					panic(http.ErrAbortHandler)
				}
				return
			}
			h.logError(r.Method, r.URL.Path, string(m.Data))
			if started {
				panic(http.ErrAbortHandler) // ends the connection without the body's end
			}
			http.Error(w, internalError[:len(internalError)-1], http.StatusInternalServerError)
			return
		}
	}
}

func (h *Handler) netPathSend(w http.ResponseWriter, r *http.Request, status int, head []byte, path string) {
	f, err := os.Open(path)
	var fi os.FileInfo
	if err == nil {
		defer f.Close()
		fi, err = f.Stat()
	}
	if err != nil {
		h.logError(r.Method, r.URL.Path, "asgi: http.response.pathsend: "+err.Error())
		http.Error(w, internalError[:len(internalError)-1], http.StatusInternalServerError)
		return
	}
	hdr := w.Header()
	eachHeader(head, func(name, value []byte) {
		k := http.CanonicalHeaderKey(string(name))
		hdr[k] = append(hdr[k], string(value))
	})
	hdr.Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(status)
	if r.Method != http.MethodHead && bodyAllowed(status) {
		io.Copy(w, f) // net/http's writer sends a file with sendfile
	}
}
