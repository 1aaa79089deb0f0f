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
// import: once the walk is done, the first (a worker has nothing else to
// do than wait for its process); before, one that would start at once,
// trying one per call so that the workers do not queue behind each other
// on the lock while it is asked. false when nothing is left.
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
			j := q.waiting[0]
			q.waiting = q.waiting[1:]
			if q.closed {
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
