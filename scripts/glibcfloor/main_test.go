package main

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
)

func TestTag(t *testing.T) {
	for _, c := range []struct {
		floor [2]int
		arch  string
		want  string
	}{
		{[2]int{2, 17}, "x86_64", "manylinux_2_17_x86_64.manylinux2014_x86_64"},
		{[2]int{2, 17}, "aarch64", "manylinux_2_17_aarch64.manylinux2014_aarch64"},
		{[2]int{2, 5}, "x86_64", "manylinux_2_5_x86_64.manylinux1_x86_64"},
		{[2]int{2, 34}, "x86_64", "manylinux_2_34_x86_64"},
	} {
		if got := tag(c.floor, c.arch); got != c.want {
			t.Errorf("tag(%v, %s) = %s, want %s", c.floor, c.arch, got, c.want)
		}
	}
}

func TestVersion(t *testing.T) {
	for in, want := range map[string][2]int{"2.17": {2, 17}, "2.3.4": {2, 3}, "2.36": {2, 36}} {
		if got, err := version(in); err != nil || got != want {
			t.Errorf("version(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "2", "x.y", "2.x"} {
		if _, err := version(in); err == nil {
			t.Errorf("version(%q) took it", in)
		}
	}
	if !newer([2]int{2, 18}, [2]int{2, 17}) || !newer([2]int{3, 0}, [2]int{2, 40}) || newer([2]int{2, 17}, [2]int{2, 17}) {
		t.Error("newer orders versions wrongly")
	}
}

// TestGlibcFloor reads a dynamically linked system binary (its floor is at
// most the running glibc's) and refuses a file that imports nothing from
// glibc (a program built without cgo: no dynamic symbols) and one that is
// no ELF at all.
func TestGlibcFloor(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads this machine's ELF binaries")
	}
	floor, arch, err := glibcFloor("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]; arch != want {
		t.Errorf("arch %s, want %s", arch, want)
	}
	if floor[0] != 2 || floor[1] < 2 {
		t.Errorf("/bin/sh's glibc floor %v", floor)
	}
	dir := t.TempDir()
	os.WriteFile(dir+"/main.go", []byte("package main\n\nfunc main() {}\n"), 0o644)
	build := exec.Command("go", "build", "-o", dir+"/static", dir+"/main.go")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if _, _, err := glibcFloor(dir + "/static"); err == nil {
		t.Error("a static binary: no error")
	}
	text := dir + "/text"
	os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755)
	if _, _, err := glibcFloor(text); err == nil {
		t.Error("a script: no error")
	}
}
