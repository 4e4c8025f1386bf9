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
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
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
	flag.Parse()

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
