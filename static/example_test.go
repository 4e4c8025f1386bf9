package static_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/m0serve/m0/static"
)

// A directory served in front of an application: /assets/ files come from
// the directory, and everything else, a file that is not there included,
// goes to the application. A program would serve the handler with
// http.ListenAndServe; the example serves it on a test server to show the
// answers.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "public")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "site.css"), []byte("body { margin: 0 }\n"), 0o644)

	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "the application, for %s\n", r.URL.Path)
	})
	h, err := static.New(dir, &static.Options{
		Prefix:       "/assets/",
		CacheControl: "public, max-age=3600",
		Headers:      []static.Header{{Name: "X-Frame-Options", Value: "DENY"}},
		Next:         app,
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, path := range []string{"/assets/site.css", "/assets/missing.css", "/"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s %d %q %q %s", path, resp.StatusCode, resp.Header.Get("Content-Type"),
			resp.Header.Get("Cache-Control"), body)
	}
	// Output:
	// /assets/site.css 200 "text/css; charset=utf-8" "public, max-age=3600" body { margin: 0 }
	// /assets/missing.css 200 "text/plain; charset=utf-8" "" the application, for /assets/missing.css
	// / 200 "text/plain; charset=utf-8" "" the application, for /
}
