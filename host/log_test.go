package host

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"testing"
)

func TestLogHandler(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(newLogHandler(&out, nil))
	tb := "Traceback (most recent call last):\n  File \"app.py\", line 3, in boom\n    raise RuntimeError(\"boom\")\nRuntimeError: boom\n"
	log.Error("wsgi: application error", "method", "GET", "path", "/boom", "error", "RuntimeError: boom", tracebackKey, tb)
	log.Info("asgi: the application does not support lifespan; serving it without", "detail", "ValueError: no")
	log.Debug("not shown")
	log.With("worker", 0).WithGroup("g").Info("grouped", "traceback", "a\nb")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d ERROR wsgi: application error method=GET path=/boom error="RuntimeError: boom"$`,
		`^Traceback \(most recent call last\):$`,
		`^  File "app.py", line 3, in boom$`,
		`^    raise RuntimeError\("boom"\)$`,
		`^RuntimeError: boom$`,
		`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d INFO asgi: the application does not support lifespan; serving it without detail="ValueError: no"$`,
		`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d INFO grouped worker=0 g.traceback="a\\nb"$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("line %d: %q does not match %s", i, lines[i], w)
		}
	}
}
