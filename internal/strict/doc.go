// Package strict is the strict reading of HTTP/1.1 requests (RFC 9110,
// RFC 9112), the same on both front ends: a Framer follows a connection's
// bytes before the front end's own parser sees them, passes each request
// head only once it is whole and valid, and follows each body's framing to
// the next head. What the RFCs leave to the recipient, it takes the strict
// way: a message that two parsers could frame differently is refused and
// its connection closed. docs/reliability.md lists every case with its
// answer.
package strict
