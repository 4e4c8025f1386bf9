package sysmon

import "testing"

func TestGodebug(t *testing.T) {
	tests := []struct {
		cur  string
		cpus int
		want string
		ok   bool
	}{
		{"", 1, "schedtrace=" + Period, true},
		{"madvdontneed=1", 1, "madvdontneed=1,schedtrace=" + Period, true},
		{"", 2, "", false},
		{"madvdontneed=1", 8, "madvdontneed=1", false},
		{"schedtrace=0", 1, "schedtrace=0", false},
		{"gctrace=1, schedtrace=500", 1, "gctrace=1, schedtrace=500", false},
		{"  ", 1, "schedtrace=" + Period, true},
	}
	for _, tt := range tests {
		got, ok := godebug(tt.cur, tt.cpus)
		if got != tt.want || ok != tt.ok {
			t.Errorf("godebug(%q, %d) = %q, %v; want %q, %v", tt.cur, tt.cpus, got, ok, tt.want, tt.ok)
		}
	}
}
