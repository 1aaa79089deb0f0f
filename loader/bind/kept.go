package bind

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/cudadeps/cudadeps/internal/factcache"
	"github.com/cudadeps/cudadeps/internal/freelist"
	"github.com/cudadeps/cudadeps/loader/ldso"
)

// Kept holds the answers of checks from one run to the next. An answer is
// kept under a key made of the files it was computed from, each with what
// stat said of it when the loader read it (factcache.Stamp): a file changed
// since gives another key, so a kept answer is only ever taken for the
// very files it was computed from. A check answered from it reads no
// symbol table. Kept is safe for concurrent use.
type Kept struct {
	dir  factcache.Dir
	name string

	mu  sync.Mutex
	old map[keptKey][]KeptMiss
	// now are the answers this run used or computed: what Save writes, so
	// that what is kept stays the size of one run's checks.
	now map[keptKey][]KeptMiss
	// settled: files changed after this may change again without
	// changing their stamps; answers that depend on them are not kept.
	settled int64
	// program is this program as stat saw it: another build may bind
	// otherwise, and keys of its answers differ.
	program string
	// recalled, computed and unkept count the checks this run answered
	// from what was kept, those it computed and kept, and those it
	// computed and could not key (a file changed moments before the run).
	recalled, computed, unkept int
	// buffers are the buffers keys are hashed from, one a worker, each
	// of at most maxKeyBuffer bytes: they are live for the whole run.
	buffers freelist.List[*[]byte]
}

type keptKey [sha256.Size]byte

// maxKeyBuffer bounds a buffer kept to hash keys from: a scope of a few
// hundred files (a path and its stamp each) fits.
const maxKeyBuffer = 64 << 10

// KeptMiss is a reference kept unbound: the index of its object in the
// objects checked, and the reference (exported for the cache's encoding).
type KeptMiss struct {
	Of                    int32
	Symbol, Version, File string
}

// keptVersion changes when what a check answers changes for the same
// files: answers kept by an earlier version are not taken.
const keptVersion = "bind 1"

// keptFiles bounds the files of kept answers in a cache directory, one
// per machine and what key names.
const keptFiles = 64

// LoadKept reads the answers kept in dir on this machine for what is
// named by the parts of key (a target and its environment, a scan's
// paths); a cache that is absent, damaged or of another version gives an
// empty Kept, and so does the zero Dir. start is when the run began.
// One file a machine: the nodes of a cluster share a home on a network
// file system, and each sees the files under stamps of its own.
func LoadKept(dir factcache.Dir, start time.Time, key ...string) *Kept {
	host, _ := os.Hostname()
	k := &Kept{dir: dir, name: factcache.Key("bind", append([]string{host}, key...)...), old: map[keptKey][]KeptMiss{}, now: map[keptKey][]KeptMiss{}, buffers: freelist.List[*[]byte]{Max: runtime.GOMAXPROCS(0)}, settled: start.Add(-factcache.SettleMargin).UnixNano()}
	if exe, err := os.Executable(); err == nil {
		k.program = fmt.Sprintf("%s %+v", exe, factcache.Take(exe))
	}
	var saved keptFile
	if dir.Load(k.name, &saved) && saved.Version == keptVersion {
		for _, a := range saved.Answers {
			k.old[a.Key] = a.Misses
		}
	}
	return k
}

// keptFile is what Save writes.
type keptFile struct {
	Version string
	Answers []keptAnswer
}

type keptAnswer struct {
	Key    keptKey
	Misses []KeptMiss
}

// Save writes the answers this run used or computed where they were
// loaded from, in place of those kept before; nothing when there were
// none, when they are those kept before, or with no cache directory.
func (k *Kept) Save() error {
	k.mu.Lock()
	if k.computed == 0 && len(k.now) == len(k.old) {
		// Every answer used was loaded, and as many as were loaded:
		// the file holds these already.
		k.mu.Unlock()
		return nil
	}
	f := keptFile{Version: keptVersion, Answers: make([]keptAnswer, 0, len(k.now))}
	for key, m := range k.now {
		f.Answers = append(f.Answers, keptAnswer{key, m})
	}
	k.mu.Unlock()
	if len(f.Answers) == 0 || k.dir.Path() == "" {
		return nil
	}
	if err := k.dir.Save(k.name, f); err != nil {
		return err
	}
	k.dir.Trim("bind-", keptFiles)
	return nil
}

// Len is the number of answers this run used or computed.
func (k *Kept) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.now)
}

// Counts are the checks this run answered from what was kept, those it
// computed (kept or not), and of those the ones it could not keep.
func (k *Kept) Counts() (recalled, computed, unkept int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.recalled, k.computed + k.unkept, k.unkept
}

// notKeyed counts a check computed without a key.
func (k *Kept) notKeyed() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.unkept++
}

// key is the key of a check of the objects examined (those found, with a
// file) in the scope whose distinct files are members; false when a file
// has no stamp, or one that is too recent to be trusted.
func (k *Kept) key(members []*file, examined []*ldso.Object) (keptKey, bool) {
	// What is hashed is gathered in one buffer, reused from check to
	// check: hashing it piece by piece copied every path to the heap, for
	// each member of each check.
	bp, ok := k.buffers.Get()
	if !ok {
		bp = new([]byte)
	}
	buf := (*bp)[:0]
	defer func() {
		if cap(buf) <= maxKeyBuffer {
			*bp = buf // grown, maybe
			k.buffers.Put(bp)
		}
	}()
	put := func(path string, s factcache.Stamp) bool {
		if s.Missing() || s.Mtime >= k.settled || s.Ctime >= k.settled {
			return false
		}
		buf = append(buf, path...)
		buf = append(buf, 0)
		for _, v := range [...]uint64{s.Dev, s.Ino, uint64(s.Size), uint64(s.Mtime), uint64(s.Ctime)} {
			buf = binary.LittleEndian.AppendUint64(buf, v)
		}
		return true
	}
	buf = append(buf, keptVersion...)
	buf = append(buf, 0)
	buf = append(buf, k.program...)
	buf = append(buf, 0)
	for _, m := range members {
		if !put(m.path, m.stamp) {
			return keptKey{}, false
		}
	}
	buf = append(buf, 1)
	for _, o := range examined {
		if !put(o.HostPath, o.Stamp()) {
			return keptKey{}, false
		}
	}
	return sha256.Sum256(buf), true
}

// recall returns the kept answer of key.
func (k *Kept) recall(key keptKey) ([]KeptMiss, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	m, ok := k.now[key]
	if !ok {
		if m, ok = k.old[key]; ok {
			k.now[key] = m
		}
	}
	if ok {
		k.recalled++
	}
	return m, ok
}

// keep keeps the answer of key.
func (k *Kept) keep(key keptKey, m []KeptMiss) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.now[key] = m
	k.computed++
}
