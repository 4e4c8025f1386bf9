package wire

import "runtime"

// AnswerInTurn lets every goroutine that is ready to run have its turn
// before the caller writes the whole answer it holds. The goroutines the
// poller readied together (the requests that arrived together) then run
// their handlers one after another and write their answers one after
// another, rather than each writing between two handlers: the client,
// woken by the first answer, finds the rest waiting and sleeps once a
// batch rather than once an answer. On loopback that wake-up is the
// server's cost (its write runs the receiver's path), and on one CPU,
// answers spaced by a handler's run woke wrk for one answer in three
// (35,680 sleeps in 3 s, against 4,031 under granian). With nothing else
// ready it returns at once.
//
// The fasthttp front end calls it after every handler, except for a
// streamed body (fasthttp sends it after the handler returns, from a
// goroutine that may be locked to its Python thread: yielding would hand
// the thread off) and a hijacked connection. The WSGI bridge calls it on
// net/http (a Go program's own server) before returning a whole answer:
// 1.19-1.89x on WSGI hello at 64 connections (asgi.Buffered, served
// through the WSGI bridge, takes it too). The ASGI bridge's own ServeHTTP
// does not: on net/http its answers arrive from the loop's collector
// already together, and the yield there measured 0.82-1.05x (five rounds).
func AnswerInTurn() { runtime.Gosched() }
