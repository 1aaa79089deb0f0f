package scan

import "sync"

// rootQueue hands a scan's workers their roots as the walk finds them,
// and the imports that had to wait: a root is first loaded on its own; its
// import follows at once when the process it is imported into is loaded,
// and is otherwise put back until no root is left to load, so that no
// worker waits for a process while there is other work. At most `most`
// imports wait: each holds its root's process, and while the first scan
// of an environment asks its interpreter for its paths (tens of
// milliseconds, or as long as a slow wrapper takes) the workers would load
// every root on their own: 546 of the GPU environment's on 16, and that
// scan peaked 7 MiB higher there. Past that, a worker takes the oldest
// and waits for its process.
type rootQueue struct {
	mu      sync.Mutex
	cond    sync.Cond
	fresh   []string // roots found and not yet taken
	waiting []*rootJob
	most    int
	seen    map[string]bool
	closed  bool // the walk is done: no root comes after fresh
	ready   func(file string) bool
}

// rootJob is a root loaded on its own whose import waits.
type rootJob struct {
	path  string
	alone *Root
}

func newRootQueue(ready func(file string) bool, most int) *rootQueue {
	q := &rootQueue{seen: map[string]bool{}, ready: ready, most: max(most, 1)}
	q.cond.L = &q.mu
	return q
}

// add queues a root found, once however often it is found.
func (q *rootQueue) add(path string) {
	q.mu.Lock()
	if !q.seen[path] {
		q.seen[path] = true
		q.fresh = append(q.fresh, path)
		q.cond.Signal()
	}
	q.mu.Unlock()
}

// close says that every root has been added.
func (q *rootQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// wait puts back an import that would wait.
func (q *rootQueue) wait(j *rootJob) {
	q.mu.Lock()
	q.waiting = append(q.waiting, j)
	q.mu.Unlock()
	q.cond.Signal()
}

// next is the next work: a fresh root (job.alone nil) while fewer than
// most imports wait, else a waiting import: once the walk is done, or when
// most wait, the first (the worker waits for its process); before, one
// that would start at once, trying one per call so that the workers do
// not queue behind each other on the lock while it is asked. false when
// nothing is left.
func (q *rootQueue) next() (*rootJob, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		full := len(q.waiting) >= q.most
		if len(q.fresh) > 0 && !full {
			p := q.fresh[0]
			q.fresh = q.fresh[1:]
			return &rootJob{path: p}, true
		}
		if len(q.waiting) > 0 {
			j := q.waiting[0]
			q.waiting = q.waiting[1:]
			if q.closed || full {
				return j, true
			}
			q.mu.Unlock()
			ready := q.ready(j.path)
			q.mu.Lock()
			if ready {
				return j, true
			}
			q.waiting = append(q.waiting, j) // another is tried next time
			if len(q.fresh) > 0 || q.closed {
				continue
			}
		}
		if q.closed {
			return nil, false
		}
		q.cond.Wait()
	}
}
