package wsgi_test

import (
	"log"
	"net/http"

	"github.com/m0serve/m0"
	"github.com/m0serve/m0/wsgi"
)

// A Django site served beside a Go handler, in one process.
func ExampleNew() {
	app, err := m0.LoadApp("mysite.wsgi:application", "examples/django_site", "")
	if err != nil {
		log.Fatal(err)
	}
	site := wsgi.New(app, &wsgi.Options{Threads: 4})
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	http.Handle("/", site)
	log.Fatal(http.ListenAndServe("127.0.0.1:8000", nil))
}
