// Command embed is the server of the benchmark's embedding suite: a Go
// program that mounts a WSGI application, an ASGI application and a Go
// handler on one http.ServeMux, served by a plain http.Server, as a Go
// program that embeds m0 writes it.
//
//	embed -addr 127.0.0.1:8000 -dir examples/hello -wsgi hello:application -asgi-dir bench/apps -asgi hello_asgi:app
//
// /wsgi/ goes to the WSGI application, /asgi/ to the ASGI application and
// /go to a Go handler that answers "Hello, World!". With -bare it is the
// same program without the bridges: the mux with the Go handler alone, and
// no Python loaded, the baseline the bridges must add nothing to. -wsgi=
// or -asgi= leaves one bridge out.
//
// With -proxy it is what a Go team runs today instead of embedding: the
// command after the flags (granian, say) is started as the backend, "@port"
// in its arguments replaced by a free loopback port, and every request is
// forwarded to it by net/http/httputil's ReverseProxy on the same
// http.Server. The backend inherits the program's CPU affinity and
// session, so the pair runs on the core budget the program was given.
//
//	embed -proxy -addr 127.0.0.1:8000 -- granian --interface wsgi --port @port ...
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/asgi"
	"github.com/m0serve/m0/wsgi"
)

var hello = []byte("Hello, World!\n")

func goHello(w http.ResponseWriter, r *http.Request) {
	w.Header()["Content-Type"] = []string{"text/plain; charset=utf-8"}
	w.Write(hello)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8000", "address to listen on")
	bare := flag.Bool("bare", false, "serve only the Go handler: no bridge, no Python")
	wsgiSpec := flag.String("wsgi", "hello:application", "the WSGI application (\"\": none)")
	wsgiDir := flag.String("dir", "examples/hello", "the WSGI application's directory")
	asgiSpec := flag.String("asgi", "hello_asgi:app", "the ASGI application (\"\": none)")
	asgiDir := flag.String("asgi-dir", "bench/apps", "the ASGI application's directory")
	proxy := flag.Bool("proxy", false, "forward every request to the backend command given after the flags (\"@port\" in it: the port it listens on)")
	flag.Parse()
	if *proxy {
		serveProxy(*addr, flag.Args())
		return
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/go", goHello)
	srv := &http.Server{Addr: *addr, Handler: mux}
	var shut []func(context.Context) error
	if !*bare {
		if *wsgiSpec != "" {
			w, err := m0.LoadApp(*wsgiSpec, &m0.LoadOptions{Dir: *wsgiDir})
			if err != nil {
				log.Fatal(err)
			}
			wh := wsgi.New(w, nil)
			mux.Handle("/wsgi/", wh)
			shut = append(shut, wh.Shutdown)
		}
		if *asgiSpec != "" {
			a, err := m0.LoadApp(*asgiSpec, &m0.LoadOptions{Dir: *asgiDir})
			if err != nil {
				log.Fatal(err)
			}
			ah := asgi.New(a, nil)
			if err := ah.Startup(context.Background()); err != nil {
				log.Fatal(err)
			}
			mux.Handle("/asgi/", ah)
			srv.RegisterOnShutdown(ah.Drain)
			shut = append(shut, ah.Shutdown)
		}
	}

	// On SIGTERM or SIGINT: the server stops taking requests and finishes
	// the ones in flight (streams hear that their client is gone, through
	// RegisterOnShutdown), then each handler shuts down, within one bound.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		for _, s := range shut {
			s(ctx)
		}
	}()
	log.Printf("embed: serving on http://%s", *addr)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		log.Fatal(err)
	}
	<-drained // ListenAndServe returns as soon as Shutdown begins
}

// serveProxy starts the backend command args and forwards every request on
// addr to it, until SIGTERM or SIGINT, then stops the backend.
func serveProxy(addr string, args []string) {
	if len(args) == 0 {
		log.Fatal("embed -proxy: name the backend's command after the flags")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	backend := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(backend)
	argv := make([]string, len(args))
	for i, a := range args {
		argv[i] = strings.ReplaceAll(a, "@port", port)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if c, err := net.Dial("tcp", backend); err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			log.Fatalf("embed -proxy: the backend exited before it listened: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			log.Fatalf("embed -proxy: the backend did not listen on %s within 60 s", backend)
		}
	}
	target := &url.URL{Scheme: "http", Host: backend}
	rp := httputil.NewSingleHostReverseProxy(target)
	// The default keeps two idle connections to the backend, and under 64
	// clients the rest would be dialled anew for every request: what a Go
	// team tunes first.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 4096, 4096
	rp.Transport = tr
	// And its copy buffers from a pool rather than 32 KiB allocated per
	// request, which the collector would pay for.
	rp.BufferPool = &bufferPool{}
	srv := &http.Server{Addr: addr, Handler: rp}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	log.Printf("embed: forwarding http://%s to %s (%s)", addr, backend, argv[0])
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		cmd.Process.Kill()
		log.Fatal(err)
	}
	// The requests in flight are forwarded to their end before the
	// backend is stopped: ListenAndServe returns as soon as Shutdown
	// begins.
	<-drained
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
}

// bufferPool is httputil.BufferPool on a sync.Pool.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
