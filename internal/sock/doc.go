// Package sock holds what the front ends and the handlers do with a
// connection's socket below HTTP: counting connections open, accepting
// through a shortage of descriptors, bounding a send that makes no
// progress, TCP keepalive, and telling when a client closes its end.
package sock
