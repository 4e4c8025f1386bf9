package prefork

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
}

// Watch watches every directory under dirs (new ones too) for .py files
// written, made, removed or renamed, and reports each burst of changes
// once quiet has passed, naming a file that changed.
func Watch(dirs []string, quiet time.Duration) (*Watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
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

// skipped are the directories a watch does not descend into.
func skipped(name string) bool {
	return name == "__pycache__" || name == "node_modules" || strings.HasPrefix(name, ".")
}

func (w *Watcher) addTree(root string) error {
	if _, err := os.Stat(root); err != nil {
		return err
	}
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if path != root && skipped(d.Name()) {
			return filepath.SkipDir
		}
		return w.w.Add(path)
	})
}

func (w *Watcher) run(quiet time.Duration) {
	var timer *time.Timer
	var fire <-chan time.Time
	changed := ""
	for {
		select {
		case e, ok := <-w.w.Events:
			if !ok {
				return
			}
			if e.Has(fsnotify.Create) {
				if fi, err := os.Stat(e.Name); err == nil && fi.IsDir() && !skipped(filepath.Base(e.Name)) {
					w.addTree(e.Name)
					continue
				}
			}
			if !strings.HasSuffix(e.Name, ".py") || e.Op == fsnotify.Chmod {
				continue
			}
			changed = e.Name
			if timer == nil {
				timer = time.NewTimer(quiet)
			} else {
				timer.Reset(quiet)
			}
			fire = timer.C
		case <-fire:
			fire = nil
			select {
			case w.changes <- changed:
			default: // one reload is waiting already
			}
		case <-w.w.Errors:
		case <-w.done:
			return
		}
	}
}

// Changes receives a changed file's name after each burst of changes.
func (w *Watcher) Changes() <-chan string { return w.changes }

// Close stops watching.
func (w *Watcher) Close() error {
	close(w.done)
	return w.w.Close()
}
