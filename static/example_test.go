package static_test

import (
	"log"
	"net/http"

	"github.com/m0serve/m0/static"
)

// A directory served in front of another handler: /assets/ files come
// from ./public, and everything else (a file that is not there included)
// goes to the application.
func ExampleNew() {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("the application\n"))
	})
	h, err := static.New("public", &static.Options{
		Prefix:       "/assets/",
		CacheControl: "public, max-age=3600",
		Headers:      []static.Header{{Name: "X-Frame-Options", Value: "DENY"}},
		Next:         app,
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:8000", h))
}
