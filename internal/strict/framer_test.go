package strict

import (
	"bytes"
	"strings"
	"testing"
)

// scanAll feeds stream to a Framer in pieces of the sizes in cuts (cycled),
// as a connection's reads would, holding back what it does not pass, and
// returns the bytes it passed and its refusal.
func scanAll(stream []byte, cuts []int) ([]byte, *Rejection) {
	var f Framer
	var out, pending []byte
	i, k := 0, 0
	for i < len(stream) {
		n := len(stream) - i
		if len(cuts) > 0 {
			n = min(n, max(cuts[k%len(cuts)], 1))
			k++
		}
		pending = append(pending, stream[i:i+n]...)
		i += n
		n, m, r := f.Scan(pending)
		out = append(out, pending[:m]...)
		pending = pending[n:]
		if r != nil {
			return out, r
		}
	}
	return out, nil
}

func TestFramerPipelined(t *testing.T) {
	ok := "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
		"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nT: 1\r\n\r\n" +
		"\r\nGET /c HTTP/1.1\r\nHost: x\r\n\r\n"
	passed := strings.NewReplacer(";ext=1", "", "T: 1\r\n", "").Replace(ok)
	bad := "GET /d HTTP/9.9\r\nHost: x\r\n\r\n"
	for _, cuts := range [][]int{nil, {1}, {2, 3}, {7}, {100}} {
		out, r := scanAll([]byte(ok+bad+ok), cuts)
		if r == nil || r.Status != 505 || r.Target != "/d" || string(out) != passed {
			t.Fatalf("cuts %v: passed %q, refusal %+v", cuts, out, r)
		}
	}
	for _, body := range []string{
		"5\r\nhelloXX\r\n0\r\n\r\n", "FFFFFFFFFFFFFFFFF\r\n", "0x5\r\nhello\r\n0\r\n\r\n", "5\nhello\n0\n\n",
		"5;\x01\r\nhello\r\n0\r\n\r\n", "5;" + strings.Repeat("a", maxChunkLine) + "\r\n", "0\r\nT: 1\n\r\n",
	} {
		head := "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
		out, r := scanAll([]byte(head+body), []int{3})
		if r == nil || !r.InBody || r.Status != 400 || !bytes.HasPrefix(out, []byte(head)) {
			t.Errorf("%q: passed %q, refusal %+v", body, out, r)
		}
	}
}

// TestFramerChunked: a chunked body's extensions are checked against RFC
// 9112 7.1.1's grammar and its trailer fields as field lines, and both are
// dropped; the front end sees chunk-size CRLF data CRLF and "0" CRLF CRLF.
func TestFramerChunked(t *testing.T) {
	const head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	const next = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
	const plain = "5\r\nhello\r\n0\r\n\r\n"
	for _, tc := range []struct {
		body   string
		refuse string // the refusal's reason; "": passed as plain
	}{
		{"5\r\nhello\r\n0\r\n\r\n", ""},
		{"5;a=b;c\r\nhello\r\n0;d\r\n\r\n", ""},
		{"5 ;a=b\r\nhello\r\n0\r\n\r\n", ""},
		{"5 \t; a \t= b ;c\r\nhello\r\n0\r\n\r\n", ""},
		{"5;a=\"b; \\\"c\" ;d=\"\"\r\nhello\r\n0\r\n\r\n", ""},
		{"5;a=\"caf\xe9\"\r\nhello\r\n0\r\n\r\n", ""},
		{"5 \r\nhello\r\n0\r\n\r\n", "whitespace at the end of a chunk-size line"},
		{"5\t\r\nhello\r\n0\r\n\r\n", "whitespace at the end of a chunk-size line"},
		{"5;a \r\nhello\r\n0\r\n\r\n", "whitespace at the end of a chunk-size line"},
		{"5;a=b \r\nhello\r\n0\r\n\r\n", "whitespace at the end of a chunk-size line"},
		{"5;\r\nhello\r\n0\r\n\r\n", "chunk extension without a name"},
		{"5; \r\nhello\r\n0\r\n\r\n", "chunk extension without a name"},
		{"5;;a\r\nhello\r\n0\r\n\r\n", "chunk extension without a name"},
		{"5;=b\r\nhello\r\n0\r\n\r\n", "chunk extension without a name"},
		{"5;a=\r\nhello\r\n0\r\n\r\n", "chunk extension without a value"},
		{"5;a=;b\r\nhello\r\n0\r\n\r\n", "chunk extension without a value"},
		{"5 a\r\nhello\r\n0\r\n\r\n", "malformed chunk extension"},
		{"5;a b\r\nhello\r\n0\r\n\r\n", "malformed chunk extension"},
		{"5;a=b c\r\nhello\r\n0\r\n\r\n", "malformed chunk extension"},
		{"5;a=\"b\"c\r\nhello\r\n0\r\n\r\n", "malformed chunk extension"},
		{"5;a=b\"\r\nhello\r\n0\r\n\r\n", "malformed chunk extension"},
		{"5;a=\"b\r\nhello\r\n0\r\n\r\n", "unterminated quoted chunk extension value"},
		{"5;a=\x01\r\nhello\r\n0\r\n\r\n", "control byte in a chunk extension"},
		{"5;a\nhello\r\n0\r\n\r\n", "control byte in a chunk extension"},
		{"5\r\nhello\r\n0\r\nContent-Type: text/plain\r\n\r\n", ""},
		{"5\r\nhello\r\n0\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\nHost: y\r\nTrailer: X\r\n\r\n", ""},
		{"5\r\nhello\r\n0\r\nX-T:\r\nX-U: caf\xe9 \t\r\n\r\n", ""},
		{"5\r\nhello\r\n0\r\nX-T 1\r\n\r\n", "malformed trailer field"},
		{"5\r\nhello\r\n0\r\nX-T : 1\r\n\r\n", "malformed trailer field"},
		{"5\r\nhello\r\n0\r\n: 1\r\n\r\n", "malformed trailer field"},
		{"5\r\nhello\r\n0\r\nX-T\r\n\r\n", "malformed trailer field"},
		{"5\r\nhello\r\n0\r\nX-T: 1\r\n b\r\n\r\n", "obsolete line folding in the trailer section"},
		{"5\r\nhello\r\n0\r\nX-T: 1\n\r\n", "bare LF in the trailer section"},
		{"5\r\nhello\r\n0\r\nX-T: 1\r\r\n", "bare CR in the trailer section"},
		{"5\r\nhello\r\n0\r\nX-T: a\x01\r\n\r\n", "control byte in the trailer section"},
	} {
		for _, cuts := range [][]int{nil, {1}, {3}} {
			out, r := scanAll([]byte(head+tc.body+next), cuts)
			switch {
			case tc.refuse == "" && (r != nil || string(out) != head+plain+next):
				t.Errorf("%q (cuts %v): passed %q, refusal %+v; want %q", tc.body, cuts, out, r, head+plain+next)
			case tc.refuse != "" && (r == nil || r.Reason != tc.refuse || !r.InBody || r.Status != 400 || !strings.HasPrefix(string(out), head)):
				t.Errorf("%q (cuts %v): passed %q, refusal %+v; want 400 %q", tc.body, cuts, out, r, tc.refuse)
			}
		}
	}
}

// TestFramerFragment: a request target's fragment is dropped before the
// front end reads the head, on every form of target it can end.
func TestFramerFragment(t *testing.T) {
	const rest = " HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct{ in, out string }{
		{"GET /a?b=1#frag" + rest, "GET /a?b=1" + rest},
		{"GET /a#frag?b=1" + rest, "GET /a" + rest},
		{"GET /a?b=1#" + rest, "GET /a?b=1" + rest},
		{"GET /#a#b" + rest, "GET /" + rest},
		{"GET http://x/a?b#c" + rest, "GET http://x/a?b" + rest},
		{"\r\n\r\nGET /a#b" + rest, "\r\n\r\nGET /a" + rest},
		{"POST /a#b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n#c#GET /d#e" + rest,
			"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n#c#GET /d" + rest},
		{"GET /a?b=1" + rest, "GET /a?b=1" + rest},
	} {
		for _, cuts := range [][]int{nil, {1}, {5}} {
			if out, r := scanAll([]byte(tc.in), cuts); r != nil || string(out) != tc.out {
				t.Errorf("%q (cuts %v): passed %q (%+v), want %q", tc.in, cuts, out, r, tc.out)
			}
		}
	}
}

func TestFramerLimits(t *testing.T) {
	_, r := scanAll([]byte("GET /"+strings.Repeat("a", MaxHead)+" HTTP/1.1\r\n"), []int{512})
	if r == nil || r.Status != 414 {
		t.Fatalf("long request line: %+v", r)
	}
	_, r = scanAll([]byte("GET / HTTP/1.1\r\nX: "+strings.Repeat("a", MaxHead)), []int{512})
	if r == nil || r.Status != 431 {
		t.Fatalf("long header: %+v", r)
	}
}

// TestFramerUpgrade: after an upgrade request and its body nothing passes
// until it is answered; a switch passes the rest as it comes, an answer
// without one reads on as HTTP.
func TestFramerUpgrade(t *testing.T) {
	up := "POST /up HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nUpgrade:\r\nConnection: upgrade\r\nContent-Length: 2\r\n\r\nab"
	after := "\x81\x05hello GET / HTTP/9.9\r\n"
	var f Framer
	b := []byte(up + after)
	n, _, r := f.Scan(b)
	if r != nil || n != len(up) || !f.Holding() {
		t.Fatalf("passed %q (%+v), holding %v", b[:n], r, f.Holding())
	}
	f.Resume(2) // another request's answer
	if !f.Holding() {
		t.Fatal("released by another request")
	}
	f.Switch()
	if _, m, r := f.Scan(b[n:]); r != nil || m != len(after) || !f.Passing() {
		t.Fatalf("after the switch passed %d of %d (%+v)", m, len(after), r)
	}

	f = Framer{}
	next := "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
	b = []byte(up + next)
	n, _, _ = f.Scan(b)
	f.Resume(1)
	if _, m, r := f.Scan(b[n:]); r != nil || m != len(next) || f.Holding() || f.Heads != 2 {
		t.Fatalf("after an answer without a switch passed %d of %d (%+v)", m, len(next), r)
	}
}

// FuzzFramer: a connection's bytes pass the same however its reads cut
// them, what passes is what came less what the Framer drops (in order), and
// what passes passes again unchanged.
func FuzzFramer(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), uint8(1), uint8(3))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: x\r\n\r\n"), uint8(2), uint8(5))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;a=b\r\nabc\r\n0\r\nT: v\r\n\r\nGET /x HTTP/1.0\r\n\r\n"), uint8(4), uint8(1))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"), uint8(7), uint8(2))
	f.Add([]byte("\r\n\r\nGET / HTTP/1.1\nHost: x\n\n"), uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, stream []byte, a, b uint8) {
		whole, rw := scanAll(stream, nil)
		cut, rc := scanAll(stream, []int{int(a), int(b)})
		if !bytes.Equal(whole, cut) || (rw == nil) != (rc == nil) || rw != nil && *rw != *rc {
			t.Fatalf("whole passed %q (%+v), cut %d/%d passed %q (%+v)", whole, rw, a, b, cut, rc)
		}
		if !subsequence(whole, stream) {
			t.Fatalf("passed %q, not taken from %q", whole, stream)
		}
		// Every head passed is one CheckHead accepts, and nothing is left
		// to drop.
		var f Framer
		again := bytes.Clone(whole)
		if n, m, _ := f.Scan(again); n != len(whole) || !bytes.Equal(again[:m], whole) {
			t.Fatalf("passed bytes %q rescanned: %d read, %q passed", whole, n, again[:m])
		}
	})
}

// subsequence reports whether a is b with some of its bytes left out.
func subsequence(a, b []byte) bool {
	for _, c := range a {
		i := bytes.IndexByte(b, c)
		if i < 0 {
			return false
		}
		b = b[i+1:]
	}
	return true
}

// BenchmarkFramer is the strict reading's cost for a typical browser
// request head: the work it adds to each request.
func BenchmarkFramer(b *testing.B) {
	head := []byte("GET /articles/42?page=2 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/140.0\r\n" +
		"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\nAccept-Language: en-GB,en;q=0.5\r\n" +
		"Accept-Encoding: gzip, deflate, br\r\nConnection: keep-alive\r\nCookie: sessionid=abcdef0123456789; csrftoken=0123456789abcdef\r\n\r\n")
	b.SetBytes(int64(len(head)))
	b.ReportAllocs()
	var f Framer
	for b.Loop() {
		if n, m, r := f.Scan(head); n != len(head) || m != n || r != nil {
			b.Fatal(n, m, r)
		}
	}
}
