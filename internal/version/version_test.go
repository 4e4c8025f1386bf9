package version

import (
	"regexp"
	"testing"
)

// TestLine: what --version prints names the release, the distribution, a
// commit, the Go version and the platform.
func TestLine(t *testing.T) {
	re := regexp.MustCompile(`^m0serve \d+\.\d+\.\d+ \(m0serve-go, commit \S+, go1\.\S+, [a-z0-9]+/[a-z0-9]+\)$`)
	if l := Line(); !re.MatchString(l) {
		t.Fatalf("%q", l)
	}
	commit = "0123456789ab"
	defer func() { commit = "" }()
	if c := Commit(); c != "0123456789ab" {
		t.Fatalf("the commit the build named: %q", c)
	}
	if b := Build(); b["commit"] != "0123456789ab" || b["version"] != Number || b["distribution"] != Distribution {
		t.Fatalf("%v", b)
	}
}
