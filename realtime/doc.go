// Package realtime holds SSE streams and WebSockets in Go and fans frames
// out to them, with replay for clients that reconnect.
//
// A [Hub] is a process's channels. [Hub.Publish] numbers a frame from one
// counter (an [IDSource]), journals the newest frames, and hands each to
// every subscriber of its channel through a bounded queue: a subscriber
// too slow to keep up is dropped, never waited for, and comes back for
// what it missed. A client that reconnects with Last-Event-ID is sent
// every frame of its channel published since, in order and before
// anything live, or, when the journal cannot supply all of them, none and
// one unnumbered m0-gap event whose data names the id it presented and
// the newest id allocated. Ids carry an epoch, so an id from an earlier
// run of the server always gets the gap.
//
// Two ways serve a hub. [Hub.Broker] is an http.Handler of SSE streams a
// Go program mounts on any mux. [Holds] is middleware around any handler,
// a Python bridge or a Go handler alike: a response that carries
// M0-Hold: stream or M0-Hold: websocket with M0-Channel: NAME becomes a
// connection held in Go, and the handler's thread is free at once; a
// held WebSocket's inbound messages are posted back to the handler at
// /ws/message. m0serve --realtime is Holds around the application.
//
// A hub that drains ([Hub.Drain]) ends its SSE streams with a jittered
// retry and its WebSockets with 1001, and answers a reconnecting
// EventSource with a retry rather than a status that makes it give up.
package realtime
