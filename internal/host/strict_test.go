package host

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeStrict: a Go program's http.Server under ServeStrict refuses a
// request smuggled behind Content-Length and Transfer-Encoding before its
// handler, answers the request before it, and reads nothing after it.
func TestServeStrict(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 8)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		seen <- r.URL.Path
		io.WriteString(w, "ok\n")
	})}
	go ServeStrict(srv, ln)
	defer srv.Close()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	for i, want := range []int{200, 400} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("response %d: %d %q, want %d", i, resp.StatusCode, body, want)
		}
		if want == 400 && (!resp.Close || !strings.Contains(string(body), "both Content-Length and Transfer-Encoding")) {
			t.Fatalf("refusal: close %v, body %q", resp.Close, body)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after the refusal: %v, want the connection closed", err)
	}
	close(seen)
	var paths []string
	for p := range seen {
		paths = append(paths, p)
	}
	if strings.Join(paths, ",") != "/first" {
		t.Fatalf("the handler saw %v, want only /first", paths)
	}
}
