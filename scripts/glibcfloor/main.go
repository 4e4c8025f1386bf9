// Command glibcfloor prints the platform tag a Linux binary's wheel takes:
// manylinux_X_Y_ARCH, where glibc X.Y is the newest version of a symbol the
// binary imports from it (the oldest glibc it runs on), and ARCH the ELF
// machine's name in Python's platform tags.
//
//	go run ./scripts/glibcfloor BINARY
package main

import (
	"debug/elf"
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: glibcfloor BINARY")
		os.Exit(2)
	}
	tag, err := platformTag(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "glibcfloor:", err)
		os.Exit(1)
	}
	fmt.Println(tag)
}

// arches are the ELF machines a wheel is built for, by tag name.
var arches = map[elf.Machine]string{elf.EM_X86_64: "x86_64", elf.EM_AARCH64: "aarch64"}

func platformTag(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	arch, ok := arches[f.Machine]
	if !ok {
		return "", fmt.Errorf("%s is for %s, which no wheel here is built for", path, f.Machine)
	}
	syms, err := f.ImportedSymbols()
	if err != nil {
		return "", err
	}
	major, minor := 0, 0
	for _, s := range syms {
		v, ok := strings.CutPrefix(s.Version, "GLIBC_")
		if !ok {
			continue
		}
		switch v {
		case "ABI_DT_RELR": // packed relative relocations: glibc 2.36
			v = "2.36"
		case "PRIVATE":
			return "", fmt.Errorf("%s imports %s from glibc's private ABI: no manylinux tag holds for it", path, s.Name)
		}
		a, b, _ := strings.Cut(v, ".")
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(strings.SplitN(b, ".", 2)[0])
		if err1 != nil || err2 != nil {
			return "", fmt.Errorf("%s: a glibc version %q that is not one", path, s.Version)
		}
		if x > major || x == major && y > minor {
			major, minor = x, y
		}
	}
	if major == 0 {
		return "", fmt.Errorf("%s imports nothing from glibc: not a binary a manylinux tag describes", path)
	}
	return fmt.Sprintf("manylinux_%d_%d_%s", major, minor, arch), nil
}
