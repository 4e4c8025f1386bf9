package proc

import "os"

// AnonFile returns a new empty file, named name, that no path leads to:
// macOS has no memfd_create, so it is made in the temporary directory and
// unlinked at once (close-on-exec, as os.CreateTemp makes it).
func AnonFile(name string) (*os.File, error) {
	f, err := os.CreateTemp("", name+"-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
