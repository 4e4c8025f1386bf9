package middleware_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/m0serve/m0/middleware"
)

func TestAccessLogFormat(t *testing.T) {
	var out bytes.Buffer
	mw, err := middleware.AccessLogWith(&out, middleware.AccessLogOptions{Format: middleware.DefaultAccessFormat + ` %(D)s %({X-Out}o)s %(q)s`})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Out", "yes")
		w.Write([]byte("hello"))
	}))
	r := httptest.NewRequest("GET", "/p?a=b", nil)
	r.RemoteAddr = "10.0.0.7:5555"
	r.SetBasicAuth("ann", "secret")
	r.Header.Set("User-Agent", "ua/1")
	h.ServeHTTP(httptest.NewRecorder(), r)
	want := regexp.MustCompile(`^10\.0\.0\.7 - ann \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "GET /p\?a=b HTTP/1\.1" 200 5 "-" "ua/1" \d+ yes a=b\n$`)
	if !want.Match(out.Bytes()) {
		t.Errorf("line %q", out.String())
	}
	for _, bad := range []string{"%(zz)s", "%(h", "%({X}z)s"} {
		if _, err := middleware.AccessLogWith(&out, middleware.AccessLogOptions{Format: bad}); err == nil {
			t.Errorf("format %q accepted", bad)
		}
	}
	if _, err := middleware.AccessLogWith(&out, middleware.AccessLogOptions{Fields: []string{"referer", "referer"}}); err == nil {
		t.Error("a field named twice was accepted")
	}
	if _, err := middleware.AccessLogWith(&out, middleware.AccessLogOptions{Fields: []string{"cookie"}}); err == nil || !strings.Contains(err.Error(), "user_agent") {
		t.Errorf("an unknown field: %v", err)
	}
}
