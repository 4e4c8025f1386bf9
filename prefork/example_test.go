package prefork_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/m0serve/m0/prefork"
)

// TestMain makes this test binary a worker when a supervisor runs it
// (Example): a process that inherited a worker's descriptors serves, and
// any other runs the tests.
func TestMain(m *testing.M) {
	w, err := prefork.Inherited()
	if err != nil {
		log.Fatal(err)
	}
	if w != nil {
		os.Exit(serveWorker(w))
	}
	os.Exit(m.Run())
}

// serveWorker is a plain Go server, as a worker: it serves on the listener
// it inherited, tells the supervisor it is ready, and drains on SIGTERM or
// when the supervisor is gone.
func serveWorker(w *prefork.Worker) int {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "hello from one of %d workers\n", w.Workers)
	})}
	go srv.Serve(w.Listener)
	w.Ready()
	select {
	case <-stop:
	case <-w.Gone():
	}
	ctx, cancel := context.WithTimeout(context.Background(), prefork.DefaultDrain)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return 1
	}
	return 0
}

// A supervisor runs any Go server as worker processes: it binds the
// listener once, execs the workers (this binary again, which TestMain
// turns into serveWorker) with the listener and the shared page inherited,
// respawns one that dies, and drains them all when stop receives.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	lf, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		log.Fatal(err)
	}
	mesh, err := prefork.NewMesh(lf, 2)
	if err != nil {
		log.Fatal(err)
	}
	defer mesh.Close()
	sup := &prefork.Supervisor{
		Workers: 2,
		Spawn:   mesh.Exec([]string{os.Args[0], "-test.run=^$"}, os.Environ(), os.Stderr, os.Stderr),
		Stderr:  io.Discard,
		Exit:    mesh.Page.Release,
	}
	stop := make(chan os.Signal, 1)
	go func() {
		// Ask until a worker answers (within 20 s: the workers are exec'd
		// binaries, slow to start on a loaded machine), then stop the server.
		for range 800 {
			if resp, err := http.Get("http://" + addr); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				fmt.Print(resp.StatusCode, " ", string(b))
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		stop <- syscall.SIGTERM
	}()
	fmt.Println("exit", sup.Run(stop))
	// Output:
	// 200 hello from one of 2 workers
	// exit 0
}
