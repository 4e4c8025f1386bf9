package wsgi_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/wsgi"
)

// A WSGI application and a Go handler on one http.ServeMux, in one
// process. A program would serve the mux with http.ListenAndServe; the
// example serves it on a test server to show the answers.
func ExampleNew() {
	app, err := m0.LoadApp("hello:application", &m0.LoadOptions{Dir: "testdata"})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok from Go\n")
	})
	mux.Handle("/", wsgi.New(app, nil))

	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, path := range []string{"/healthz", "/hello"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %d %s", path, resp.StatusCode, body)
	}
	// Output:
	// /healthz 200 ok from Go
	// /hello 200 Hello from Python at /hello
}
