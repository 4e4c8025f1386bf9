// Command gohost is the server of the benchmark's gohost suite: one Go
// handler that answers "Hello, World!", served either by the m0 host
// (package host, as a Go program that hands its application to the host
// writes it) or by a bare fasthttp server, the baseline the host must add
// little to.
//
//	gohost -mode host -port 8000   # host.Serve: the host's flags, limits, drain
//	gohost -mode bare -port 8000   # fasthttp.Server on the same handler, nothing else
//
// The handler has ServeFastHTTP beside ServeHTTP, so the host serves it with
// fasthttp too: the two modes differ by what the host puts around it.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/m0serve/m0/host"
	"github.com/valyala/fasthttp"
)

var hello = []byte("Hello, World!\n")

const contentType = "text/plain; charset=utf-8"

// handler answers every request with hello, under net/http or fasthttp.
type handler struct{}

func (handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header()["Content-Type"] = []string{contentType}
	w.Write(hello)
}

func (handler) ServeFastHTTP(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType(contentType)
	ctx.Write(hello)
}

// app is the application the host serves: the same handler for every loop.
type app struct{}

func (app) Make(ctx host.Context) (http.Handler, error) { return handler{}, nil }

func main() {
	mode := flag.String("mode", "host", "host (the m0 host) or bare (a fasthttp.Server)")
	port := flag.Int("port", 8000, "TCP port on 127.0.0.1")
	flag.Parse()
	p := strconv.Itoa(*port)

	switch *mode {
	case "host":
		// The host reads its own command line, as m0serve's.
		os.Args = []string{"gohost", "--host", "127.0.0.1", "--port", p}
		os.Exit(host.Serve(app{}, nil))
	case "bare":
		var h handler
		srv := &fasthttp.Server{Handler: h.ServeFastHTTP, NoDefaultServerHeader: true}
		addr := net.JoinHostPort("127.0.0.1", p)
		ln, err := net.Listen("tcp4", addr)
		if err != nil {
			log.Fatal(err)
		}
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		go func() {
			<-stop
			srv.Shutdown()
		}()
		fmt.Printf("gohost: bare fasthttp on http://%s\n", addr)
		if err := srv.Serve(ln); err != nil {
			log.Fatal(err)
		}
	default:
		fmt.Fprintf(os.Stderr, "gohost: -mode %q: want host or bare\n", *mode)
		os.Exit(2)
	}
}
