package ldso

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/cudadeps/cudadeps/loader/elfscan"
)

// pathList is one search list of the loader: the DT_RPATH of an object, the
// DT_RUNPATH of an object, LD_LIBRARY_PATH or the default directories.
type pathList struct {
	note   string // a rule that does not apply, for explanations only
	via    Via
	source string  // "RPATH of /x/liba.so", "LD_LIBRARY_PATH", ...
	owner  *Object // the object whose RPATH or RUNPATH this is
	dirs   []searchDir
	id     uint32 // the expanded list's number in its loader (Loader.listID), for the search memo
}

type searchDir struct {
	entry string // as written (before $ORIGIN and friends are expanded)
	dir   string // expanded; ends in "/" or is "" (the working directory)
}

// decompose splits a path list and expands its dynamic string tokens, like
// ld.so's fillin_rpath: empty entries mean the working directory, trailing
// slashes are normalised to one, an entry whose token cannot be expanded is
// dropped, and a directory listed twice is searched once.
func decompose(raw, seps string, origin string, a *ArchConfig) []searchDir {
	var out []searchDir
	seen := map[string]bool{}
	for _, entry := range splitKeepEmpty(raw, seps) {
		dir := ""
		if entry != "" {
			exp, ok := expandDST(entry, origin, a)
			if !ok || exp == "" {
				continue
			}
			n := len(exp)
			for n > 1 && exp[n-1] == '/' {
				n--
			}
			dir = exp[:n]
			if !strings.HasSuffix(dir, "/") {
				dir += "/"
			}
		}
		if seen[dir] {
			continue
		}
		seen[dir] = true
		out = append(out, searchDir{entry: entry, dir: dir})
	}
	return out
}

func splitKeepEmpty(s, seps string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(seps, s[i]) >= 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// expandDST replaces $ORIGIN, $PLATFORM and $LIB (also written ${NAME}). A
// '$' that starts no known token is kept as is. ok is false when a token has
// no value (no origin known), which makes ld.so drop the entry.
func expandDST(s, origin string, a *ArchConfig) (string, bool) {
	if !strings.Contains(s, "$") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		rest := s[i+1:]
		var val string
		var n int
		switch {
		case dstLen(rest, "ORIGIN") > 0:
			n, val = dstLen(rest, "ORIGIN"), origin
			if origin == "" {
				return "", false
			}
		case dstLen(rest, "PLATFORM") > 0:
			n, val = dstLen(rest, "PLATFORM"), a.Platform
			if val == "" {
				return "", false
			}
		case dstLen(rest, "LIB") > 0:
			n, val = dstLen(rest, "LIB"), a.Lib
		default:
			b.WriteByte('$')
			continue
		}
		b.WriteString(val)
		i += n
	}
	return b.String(), true
}

// dstLen is glibc's is_dst: "NAME" followed by a character that cannot
// continue an identifier, or "{NAME}".
func dstLen(s, name string) int {
	if strings.HasPrefix(s, "{"+name+"}") {
		return len(name) + 2
	}
	if !strings.HasPrefix(s, name) {
		return 0
	}
	if len(s) > len(name) {
		c := s[len(name)]
		if c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			return 0
		}
	}
	return len(name)
}

func listKey(via Via, dirs []searchDir) string {
	var b strings.Builder
	b.WriteString(string(via))
	for _, d := range dirs {
		b.WriteByte(0)
		b.WriteString(d.dir)
	}
	return b.String()
}

func (l *Loader) newPathList(via Via, source string, dirs []searchDir) *pathList {
	if len(dirs) == 0 {
		return nil
	}
	return &pathList{via: via, source: source, dirs: dirs, id: l.listID(listKey(via, dirs))}
}

// listID numbers the search lists a loader meets by what they search (the
// words of listKey): lists alike, whoever they belong to, have one number,
// which keys the search memo in four bytes instead of the words.
func (l *Loader) listID(key string) uint32 {
	if id, ok := l.lists.load(key); ok {
		return id
	}
	id, _ := l.lists.loadOrStore(key, l.nextList.Add(1))
	return id
}

// Verdict is the result of one candidate in a search.
type Verdict string

// Verdicts on a candidate, in the loader's terms.
const (
	VerdictFound        Verdict = "found"
	VerdictAbsent       Verdict = "absent"        // no such file
	VerdictNoDir        Verdict = "no_directory"  // the directory does not exist
	VerdictWrongClass   Verdict = "wrong_class"   // ELFCLASS32 vs 64: skipped
	VerdictWrongMachine Verdict = "wrong_machine" // another architecture: skipped
	VerdictUnreadable   Verdict = "unreadable"    // permission denied: skipped
	VerdictInvalid      Verdict = "invalid"       // the loader stops with an error
	VerdictSkipped      Verdict = "skipped"       // rule not applied (NODEFLIB, no cache)
	VerdictCacheMiss    Verdict = "not_in_cache"
)

// Attempt is one thing the loader tries while searching for a name.
type Attempt struct {
	Via     Via     `json:"via"`
	Source  string  `json:"source"`           // "RPATH of X", "LD_LIBRARY_PATH", "/etc/ld.so.cache", ...
	Entry   string  `json:"entry,omitempty"`  // the path list entry as written
	Dir     string  `json:"dir,omitempty"`    // the directory tried (with hwcaps subdirectory)
	Subdir  string  `json:"subdir,omitempty"` // the hwcaps subdirectory part of Dir, if any
	Path    string  `json:"path,omitempty"`   // the candidate file
	Verdict Verdict `json:"outcome"`
	Detail  string  `json:"detail,omitempty"`
}

// found is the answer of one search.
type found struct {
	ok      bool
	guest   string
	host    string
	via     Via
	from    string
	entry   string
	owner   *Object
	fi      *fileInfo
	problem string // why candidates were rejected, when nothing was found
	fatal   bool
	list    int // 1 + the index of the search list that found it; 0: none
}

// verdict classifies a candidate the way ld.so's open_verify does.
type verdict struct {
	outcome Verdict
	detail  string
	fi      *fileInfo
	host    string
}

// expect is what a candidate must match to be accepted.
type expect struct {
	class   elf.Class
	data    elf.Data
	machine elf.Machine
}

// rtldStrerror is how ld.so names an errno in the messages it prints
// while starting a program: its own short table (glibc's elf/dl-minimal.c,
// the same from 2.17 to 2.42), "Error N" for the rest, not libc's strerror.
func rtldStrerror(e syscall.Errno) string {
	switch e {
	case syscall.ENOMEM:
		return "Cannot allocate memory"
	case syscall.EINVAL:
		return "Invalid argument"
	case syscall.ENOENT:
		return "No such file or directory"
	case syscall.EPERM:
		return "Operation not permitted"
	case syscall.EIO:
		return "Input/output error"
	case syscall.EACCES:
		return "Permission denied"
	}
	return fmt.Sprintf("Error %d", int(e))
}

func (l *Loader) verify(guest string, want expect) verdict {
	host, ok := l.fs.resolve(guest)
	if !ok {
		// The loader's open fails and it goes on; a link that resolves
		// to nothing is named as such, for the one who must fix it.
		return verdict{outcome: VerdictAbsent, detail: l.fs.brokenLink(guest)}
	}
	fi := l.open(host)
	v := verdict{fi: fi, host: host}
	if fi.err != nil {
		var fe *elfscan.FormatError
		switch {
		case errors.Is(fi.err, fs.ErrNotExist), errors.Is(fi.err, syscall.ENOTDIR):
			v.outcome = VerdictAbsent
		case errors.Is(fi.err, fs.ErrPermission):
			v.outcome, v.detail = VerdictUnreadable, "permission denied"
		case errors.Is(fi.err, syscall.EISDIR):
			v.outcome, v.detail = VerdictInvalid, "cannot read file data: "+rtldStrerror(syscall.EISDIR)
		case errors.Is(fi.err, elfscan.ErrNotELF):
			v.outcome, v.detail = VerdictInvalid, "invalid ELF header"
			if st, err := statSize(host); err == nil && st < 64 {
				v.detail = "file too short"
			}
		case errors.As(fi.err, &fe):
			v.outcome, v.detail = VerdictInvalid, fe.Msg
		default:
			v.outcome, v.detail = VerdictInvalid, fi.err.Error()
		}
		return v
	}
	in := fi.info
	// The checks of open_verify, in its order.
	switch {
	case in.Class != want.class:
		v.outcome, v.detail = VerdictWrongClass, fmt.Sprintf("%s, not %s", in.Class, want.class)
	case in.Data != want.data:
		v.outcome = VerdictInvalid
		if want.data == elf.ELFDATA2MSB {
			v.detail = "ELF file data encoding not big-endian"
		} else {
			v.detail = "ELF file data encoding not little-endian"
		}
	case in.Ident[elf.EI_VERSION] != byte(elf.EV_CURRENT):
		v.outcome, v.detail = VerdictInvalid, "ELF file version ident does not match current one"
	case in.OSABI != elf.ELFOSABI_NONE && in.OSABI != elf.ELFOSABI_LINUX:
		v.outcome, v.detail = VerdictInvalid, "ELF file OS ABI invalid"
	case !validABIVersion(in):
		v.outcome, v.detail = VerdictInvalid, "ELF file ABI version invalid"
	case !zeroPadding(in):
		v.outcome, v.detail = VerdictInvalid, "nonzero padding in e_ident"
	case in.Version != uint32(elf.EV_CURRENT):
		v.outcome, v.detail = VerdictInvalid, "ELF file version does not match current one"
	case in.Machine != want.machine:
		v.outcome, v.detail = VerdictWrongMachine, fmt.Sprintf("%s, not %s", machineName(in.Machine), machineName(want.machine))
	case in.Type != elf.ET_DYN && in.Type != elf.ET_EXEC:
		v.outcome, v.detail = VerdictInvalid, "only ET_DYN and ET_EXEC can be loaded"
	case !validPhentsize(in):
		v.outcome, v.detail = VerdictInvalid, "ELF file's phentsize not the expected size"
	default:
		v.outcome = VerdictFound
	}
	return v
}

func validABIVersion(in *elfscan.Info) bool {
	if in.OSABI == elf.ELFOSABI_LINUX {
		// glibc accepts the ABI versions it knows (up to LIBC_ABI_MAX,
		// which has been below 16 in every release).
		return in.ABIVersion < 16
	}
	return in.ABIVersion == 0
}

func zeroPadding(in *elfscan.Info) bool {
	for _, b := range in.Ident[elf.EI_PAD:] {
		if b != 0 {
			return false
		}
	}
	return true
}

func validPhentsize(in *elfscan.Info) bool {
	if in.Class == elf.ELFCLASS64 {
		return in.Phentsize == 56
	}
	return in.Phentsize == 32
}

func machineName(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "x86-64"
	case elf.EM_AARCH64:
		return "aarch64"
	case elf.EM_386:
		return "i386"
	case elf.EM_ARM:
		return "arm"
	case elf.EM_PPC64:
		return "ppc64"
	case elf.EM_RISCV:
		return "riscv"
	case elf.EM_S390:
		return "s390"
	}
	return strings.ToLower(strings.TrimPrefix(m.String(), "EM_"))
}

// tracer collects the steps of one search when an explanation is wanted.
type tracer struct{ steps []Attempt }

func (t *tracer) add(s Attempt) {
	if t != nil {
		t.steps = append(t.steps, s)
	}
}

// searchLists returns the lists the loader consults for a name needed by
// loader, in order, with the rules of _dl_map_object.
func (p *Process) searchLists(loader *Object, t *tracer) []*pathList {
	// At most an RPATH per object of the load chain, LD_LIBRARY_PATH and a
	// RUNPATH; most chains are short.
	lists := make([]*pathList, 0, 4)
	// note records, for a trace, a list not searched; its words are made
	// only then.
	note := func(via Via, source string, detail func() string) {
		if t != nil {
			lists = append(lists, &pathList{via: via, source: source, note: detail()})
		}
	}
	if loader != nil && loader.Info != nil && loader.Info.HasRunPath {
		note(ViaRPath, "DT_RPATH", func() string { return "not searched: " + loader.displayName() + " has DT_RUNPATH" })
	} else {
		didMain := false
		for o := loader; o != nil; o = o.Loader {
			if rp := p.rpath(o); rp != nil {
				lists = append(lists, rp)
				didMain = didMain || o == p.main
			}
		}
		if !didMain && p.main != nil && p.main != loader {
			if rp := p.rpath(p.main); rp != nil {
				lists = append(lists, rp)
			}
		}
		if len(lists) == 0 {
			note(ViaRPath, "DT_RPATH", func() string { return "no object in the load chain has DT_RPATH" })
		}
	}
	if p.llp != nil {
		lists = append(lists, p.llp)
	} else {
		note(ViaLDLibraryPath, "LD_LIBRARY_PATH", func() string { return "not set" })
	}
	if loader != nil {
		if rp := p.runpath(loader); rp != nil {
			lists = append(lists, rp)
		} else {
			note(ViaRunPath, "DT_RUNPATH", func() string { return loader.displayName() + " has no DT_RUNPATH" })
		}
	}
	return lists
}

func (p *Process) rpath(o *Object) *pathList {
	if o.lrpath != nil {
		if o.lrpath.dirs == nil {
			return nil
		}
		return o.lrpath
	}
	var pl *pathList
	// With DT_RUNPATH present, ld.so drops DT_RPATH at load time.
	if o.Info != nil && o.Info.HasRPath && !o.Info.HasRunPath {
		pl = p.l.newPathList(ViaRPath, "RPATH of "+o.displayName(), decompose(o.Info.RPath, ":", o.origin, p.arch))
	}
	return p.keepList(o, &o.lrpath, pl)
}

// keepList keeps o's search list pl (nil: none) in *at, where p may
// change o (forks read the lists of the objects they share, and compute
// those never kept), and returns it.
func (p *Process) keepList(o *Object, at **pathList, pl *pathList) *pathList {
	if pl != nil {
		pl.owner = o
	}
	if p.mutable(o) {
		if pl != nil {
			*at = pl
		} else {
			*at = &pathList{}
		}
	}
	return pl
}

func (p *Process) runpath(o *Object) *pathList {
	if o.lrunpath != nil {
		if o.lrunpath.dirs == nil {
			return nil
		}
		return o.lrunpath
	}
	var pl *pathList
	if o.Info != nil && o.Info.HasRunPath {
		pl = p.l.newPathList(ViaRunPath, "RUNPATH of "+o.displayName(), decompose(o.Info.RunPath, ":", o.origin, p.arch))
	}
	return p.keepList(o, &o.lrunpath, pl)
}

func (o *Object) displayName() string {
	if o.Path != "" {
		return o.Path
	}
	return o.Name
}

// nodeflibObject is the object whose DF_1_NODEFLIB governs the cache and the
// default directories: the needing object, or the main program.
func (p *Process) nodeflib(loader *Object) bool {
	o := loader
	if o == nil {
		o = p.main
	}
	return o != nil && o.Info != nil && o.Info.NoDefaultLib()
}

// search finds a name without a slash. With a tracer it records every step
// and bypasses the memo.
func (p *Process) search(name string, loader *Object, t *tracer) found {
	lists := p.searchLists(loader, t)
	nodeflib := p.nodeflib(loader)
	var key string
	if t == nil {
		// The kind of process, the name (no NUL in it), the lists by number.
		var buf [128]byte
		b := append(append(append(buf[:0], p.archKey...), 0), name...)
		if nodeflib {
			b = append(b, 0, 1)
		} else {
			b = append(b, 0, 0)
		}
		for _, pl := range lists {
			b = binary.LittleEndian.AppendUint32(b, pl.id)
		}
		key = string(b)
		if f, ok := p.l.memo.load(key); ok {
			// The memo is shared by every process of the loader: the
			// answer found through an RPATH or RUNPATH names the list of
			// this search (same directories, maybe another object's).
			r := *f
			if r.ok && r.list > 0 {
				r.from, r.owner = lists[r.list-1].source, lists[r.list-1].owner
			}
			return r
		}
	}
	f := p.searchUncached(name, lists, nodeflib, t)
	if t == nil {
		p.l.memo.store(key, &f)
	}
	return f
}

func (p *Process) searchUncached(name string, lists []*pathList, nodeflib bool, t *tracer) found {
	var rejected []string
	for i, pl := range lists {
		if pl.note != "" {
			t.add(Attempt{Via: pl.via, Source: pl.source, Verdict: VerdictSkipped, Detail: pl.note})
			continue
		}
		if f, done := p.searchList(name, pl, t, &rejected); done {
			f.list = i + 1
			return f
		}
	}

	// /etc/ld.so.cache
	const cacheSource = "/etc/ld.so.cache"
	switch {
	case p.l.cache == nil:
		t.add(Attempt{Via: ViaCache, Source: cacheSource, Verdict: VerdictSkipped, Detail: "no usable cache"})
	default:
		e, ok := p.l.cache.lookup(name, p.cacheArch, p.hwprio)
		switch {
		case !ok:
			t.add(Attempt{Via: ViaCache, Source: cacheSource, Verdict: VerdictCacheMiss})
		case nodeflib && p.inSystemDir(e.Path):
			t.add(Attempt{Via: ViaCache, Source: cacheSource, Path: e.Path, Verdict: VerdictSkipped, Detail: "DF_1_NODEFLIB: cache entries in default directories are not used"})
		default:
			v := p.l.verify(e.Path, p.want)
			t.add(Attempt{Via: ViaCache, Source: cacheSource, Path: e.Path, Verdict: v.outcome, Detail: v.detail})
			switch v.outcome {
			case VerdictFound:
				return found{ok: true, guest: e.Path, host: v.host, via: ViaCache, from: cacheSource, fi: v.fi}
			case VerdictInvalid:
				return found{problem: e.Path + ": " + v.detail, fatal: true}
			case VerdictWrongClass, VerdictWrongMachine, VerdictUnreadable:
				rejected = append(rejected, e.Path+" ("+v.detail+")")
			}
		}
	}

	// The default directories.
	if nodeflib {
		t.add(Attempt{Via: ViaDefault, Source: "system search path", Verdict: VerdictSkipped, Detail: "DF_1_NODEFLIB"})
	} else {
		if f, done := p.searchList(name, p.sysdirs, t, &rejected); done {
			return f
		}
	}
	f := found{}
	if len(rejected) > 0 {
		f.problem = "rejected " + strings.Join(rejected, ", ")
	}
	return f
}

// searchList tries one list: every directory with its hwcaps subdirectories.
// done is true when the search ends here (found, or a fatal file).
func (p *Process) searchList(name string, pl *pathList, t *tracer, rejected *[]string) (found, bool) {
	for _, d := range pl.dirs {
		for _, sub := range p.subdirs {
			if t == nil && sub != "" && !p.l.subdirExists(d.dir, sub) {
				continue // the usual case, answered without building the name
			}
			dir := d.dir + sub
			if !p.l.fs.dirExists(dir) {
				t.add(Attempt{Via: pl.via, Source: pl.source, Entry: d.entry, Dir: dir, Subdir: sub, Verdict: VerdictNoDir})
				continue
			}
			cand := dir + name
			v := p.l.verify(cand, p.want)
			t.add(Attempt{Via: pl.via, Source: pl.source, Entry: d.entry, Dir: dir, Subdir: sub, Path: cand, Verdict: v.outcome, Detail: v.detail})
			switch v.outcome {
			case VerdictFound:
				return found{ok: true, guest: cand, host: v.host, via: pl.via, from: pl.source, entry: d.entry, owner: pl.owner, fi: v.fi}, true
			case VerdictInvalid:
				return found{problem: cand + ": " + v.detail, fatal: true}, true
			case VerdictWrongClass, VerdictWrongMachine, VerdictUnreadable:
				*rejected = append(*rejected, cand+" ("+v.detail+")")
			}
		}
	}
	return found{}, false
}

func (p *Process) inSystemDir(file string) bool {
	for _, d := range p.arch.SystemDirs {
		if strings.HasPrefix(file, d) {
			return true
		}
	}
	return false
}

// openPath opens a name that contains a slash (after token expansion).
func (p *Process) openPath(name string, t *tracer) found {
	v := p.l.verify(name, p.want)
	t.add(Attempt{Via: ViaPath, Source: "path in DT_NEEDED", Path: name, Verdict: v.outcome, Detail: v.detail})
	switch v.outcome {
	case VerdictFound:
		return found{ok: true, guest: name, host: v.host, via: ViaPath, from: "path", fi: v.fi}
	case VerdictAbsent:
		return found{}
	case VerdictInvalid:
		return found{problem: name + ": " + v.detail, fatal: true}
	default:
		return found{problem: name + " (" + v.detail + ")"}
	}
}

func statSize(host string) (int64, error) {
	st, err := os.Stat(host)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
