package scan

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// listing is one directory, listed ahead of the walk.
type listing struct {
	dir      string
	entries  []fs.DirEntry
	children []*listing // for the entries that are directories
	err      error
	done     chan struct{}
}

// listers list directories from a stack of pending ones: the last pushed
// first, so they run ahead of the walk in its own depth-first order.
type listers struct {
	mu      sync.Mutex
	more    *sync.Cond
	pending []*listing
	stopped bool
}

func (ls *listers) push(l []*listing) {
	ls.mu.Lock()
	for i := len(l) - 1; i >= 0; i-- { // the first child on top
		ls.pending = append(ls.pending, l[i])
	}
	ls.mu.Unlock()
	ls.more.Broadcast()
}

func (ls *listers) stop() {
	ls.mu.Lock()
	ls.stopped = true
	ls.mu.Unlock()
	ls.more.Broadcast()
}

func (ls *listers) run() {
	for {
		ls.mu.Lock()
		for len(ls.pending) == 0 && !ls.stopped {
			ls.more.Wait()
		}
		if ls.stopped {
			ls.mu.Unlock()
			return
		}
		l := ls.pending[len(ls.pending)-1]
		ls.pending = ls.pending[:len(ls.pending)-1]
		ls.mu.Unlock()

		l.entries, l.err = os.ReadDir(l.dir)
		l.children = make([]*listing, len(l.entries))
		var sub []*listing
		for i, e := range l.entries {
			if e.IsDir() {
				c := &listing{dir: filepath.Join(l.dir, e.Name()), done: make(chan struct{})}
				l.children[i] = c
				sub = append(sub, c)
			}
		}
		close(l.done)
		if len(sub) > 0 {
			ls.push(sub)
		}
	}
}

// walkOrdered calls fn for every entry under root in the order, and with
// the arguments, of filepath.WalkDir (lexical order, symlinks not
// followed), while parallel goroutines (GOMAXPROCS when 0) list the
// directories ahead of it: over a large tree, listing is most of a walk.
func walkOrdered(ctx context.Context, root string, parallel int, fn fs.WalkDirFunc) error {
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	info, err := os.Lstat(root)
	if err != nil {
		return fn(root, nil, err)
	}
	d := fs.FileInfoToDirEntry(info)
	if !d.IsDir() {
		return fn(root, d, nil)
	}
	ls := &listers{}
	ls.more = sync.NewCond(&ls.mu)
	top := &listing{dir: root, done: make(chan struct{})}
	ls.push([]*listing{top})
	for i := 0; i < parallel; i++ {
		go ls.run()
	}
	defer ls.stop()
	var walk func(path string, d fs.DirEntry, l *listing) error
	walk = func(path string, d fs.DirEntry, l *listing) error {
		if err := fn(path, d, nil); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-l.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if l.err != nil {
			if err := fn(path, d, l.err); err != nil {
				return err
			}
		}
		for i, e := range l.entries {
			p := filepath.Join(path, e.Name())
			if c := l.children[i]; c != nil {
				if err := walk(p, e, c); err != nil {
					return err
				}
			} else if err := fn(p, e, nil); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(root, d, top)
}
