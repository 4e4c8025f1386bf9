// Command glibcfloor prints the platform tag a Linux binary's wheel takes:
// manylinux_X_Y_ARCH, where glibc X.Y is the newest version of a symbol the
// binary imports from it (the oldest glibc it runs on), and ARCH the ELF
// machine's name in Python's platform tags. Where a legacy name covers the
// same floor (manylinux2014 is glibc 2.17), the tag carries both, as
// auditwheel writes them. With -max X.Y it fails (exit 1) when the binary
// needs a glibc newer than X.Y: scripts/wheel --all checks each cross-built
// binary against the floor it was built for.
//
// A macOS binary (Mach-O) takes macosx_X_Y_ARCH, where X.Y is the oldest
// macOS it runs on, as its LC_BUILD_VERSION says; -max X.Y bounds that one.
// It must be signed (arm64) and link only the system's libraries.
//
//	go run ./scripts/glibcfloor [-max X.Y] BINARY
package main

import (
	"debug/elf"
	"debug/macho"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	most := flag.String("max", "", "fail when the binary needs a glibc newer than this X.Y")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: glibcfloor [-max X.Y] BINARY")
		os.Exit(2)
	}
	path := flag.Arg(0)
	if f, err := macho.Open(path); err == nil {
		defer f.Close()
		t, err := macTag(f, *most)
		if err != nil {
			fmt.Fprintf(os.Stderr, "glibcfloor: %s: %v\n", path, err)
			os.Exit(1)
		}
		fmt.Println(t)
		return
	}
	floor, arch, err := glibcFloor(path)
	if err == nil && *most != "" {
		var limit [2]int
		if limit, err = version(*most); err == nil && newer(floor, limit) {
			err = fmt.Errorf("%s needs glibc %d.%d, newer than the %s it was built for (%s)", path, floor[0], floor[1], *most, newest(path, limit))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "glibcfloor:", err)
		os.Exit(1)
	}
	fmt.Println(tag(floor, arch))
}

// legacy are the manylinux names that cover a glibc floor.
var legacy = map[[2]int]string{{2, 5}: "manylinux1", {2, 12}: "manylinux2010", {2, 17}: "manylinux2014"}

// tag is the platform tag of a binary needing glibc floor on arch.
func tag(floor [2]int, arch string) string {
	t := fmt.Sprintf("manylinux_%d_%d_%s", floor[0], floor[1], arch)
	if name, ok := legacy[floor]; ok {
		t += "." + name + "_" + arch
	}
	return t
}

func newer(a, b [2]int) bool { return a[0] > b[0] || a[0] == b[0] && a[1] > b[1] }

// version reads "X.Y" (a glibc symbol version's number, less any patch).
func version(v string) ([2]int, error) {
	a, b, _ := strings.Cut(v, ".")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(strings.SplitN(b, ".", 2)[0])
	if err1 != nil || err2 != nil {
		return [2]int{}, fmt.Errorf("a glibc version %q that is not one", v)
	}
	return [2]int{x, y}, nil
}

// newest names the binary's imports that need a glibc newer than limit.
func newest(path string, limit [2]int) string {
	f, err := elf.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	syms, _ := f.ImportedSymbols()
	var over []string
	for _, s := range syms {
		if v, ok := strings.CutPrefix(s.Version, "GLIBC_"); ok {
			if n, err := version(v); err == nil && newer(n, limit) {
				over = append(over, s.Name+"@"+s.Version)
			}
		}
	}
	return strings.Join(over, ", ")
}

// arches are the ELF machines a wheel is built for, by tag name.
var arches = map[elf.Machine]string{elf.EM_X86_64: "x86_64", elf.EM_AARCH64: "aarch64"}

// glibcFloor is the newest glibc version the binary at path imports a
// symbol of, and its architecture's tag name.
func glibcFloor(path string) (floor [2]int, arch string, err error) {
	f, err := elf.Open(path)
	if err != nil {
		return floor, "", err
	}
	defer f.Close()
	arch, ok := arches[f.Machine]
	if !ok {
		return floor, "", fmt.Errorf("%s is for %s, which no wheel here is built for", path, f.Machine)
	}
	syms, err := f.ImportedSymbols()
	if err != nil {
		return floor, "", err
	}
	for _, s := range syms {
		v, ok := strings.CutPrefix(s.Version, "GLIBC_")
		if !ok {
			continue
		}
		switch v {
		case "ABI_DT_RELR": // packed relative relocations: glibc 2.36
			v = "2.36"
		case "PRIVATE":
			return floor, "", fmt.Errorf("%s imports %s from glibc's private ABI: no manylinux tag holds for it", path, s.Name)
		}
		n, err := version(v)
		if err != nil {
			return floor, "", fmt.Errorf("%s: %v", path, err)
		}
		if newer(n, floor) {
			floor = n
		}
	}
	if floor[0] == 0 {
		return floor, "", fmt.Errorf("%s imports nothing from glibc: not a binary a manylinux tag describes", path)
	}
	return floor, arch, nil
}

// macArches are the Mach-O CPUs a wheel is built for, by tag name.
var macArches = map[macho.Cpu]string{macho.CpuArm64: "arm64", macho.CpuAmd64: "x86_64"}

// macTag is the platform tag of a macOS binary: macosx_X_Y_ARCH, X.Y the
// minimum macOS of its LC_BUILD_VERSION (X_0 from macOS 11 on, as pip
// reads it), failing when it is newer than most ("" for no bound).
func macTag(f *macho.File, most string) (string, error) {
	arch, ok := macArches[f.Cpu]
	if !ok {
		return "", fmt.Errorf("a Mach-O binary for %s, which no wheel here is built for", f.Cpu)
	}
	const lcBuildVersion = 0x32
	var floor [2]int
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) >= 16 && f.ByteOrder.Uint32(raw) == lcBuildVersion {
			minos := binary.LittleEndian.Uint32(raw[12:])
			floor = [2]int{int(minos >> 16), int(minos >> 8 & 0xff)}
		}
	}
	if floor[0] == 0 {
		return "", fmt.Errorf("no LC_BUILD_VERSION: the oldest macOS it runs on is not recorded")
	}
	// macOS runs no arm64 binary unsigned, and a library from anywhere but
	// the system's places would be the build machine's.
	const lcCodeSignature = 0x1d
	signed := false
	for _, l := range f.Loads {
		if raw := l.Raw(); len(raw) >= 4 && f.ByteOrder.Uint32(raw) == lcCodeSignature {
			signed = true
		}
	}
	if !signed && f.Cpu == macho.CpuArm64 {
		return "", fmt.Errorf("not signed (no LC_CODE_SIGNATURE): macOS would not run it")
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return "", err
	}
	for _, lib := range libs {
		if !strings.HasPrefix(lib, "/usr/lib/") && !strings.HasPrefix(lib, "/System/Library/") {
			return "", fmt.Errorf("links %s, which is not the system's", lib)
		}
	}
	if most != "" {
		limit, err := version(most)
		if err != nil {
			return "", err
		}
		if newer(floor, limit) {
			return "", fmt.Errorf("needs macOS %d.%d, newer than the %s it was built for", floor[0], floor[1], most)
		}
	}
	if floor[0] >= 11 {
		floor[1] = 0
	}
	return fmt.Sprintf("macosx_%d_%d_%s", floor[0], floor[1], arch), nil
}
