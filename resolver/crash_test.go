package resolver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cudadeps/cudadeps/catalog"
	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testhook"
	"github.com/cudadeps/cudadeps/internal/testkit/lddtest"
	"github.com/cudadeps/cudadeps/loader/ldso"
	"github.com/cudadeps/cudadeps/python/pypi"
)

// crashChildEnv carries a crashChild, as JSON, to the test binary run as a
// child process that kills itself.
const crashChildEnv = "CUDADEPS_TEST_CRASH_CHILD"

// crashChild is what the child process does: a resolve or an undo of the
// skeleton package, killed by SIGKILL at the N-th call of the hook for Step.
type crashChild struct {
	Op      string // "resolve" or "undo"
	Python  string
	Prefix  string
	Catalog string
	Mirror  string
	Step    string // "" : killed from outside
	N       int
	Copy    bool
	XZ      string
	// Target is what to resolve or undo ("" for gpupkg); Index, when set,
	// is a package index to take wheels from with Source; LDLibraryPath
	// is the loader's (empty when unset).
	Target        string
	Index         string
	Source        Source
	LDLibraryPath string
}

// TestCrashChild is the child process of the kill tests; it does nothing
// in a normal test run.
func TestCrashChild(t *testing.T) {
	spec := os.Getenv(crashChildEnv)
	if spec == "" {
		// Not an oracle: the child process of the kill tests.
		t.Skip("runs only as the child of the kill tests")
	}
	var c crashChild
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := 0
	hook := func(step string) {
		if step != c.Step {
			return
		}
		if calls++; calls == c.N {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	ctx = testhook.With(ctx, hook)
	opts := crashOptions(t, c.Prefix, nil, c.XZ)
	opts.Copy = c.Copy
	opts.Loader.LDLibraryPath = &c.LDLibraryPath
	name := c.Target
	if name == "" {
		name = "gpupkg"
	}
	switch c.Op {
	case "resolve":
		lo := catalog.LoadOptions{Mirror: c.Mirror}
		if c.Catalog != "" {
			lo.Extra = []string{c.Catalog}
		}
		cat, err := catalog.Load(ctx, lo)
		if err != nil {
			t.Fatal(err)
		}
		opts.Catalog = cat
		if c.Index != "" {
			if opts.Index, err = pypi.NewClient(pypi.Options{Indexes: []string{c.Index}}); err != nil {
				t.Fatal(err)
			}
			opts.Source = c.Source
		}
		target, err := FindTarget(ctx, name, TargetOptions{Python: c.Python})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Resolve(ctx, target, opts); err != nil {
			t.Fatal(err)
		}
	case "undo":
		if _, err := undo(t, ctx, c.Prefix, name); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKillMidRepair: nvidia/cudnn removed with its .dist-info left, and
// resolve killed by SIGKILL while it puts back the other files the
// distribution's RECORD lists (the step after its libraries). undo then
// gives back the damaged tree exactly; a new resolve finishes the repair,
// and its undo gives back the damaged tree too.
func TestKillMidRepair(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		// Not an oracle: the child process of the kill tests.
		t.Skip("in the child")
	}
	damaged := func(t *testing.T) *absentFixture {
		f := intactFixture(t, "nvidia-cudnn-cu13")
		if err := os.RemoveAll(filepath.Join(f.site, "nvidia", "cudnn")); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// How many files the uninterrupted resolve places, and how many of
	// them are the repair's (the last ones).
	f := damaged(t)
	ix := f.serveWheels(t)
	dry := f.resolveFromIndex(t, "torch", SourceAuto, ix, true)
	var repaired []string
	for _, st := range dry.Rounds[0].Plan.Steps {
		repaired = append(repaired, st.Repairs...)
	}
	repairs := len(repaired)
	out := f.resolveFromIndex(t, "torch", SourceAuto, ix, false)
	placed := 0
	for _, r := range out.Rounds {
		placed += len(r.Placed)
	}
	if !out.OK || repairs < 4 || placed <= repairs {
		t.Fatalf("resolve ok %v: %d placed, %d of them repairs", out.OK, placed, repairs)
	}
	kill := placed - repairs/2
	for _, then := range []string{"undo", "resolve"} {
		t.Run("then "+then, func(t *testing.T) {
			f := damaged(t)
			ix := f.serveWheels(t)
			before := snapshot(t, f.site)
			child := crashChild{Op: "resolve", Python: f.python, Prefix: f.prefix, Target: "torch", Index: ix.URL,
				Source: SourceAuto, LDLibraryPath: f.driver, Step: "placed", N: kill}
			spec, _ := json.Marshal(child)
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+string(spec))
			got, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the child was not killed (%v):\n%s", err, got)
			}
			back := 0
			for _, rel := range repaired {
				if _, err := os.Lstat(filepath.Join(f.site, filepath.FromSlash(rel))); err == nil {
					back++
				}
			}
			if back == 0 || back == repairs {
				t.Fatalf("the kill came with %d of the %d repaired files back, not amid them", back, repairs)
			}
			if then == "resolve" {
				// As the command does: what the killed run left recovered first.
				if _, err := openPrefix(t, f.prefix).Recover(context.Background()); err != nil {
					t.Fatalf("recover after the kill: %v", err)
				}
				f.resolveWhole(t, ix, "nvidia-cudnn-cu13")
			}
			if _, err := undo(t, context.Background(), f.prefix, "torch"); err != nil {
				t.Fatal(err)
			}
			if after := snapshot(t, f.site); after != before {
				t.Errorf("the damaged tree is not given back:\n%s", diffLines(before, after))
			}
		})
	}
}

// crashOptions are the resolve options of the kill tests: no import check
// (the loader is the judge), no retry waits.
func crashOptions(t *testing.T, prefix string, cat *catalog.Catalog, xz string) Options {
	t.Helper()
	client, err := fetch.NewClient(fetch.Options{CacheDir: filepath.Join(prefix, "..", "cache"), XZ: xz, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	return Options{
		Loader:  ldso.Options{LDLibraryPath: &empty, PreloadSet: true},
		Catalog: cat, Prefix: openPrefix(t, prefix), Client: client,
	}
}

// gate serves the mirror's files; while armed, the first archive asked for
// gets all its bytes but the last 24 (the end of the xz stream, so the
// decoder has written out what came) and then nothing, and half is closed.
type gate struct {
	dir   string
	mu    sync.Mutex
	armed bool
	half  chan struct{}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	armed := g.armed && strings.HasSuffix(r.URL.Path, ".tar.xz")
	g.armed = false
	g.mu.Unlock()
	if !armed {
		http.FileServer(http.Dir(g.dir)).ServeHTTP(w, r)
		return
	}
	data, err := os.ReadFile(filepath.Join(g.dir, filepath.FromSlash(strings.TrimPrefix(r.URL.Path, "/"))))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data[:len(data)-24])
	w.(http.Flusher).Flush()
	close(g.half)
	<-r.Context().Done()
}

// killCase is one kill point.
type killCase struct {
	name string
	// step and n: the child kills itself at the n-th call of the hook; an
	// empty step is a kill from outside while the first archive is served
	// but for its end, once wait (the prefix and cache) shows the state wanted.
	step string
	n    int
	wait func(prefix string, pid int) bool
	copy bool
	xz   string
	// undo: the kill is during undo, after a complete resolve.
	undo bool
}

// hasFile reports a regular file under dir whose path contains part.
func hasFile(dir, part string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.Contains(p, part) {
			if info, err := d.Info(); err == nil && info.Size() > 0 {
				found = true
			}
		}
		return nil
	})
	return found
}

// hasDir reports a directory under dir whose path ends with suffix.
func hasDir(dir, suffix string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasSuffix(p, suffix) {
			found = true
		}
		return nil
	})
	return found
}

// hasChild reports a running child process of pid with the given command
// name.
func hasChild(pid int, comm string) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		data, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(data)) {
			if name, err := os.ReadFile("/proc/" + c + "/comm"); err == nil && strings.TrimSpace(string(name)) == comm {
				return true
			}
		}
	}
	return false
}

func killCases() []killCase {
	return []killCase{
		// Bytes downloaded but for the last (the pure-Go decoder extracts only verified
		// archives, so nothing is extracted yet).
		{name: "download", wait: func(prefix string, _ int) bool {
			return hasFile(filepath.Join(prefix, "..", "cache"), ".part")
		}, xz: fetch.XZGo},
		// Extraction under way: the system xz decodes the bytes that came
		// into the staging directory.
		{name: "extraction", wait: func(prefix string, pid int) bool {
			return hasChild(pid, "xz") && hasDir(filepath.Join(prefix, ".staging"), "/t")
		}},
		{name: "extracted, before the rename into the store", step: "staged", n: 1},
		{name: "right after the rename into the store", step: "stored", n: 1},
		{name: "after the install", step: "installed", n: 1},
		{name: "after a directory was created", step: "mkdir", n: 1},
		{name: "mid-placement (2 of 3 links)", step: "placed", n: 2},
		{name: "mid-placement of copies (2 of 3)", step: "placed", n: 2, copy: true},
		{name: "before the record", step: "record", n: 1},
		{name: "second round, after the rename into the store", step: "installed", n: 2},
		{name: "second round, mid-placement (1 of 2 links)", step: "placed", n: 4},
		{name: "second round, before the record", step: "record", n: 2},
		{name: "undo, after 2 removals", step: "removed", n: 2, undo: true},
		{name: "undo, after the store entry went", step: "unstored", n: 1, undo: true},
		{name: "undo, before the record", step: "record", n: 1, undo: true},
	}
}

// TestKillAndRecover kills resolve and undo with SIGKILL at each step, then
// checks that undo, or a new resolve and then undo, leaves the package's
// tree exactly as it was and the store empty.
func TestKillAndRecover(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		// Not an oracle: the child process of the kill tests.
		t.Skip("in the child")
	}
	for _, kc := range killCases() {
		for _, then := range []string{"undo", "resolve"} {
			t.Run(kc.name+"/then "+then, func(t *testing.T) {
				t.Parallel()
				if kc.name == "extraction" {
					_, err := exec.LookPath("xz")
					lddtest.Need(t, err == nil, "no system xz: extraction does not stream")
				}
				runKillCase(t, kc, then)
			})
		}
	}
}

func runKillCase(t *testing.T, kc killCase, then string) {
	ctx := context.Background()
	f := newFixture(t, false)
	g := &gate{dir: f.mirror.Dir, half: make(chan struct{})}
	srv := httptest.NewServer(g)
	defer srv.Close()
	cat, err := catalog.Load(ctx, catalog.LoadOptions{Extra: []string{f.mirror.Catalog}, Mirror: srv.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	target, err := FindTarget(ctx, "gpupkg", TargetOptions{Python: f.python})
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, f.site)
	child := crashChild{Op: "resolve", Python: f.python, Prefix: f.prefix, Catalog: f.mirror.Catalog, Mirror: srv.URL + "/",
		Step: kc.step, N: kc.n, Copy: kc.copy, XZ: kc.xz}
	if kc.undo {
		if out, err := Resolve(ctx, target, crashOptions(t, f.prefix, cat, "")); err != nil || !out.OK {
			t.Fatalf("resolve: %v %+v", err, out)
		}
		child.Op = "undo"
	}
	g.mu.Lock()
	g.armed = kc.step == ""
	g.mu.Unlock()
	spec, _ := json.Marshal(child)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+string(spec))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if kc.step == "" {
		select {
		case <-g.half:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the child never asked for an archive:\n%s", out.String())
		}
		deadline := time.Now().Add(10 * time.Second)
		for !kc.wait(f.prefix, cmd.Process.Pid) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if !kc.wait(f.prefix, cmd.Process.Pid) {
			t.Errorf("the state to kill in never came")
		}
		_ = cmd.Process.Kill()
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed at %s #%d (%v):\n%s", kc.step, kc.n, err, out.String())
	}

	store := openPrefix(t, f.prefix).Store()
	rerun := ""
	if then == "resolve" {
		// An interrupted run is recovered first (an undo finished, a
		// placement completed), then resolve puts everything back.
		rerun = resolveAgain(t, ctx, f, target, cat, kc.copy)
		for _, l := range realLoaderFinds(t, f.lib).Lines {
			if l.NotFound {
				t.Errorf("after the kill and a new resolve, ld.so does not find %s", l.Name)
			}
		}
	}
	reps, err := undo(t, ctx, f.prefix, "gpupkg")
	if err != nil {
		t.Fatalf("undo after the kill: %v", err)
	}
	gone := 0
	for _, r := range reps {
		if len(r.Left) > 0 {
			t.Errorf("undo left %v as changed since", r.Left)
		}
		gone += len(r.AlreadyRemoved)
	}
	if kc.undo && kc.step == "removed" && then == "undo" && gone != kc.n {
		t.Errorf("undo reports %d links as already removed, want the %d the killed undo removed: %+v", gone, kc.n, reps)
	}
	if after := snapshot(t, f.site); after != before {
		t.Errorf("the tree is not restored:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if entries, err := store.List(); err != nil || len(entries) != 0 {
		t.Errorf("the store still holds %d entries (%v)", len(entries), err)
	}
	if left := residue(t, f.prefix); len(left) > 0 {
		t.Errorf("the prefix still holds %v", left)
	}
	if rerun != "" {
		// The rerun placed what a resolve that was never killed places:
		// no component half placed.
		complete := resolveAgain(t, ctx, f, target, cat, kc.copy)
		if rerun != complete {
			t.Errorf("the rerun after the kill placed another tree than a resolve never killed:\nrerun:\n%s\nnever killed:\n%s", rerun, complete)
		}
		if _, err := undo(t, ctx, f.prefix, "gpupkg"); err != nil {
			t.Fatal(err)
		}
	}
}

// resolveAgain recovers the prefix and resolves the target, as the
// resolve command does, and returns the package's tree then.
func resolveAgain(t *testing.T, ctx context.Context, f *fixture, target *Target, cat *catalog.Catalog, copy bool) string {
	t.Helper()
	opts := crashOptions(t, f.prefix, cat, "")
	opts.Copy = copy
	if _, err := opts.Prefix.Recover(ctx); err != nil {
		t.Fatalf("recover after the kill: %v", err)
	}
	res, err := Resolve(ctx, target, opts)
	if err != nil || !res.OK {
		t.Fatalf("resolve after the kill: %v %+v", err, res)
	}
	return snapshot(t, f.site)
}

// residue lists what is left in a prefix but for its empty top-level
// directories: files, and directories inside .staging (extractions or
// removals a killed process left).
func residue(t *testing.T, prefix string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(prefix, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(prefix, p)
		if !d.IsDir() || filepath.Dir(rel) == ".staging" {
			out = append(out, rel)
		}
		return nil
	})
	return out
}
