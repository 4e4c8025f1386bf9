package pgbus

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzRedact: whatever the password, in a URL or in key=value form, the
// DSN as --pg-listen's value, the doctor and the logs print it holds no
// trace of it.
func FuzzRedact(f *testing.F) {
	for _, c := range [][3]string{
		{"app", "hunter2", "db"}, {"app", "p@ss:w/rd", "db:5432"}, {"app", "it's", "db"}, {"", "hunter2", "db"},
		{"app", "pa%zzss", "db"}, {"a b", "two words", "db"}, {"app", "x'y z'", "db"},
	} {
		f.Add(c[0], c[1], c[2], uint8(0))
		f.Add(c[0], c[1], c[2], uint8(1))
		f.Add(c[0], c[1], c[2], uint8(2))
	}
	f.Add("app", "hunter2", "db/x?password=hunter2", uint8(0))
	f.Fuzz(func(t *testing.T, user, password, host string, form uint8) {
		written := func(password string) string {
			switch form % 3 {
			case 0: // a URL, its user info escaped as a client library writes it
				return (&url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: host, Path: "/x"}).String()
			case 1: // a URL, written by hand: the password as it is
				return "postgresql://" + user + ":" + password + "@" + host + "/x"
			}
			// libpq's key=value, the password quoted as libpq quotes it
			q := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(password)
			return "host=" + host + " user=" + user + " password='" + q + "' dbname=x"
		}
		dsn := written(password)
		escaped := strings.TrimPrefix(url.UserPassword("", password).String(), ":")
		if rest := written(""); len(password) < 4 || strings.Contains(rest+"xxxxx", password) || strings.Contains(rest+"xxxxx", escaped) {
			return // a password the rest of the DSN holds anyway
		}
		if got := Redact(dsn); strings.Contains(got, password) || strings.Contains(got, escaped) {
			t.Fatalf("Redact(%q) = %q: the password shows", dsn, got)
		}
	})
}
