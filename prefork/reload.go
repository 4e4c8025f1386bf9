package prefork

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// ReloadDebounce is how long a watcher waits after a change for the next
// before it reports them: an editor's save, or a checkout, is one reload.
const ReloadDebounce = 300 * time.Millisecond

// Watcher reports changes to the .py files under some directories.
type Watcher struct {
	w       *fsnotify.Watcher
	changes chan string
	done    chan struct{}
	once    sync.Once
}

// Watch watches every directory under dirs (new ones too) for .py files
// written, made, removed or renamed, and reports each burst of changes
// once quiet has passed, naming a file that changed.
func Watch(dirs []string, quiet time.Duration) (*Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("prefork: watching for changes: %w", err)
	}
	w := &Watcher{w: fw, changes: make(chan string, 1), done: make(chan struct{})}
	for _, d := range dirs {
		if err := w.addTree(d); err != nil {
			fw.Close()
			return nil, err
		}
	}
	go w.run(quiet)
	return w, nil
}

// skipped are the directories a watch does not descend into: caches,
// hidden directories, and virtualenvs (a pip install is no change of the
// application's, and a virtualenv's files would take thousands of
// watches).
func skipped(path string) bool {
	name := filepath.Base(path)
	if name == "__pycache__" || name == "node_modules" || name == "site-packages" || strings.HasPrefix(name, ".") {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "pyvenv.cfg"))
	return err == nil
}

func (w *Watcher) addTree(root string) error {
	if _, err := os.Stat(root); err != nil {
		return err
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if path != root && skipped(path) {
			return filepath.SkipDir
		}
		return w.w.Add(path)
	})
}

func (w *Watcher) run(quiet time.Duration) {
	var timer *time.Timer
	var fire <-chan time.Time
	changed := ""
	arm := func() {
		if timer == nil {
			timer = time.NewTimer(quiet)
		} else {
			timer.Reset(quiet)
		}
		fire = timer.C
	}
	for {
		select {
		case e, ok := <-w.w.Events:
			if !ok {
				return
			}
			if e.Has(fsnotify.Create) {
				if fi, err := os.Stat(e.Name); err == nil && fi.IsDir() {
					if !skipped(e.Name) {
						w.addTree(e.Name)
						if hasPy(e.Name) { // written before its watch began
							changed = e.Name
							arm()
						}
					}
					continue
				}
			}
			if !strings.HasSuffix(e.Name, ".py") || e.Op == fsnotify.Chmod {
				continue
			}
			changed = e.Name
			arm()
		case <-fire:
			fire = nil
			select {
			case w.changes <- changed:
			default: // one reload is waiting already
			}
		case err := <-w.w.Errors:
			if errors.Is(err, fsnotify.ErrEventOverflow) { // changes were missed: reload
				changed = "a watched directory"
				arm()
			}
		case <-w.done:
			return
		}
	}
}

// Changes receives a changed file's name after each burst of changes.
func (w *Watcher) Changes() <-chan string { return w.changes }

// Close stops watching. It is safe to call more than once.
func (w *Watcher) Close() error {
	var err error
	w.once.Do(func() {
		close(w.done)
		err = w.w.Close()
	})
	return err
}

// hasPy reports whether a .py file is under dir.
func hasPy(dir string) bool {
	found := false
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".py") {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}
