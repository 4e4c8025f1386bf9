package host_test

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/m0serve/m0/host"
	"github.com/m0serve/m0/realtime"
)

// clockApp is a Go application: a handler for each loop, and a producer
// whose frames reach the streams the handler holds.
type clockApp struct{}

func (clockApp) Make(ctx host.Context) (http.Handler, error) {
	mux := host.NewMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from worker %d\n", ctx.Worker)
	})
	mux.HandleLoopFunc("GET /ticks", func(w http.ResponseWriter, r *http.Request) {
		// Approve a hold: the host holds the stream in Go from here on.
		w.Header().Set(realtime.HeaderHold, "stream")
		w.Header().Set(realtime.HeaderChannel, "ticks")
	})
	return mux, nil
}

func (clockApp) Producer() host.Producer { return tickProducer{} }

type tickProducer struct{}

func (tickProducer) Make(host.Context) error { return nil }

func (tickProducer) Step(out host.Publisher) time.Duration {
	out.Publish("ticks", out.NextID(), []byte("tick"))
	return 50 * time.Millisecond
}

// Serve runs an application with the configuration a command line and
// the M0_* variables give, until SIGTERM or SIGINT and the drain. A program
// calls host.Main(clockApp{}) instead, which reads os.Args; this example
// stops its server itself once it has read a frame.
func Example() {
	cfg, err := host.Parse([]string{"--host", "127.0.0.1", "--port", examplePort()}, func(string) string { return "" })
	if err != nil {
		log.Fatal(err)
	}
	stdout := quiet() // the ready lines Serve prints, kept out of the example's output
	exit := make(chan int)
	go func() { exit <- host.Serve(clockApp{}, cfg) }()
	base := "http://127.0.0.1:" + strconv.Itoa(cfg.Port)

	fmt.Fprint(stdout, get(base+"/hello"))
	resp, err := http.Get(base + "/ticks")
	if err != nil {
		log.Fatal(err)
	}
	// The stream opens with where it stands (an m0-position event), then
	// the producer's frames.
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "" {
			fmt.Fprintln(stdout, resp.Header.Get("Content-Type"), data)
			break
		}
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM) // the drain ends the stream
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Fprintln(stdout, "exit", <-exit)
	os.Stdout = stdout
	// Output:
	// hello from worker 0
	// text/event-stream tick
	// exit 0
}

// get returns the body at url once the server answers (within 20 s: a
// loaded machine starts it late).
func get(url string) string {
	for range 1000 {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	log.Fatalf("%s never answered", url)
	return ""
}

// examplePort is a port nothing listens on.
func examplePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// quiet points os.Stdout at nothing and returns what it was.
func quiet() *os.File {
	out := os.Stdout
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		log.Fatal(err)
	}
	os.Stdout = null
	return out
}
