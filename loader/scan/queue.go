package scan

import "sync"

// rootQueue hands a scan's workers their roots as the walk finds them,
// and the imports that had to wait: a root is first loaded on its own; its
// import follows at once when the process it is imported into is loaded,
// and is otherwise put back until no root is left to load, so that no
// worker waits for a process while there is other work.
type rootQueue struct {
	mu      sync.Mutex
	cond    sync.Cond
	fresh   []string // roots found and not yet taken
	waiting []*rootJob
	seen    map[string]bool
	closed  bool // the walk is done: no root comes after fresh
	ready   func(file string) bool
}

// rootJob is a root loaded on its own whose import waits.
type rootJob struct {
	path  string
	alone *Root
}

// readyWindow bounds how many waiting imports a worker looks at for one
// that would start at once before it waits for the first.
const readyWindow = 16

func newRootQueue(ready func(file string) bool) *rootQueue {
	q := &rootQueue{seen: map[string]bool{}, ready: ready}
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

// next is the next work: a fresh root (job.alone nil), else a waiting
// import that would start at once, else the first waiting import; false
// when nothing is left.
func (q *rootQueue) next() (*rootJob, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if len(q.fresh) > 0 {
			p := q.fresh[0]
			q.fresh = q.fresh[1:]
			return &rootJob{path: p}, true
		}
		if len(q.waiting) > 0 {
			i := q.firstReady()
			if i >= 0 || q.closed {
				i = max(i, 0)
				j := q.waiting[i]
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				return j, true
			}
		}
		if q.closed {
			return nil, false
		}
		q.cond.Wait()
	}
}

// firstReady is the index of the first of the first readyWindow waiting
// imports that would start at once, -1 when none would.
func (q *rootQueue) firstReady() int {
	for i, j := range q.waiting[:min(len(q.waiting), readyWindow)] {
		if q.ready(j.path) {
			return i
		}
	}
	return -1
}
