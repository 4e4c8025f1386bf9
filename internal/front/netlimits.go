package front

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"github.com/m0serve/m0/internal/wire"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/m0serve/m0/internal/observe"
	"github.com/m0serve/m0/internal/strict"
)

// limitHandler enforces lim around h for net/http.
type limitHandler struct {
	h   http.Handler
	lim Limits
	rf  *refusals
}

// netLimits returns the net/http server that serves h within lim.
func netLimits(h http.Handler, lim Limits) *http.Server {
	lh := &limitHandler{h: h, lim: lim, rf: &refusals{lim: lim}}
	return &http.Server{
		Handler: lh,
		// Headers arrive within IdleTimeout of the request's start;
		// zero, as IdleTimeout's zero, is no bound.
		ReadHeaderTimeout: lim.IdleTimeout,
		IdleTimeout:       lim.IdleTimeout,
		// OPTIONS * is answered by limitHandler (strictNet), after the
		// request count, as on fasthttp.
		DisableGeneralOptionsHandler: true,
		ConnState:                    func(c net.Conn, st http.ConnState) { track(c, connState(st)) },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, observe.ConnKey{}, &observe.Conn{Conn: c})
		},
	}
}

var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (lh *limitHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cs, _ := r.Context().Value(observe.ConnKey{}).(*observe.Conn)
	if cs == nil {
		cs = &observe.Conn{}
	}
	cs.Requests++
	obs, _ := lh.h.(observe.Refuser)
	defer servedNet(cs.Conn, cs.Requests)
	if rf := strict.Refused(cs.Conn, []byte(r.RequestURI)); rf != nil && rf.Status == http.StatusRequestEntityTooLarge {
		// --max-body's own 413, logged once, of the request as sent.
		r.Method, r.URL.Path = rf.Method, rf.Target
		lh.refuse(w, r, http.StatusRequestEntityTooLarge)
		return
	}
	if strictNet(w, r, cs.Conn, obs) {
		return
	}
	if n := lh.lim.MaxKeepaliveRequests; n > 0 && cs.Requests >= n {
		w.Header().Set("Connection", "close")
	}
	capBytes := lh.lim.maxBody()
	if capBytes >= 0 && r.ContentLength > capBytes {
		lh.refuse(w, r, http.StatusRequestEntityTooLarge)
		return
	}
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		lh.h.ServeHTTP(w, r)
		return
	}
	if cs.Conn != nil && lh.lim.BodyTimeout > 0 {
		cs.Conn.SetReadDeadline(time.Now().Add(lh.lim.BodyTimeout))
	}
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			bodyBuffers.Put(buf)
		}
	}()
	var rd io.Reader = r.Body
	if capBytes >= 0 {
		rd = io.LimitReader(r.Body, capBytes+1)
	}
	_, err := buf.ReadFrom(rd)
	if cs.Conn != nil && lh.lim.BodyTimeout > 0 {
		// net/http's own read after the body must not inherit the deadline.
		cs.Conn.SetReadDeadline(time.Time{})
	}
	switch {
	case err != nil && isTimeout(err):
		lh.refuse(w, r, http.StatusRequestTimeout)
		return
	case bodyRefusal(err, cs.Conn) != nil:
		answerNet(w, r, bodyRefusal(err, cs.Conn), obs)
		return
	case err != nil:
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			http.Error(w, "Bad Request", http.StatusBadRequest)
		}
		return
	case capBytes >= 0 && int64(buf.Len()) > capBytes:
		lh.refuse(w, r, http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(buf.Bytes()))
	r.ContentLength = int64(buf.Len())
	lh.h.ServeHTTP(w, r)
}

// refuse answers 413 or 408 on the connection itself and closes it: a 413
// after reading and discarding the rest of the upload for the linger.
func (lh *limitHandler) refuse(w http.ResponseWriter, r *http.Request, status int) {
	start := time.Now()
	msg := tooLarge
	if status == http.StatusRequestTimeout {
		lh.rf.timedOut()
		msg = timedOut
	} else {
		lh.rf.tooLarge()
	}
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		w.Header().Set("Connection", "close")
		http.Error(w, strings.TrimSuffix(msg, "\n"), status)
		return
	}
	bw := bufio.NewWriter(c)
	wire.WriteHead(bw, true, status, func(fn func(name, value []byte)) {
		fn([]byte("Content-Type"), []byte("text/plain; charset=utf-8"))
	}, int64(len(msg)))
	bw.WriteString(msg)
	bw.Flush()
	if obs, ok := lh.h.(observe.Refuser); ok {
		o := observe.Outcome{Status: status, Dur: time.Since(start), Bytes: int64(len(msg))}
		o.Remote = wire.ClientOf(r).Addr()
		obs.Refused(r.Method, r.URL.Path, o)
	}
	if status == http.StatusRequestEntityTooLarge {
		lingerOnClose(c, lh.lim.linger())
	}
	c.Close()
}
