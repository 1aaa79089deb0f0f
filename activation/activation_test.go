package activation

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/atomicfile"
	"github.com/cudadeps/cudadeps/internal/filehash"
)

func openPrefix(t *testing.T) *Prefix {
	t.Helper()
	p, err := Open(filepath.Join(t.TempDir(), "prefix"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// storeFiles writes files where the store entry of k keeps them (as an
// install would) and returns their paths.
func storeFiles(t *testing.T, p *Prefix, k fetch.Key, names ...string) []string {
	t.Helper()
	dir, err := p.Store().EntryDir(k)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		f := filepath.Join(dir, "lib", n)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("ELF of "+n), 0o755); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

func keyOf(component string) fetch.Key {
	return fetch.Key{Component: component, Version: "1.0", Platform: "linux-x86_64", Variant: "cuda13"}
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestPlaceAndUndoEveryKind: a link, a copy and a written file go in a new
// directory tree, parents first in the record; undo removes exactly them
// and the directories, and the prefix's record and journal go.
func TestPlaceAndUndoEveryKind(t *testing.T) {
	ctx := context.Background()
	p := openPrefix(t)
	k := keyOf("libx")
	src := storeFiles(t, p, k, "libx.so.1", "libxcopy.so.1")
	site := t.TempDir()
	dir := filepath.Join(site, "pkg", "sub", "lib")
	c, err := p.Begin(ctx, "dir:"+site, site)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Place(k, []File{{Path: filepath.Join(dir, "libx.so.1"), From: src[0], Soname: "libx.so.1", Component: "libx"}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Place(k, []File{{Path: filepath.Join(dir, "libxcopy.so.1"), From: src[1], Component: "libx"}}, true); err != nil {
		t.Fatal(err)
	}
	info := filepath.Join(site, "pkg", "x-1.0.dist-info", "INSTALLER")
	if _, err := c.Place(k, []File{{Path: info, Data: []byte("cudadeps\n"), Component: "x"}}, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	recs, err := p.Records()
	if err != nil || len(recs) != 1 {
		t.Fatalf("records %v %v", recs, err)
	}
	r := recs[0]
	kinds := []PlacedKind{}
	for _, pl := range r.Placed {
		kinds = append(kinds, pl.Kind)
	}
	if !slices.Equal(kinds, []PlacedKind{PlacedLink, PlacedCopy, PlacedFile}) || r.Schema != recordSchema {
		t.Fatalf("record %+v", r)
	}
	if !slices.Equal(r.Created, []string{filepath.Join(site, "pkg"), filepath.Join(site, "pkg", "sub"), dir, filepath.Join(site, "pkg", "x-1.0.dist-info")}) {
		t.Errorf("created %q, want parents first", r.Created)
	}
	if target, _ := os.Readlink(filepath.Join(dir, "libx.so.1")); filepath.IsAbs(target) {
		t.Errorf("the link is absolute: %s", target)
	}
	reps, err := p.Undo(ctx, []string{site}, nil)
	if err != nil || len(reps) != 1 || len(reps[0].Removed) != 3 || len(reps[0].Left) != 0 {
		t.Fatalf("undo %+v %v", reps, err)
	}
	if exists(filepath.Join(site, "pkg")) {
		t.Error("the created directories survived undo")
	}
	if left, _ := os.ReadDir(p.recordsDir()); len(left) != 0 {
		t.Errorf("records left: %v", left)
	}
}

// TestUndoLeavesWhatAnotherInstallerReplaced: a copy another installer
// wrote over with the very same bytes (a new inode, as pip's rename
// makes), a written file another installer rewrote, and a file it added in
// a directory cudadeps created all stay; what is still cudadeps' goes.
func TestUndoLeavesWhatAnotherInstallerReplaced(t *testing.T) {
	ctx := context.Background()
	p := openPrefix(t)
	k := keyOf("liby")
	src := storeFiles(t, p, k, "liby.so.1", "liby2.so.1")
	site := t.TempDir()
	lib := filepath.Join(site, "y", "lib")
	info := filepath.Join(site, "y-1.0.dist-info")
	c, err := p.Begin(ctx, "dir:"+site, site)
	if err != nil {
		t.Fatal(err)
	}
	files := []File{{Path: filepath.Join(lib, "liby.so.1"), From: src[0]}, {Path: filepath.Join(lib, "liby2.so.1"), From: src[1]}}
	if _, err := c.Place(k, files, true); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Place(k, []File{{Path: filepath.Join(info, "INSTALLER"), Data: []byte("cudadeps\n")}, {Path: filepath.Join(info, "RECORD"), Data: []byte("y/lib/liby.so.1,,\n")}}, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	// pip installs the same wheel over it: its own copy of liby.so.1 (same
	// bytes, written beside and renamed), its own INSTALLER, and a file of
	// its own.
	same, _ := os.ReadFile(files[0].Path)
	tmp := files[0].Path + ".pip"
	if err := os.WriteFile(tmp, same, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, files[0].Path); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(info, "INSTALLER"), "pip\n")
	mustWrite(t, filepath.Join(info, "REQUESTED"), "")
	reps, err := p.Undo(ctx, nil, nil)
	if err != nil || len(reps) != 1 {
		t.Fatalf("undo %+v %v", reps, err)
	}
	rep := reps[0]
	slices.Sort(rep.Left)
	if want := []string{filepath.Join(info, "INSTALLER"), files[0].Path}; !slices.Equal(rep.Left, want) {
		t.Errorf("left %q, want %q", rep.Left, want)
	}
	slices.Sort(rep.Removed)
	if want := []string{filepath.Join(info, "RECORD"), files[1].Path}; !slices.Equal(rep.Removed, want) {
		t.Errorf("removed %q, want %q", rep.Removed, want)
	}
	for _, f := range []string{files[0].Path, filepath.Join(info, "INSTALLER"), filepath.Join(info, "REQUESTED")} {
		if !exists(f) {
			t.Errorf("%s, another installer's, was removed", f)
		}
	}
}

// TestReadSchema1Record: a record written before placed files had a kind
// (a link is an entry with "link", a copy one with "sha256") loads, and
// undo removes both.
func TestReadSchema1Record(t *testing.T) {
	ctx := context.Background()
	p := openPrefix(t)
	k := keyOf("libz")
	src := storeFiles(t, p, k, "libz.so.1", "libzc.so.1")
	lib := filepath.Join(t.TempDir(), "lib")
	if err := os.Mkdir(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	link, cp := filepath.Join(lib, "libz.so.1"), filepath.Join(lib, "libzc.so.1")
	if err := os.Symlink(src[0], link); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(src[1])
	if err := os.WriteFile(cp, data, 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := filehash.SHA256(cp)
	if err != nil {
		t.Fatal(err)
	}
	old := `{
  "target": "dir:` + lib + `",
  "name": "` + lib + `",
  "updated": "2025-01-02T03:04:05Z",
  "placed": [
    {"path": "` + link + `", "link": "` + src[0] + `", "soname": "libz.so.1", "component": "libz"},
    {"path": "` + cp + `", "sha256": "` + sum + `", "soname": "libzc.so.1", "component": "libz"}
  ],
  "created_dirs": ["` + lib + `"],
  "env": null,
  "installed": [{"component": "libz", "version": "1.0", "platform": "linux-x86_64", "variant": "cuda13"}]
}
`
	if err := os.MkdirAll(p.recordsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, p.RecordFile("dir:"+lib), old)
	recs, err := p.Records()
	if err != nil || len(recs) != 1 {
		t.Fatalf("records %v %v", recs, err)
	}
	if pl := recs[0].Placed; pl[0].Kind != PlacedLink || pl[1].Kind != PlacedCopy || recs[0].Schema != recordSchema {
		t.Fatalf("placed %+v", pl)
	}
	if uses, err := p.InUse(k); err != nil || len(uses) != 1 || !slices.Equal(uses[0].Targets, []string{lib}) {
		t.Errorf("in use: %+v %v", uses, err)
	}
	reps, err := p.Undo(ctx, []string{lib}, nil)
	if err != nil || len(reps) != 1 || len(reps[0].Removed) != 2 || len(reps[0].Left) != 0 {
		t.Fatalf("undo %+v %v", reps, err)
	}
	if exists(lib) {
		t.Error("the created directory survived")
	}
}

// TestRecordSchemaFromTheFuture is refused by name, not misread.
func TestRecordSchemaFromTheFuture(t *testing.T) {
	p := openPrefix(t)
	if err := os.MkdirAll(p.recordsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, p.RecordFile("dir:/x"), `{"schema": 99, "target": "dir:/x"}`)
	if _, err := p.Records(); err == nil || !strings.Contains(err.Error(), "schema 99") {
		t.Errorf("err = %v", err)
	}
}

// TestInUse: an entry is in use by a record that names it installed, that
// links into it, or whose activation script directory lies in it; not by
// one that names another entry.
func TestInUse(t *testing.T) {
	ctx := context.Background()
	p := openPrefix(t)
	a, b, free := keyOf("liba"), keyOf("libb"), keyOf("libfree")
	srcA := storeFiles(t, p, a, "liba.so.1")
	dirB, _ := p.Store().EntryDir(b)
	site := t.TempDir()
	c, err := p.Begin(ctx, "dir:"+site, "app")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Place(a, []File{{Path: filepath.Join(site, "liba.so.1"), From: srcA[0]}}, false); err != nil {
		t.Fatal(err)
	}
	c.AddScriptDir(b, filepath.Join(dirB, "lib"))
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	uses, err := p.InUse(a, b, free)
	if err != nil {
		t.Fatal(err)
	}
	if len(uses) != 2 || uses[0].Key != a || uses[1].Key != b || !slices.Equal(uses[0].Targets, []string{"app"}) {
		t.Errorf("in use: %+v", uses)
	}
	env, _ := os.ReadFile(p.EnvScript())
	if !strings.Contains(string(env), filepath.Join(dirB, "lib")) {
		t.Errorf("env.sh: %s", env)
	}
}

// TestJournalOfARunningProcess: recovery leaves alone the journal of a run
// that is still going (its lock is held), and Begin refuses to start
// beside it; once that run is gone, Begin asks for recovery, and Recover
// records what the journal announced.
func TestJournalOfARunningProcess(t *testing.T) {
	ctx := context.Background()
	p := openPrefix(t)
	dir := t.TempDir()
	link := filepath.Join(dir, "libx.so.1")
	if err := os.Symlink("libx.so.1.0", link); err != nil {
		t.Fatal(err)
	}
	target := "dir:" + dir
	j, err := p.beginJournal(target, dir, InterruptedResolve)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.write(journalLine{Op: opLink, Path: link, Link: "libx.so.1.0", Soname: "libx.so.1", Component: "libx"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Begin(ctx, target, dir); err == nil || !strings.Contains(err.Error(), "another cudadeps process") {
		t.Errorf("Begin beside a running change: %v", err)
	}
	if got, err := p.Recover(ctx); err != nil || len(got) != 0 {
		t.Fatalf("recovered the journal of a running process: %v %+v", err, got)
	}
	if _, err := os.Stat(j.path); err != nil {
		t.Fatalf("the running process's journal is gone: %v", err)
	}
	killedRecordWrite(t, p.RecordFile(target))
	j.f.Close() // the process dies
	if _, err := p.Begin(ctx, target, dir); err == nil || !strings.Contains(err.Error(), "recover it first") {
		t.Errorf("Begin beside a dead run's journal: %v", err)
	}
	got, err := p.Recover(ctx)
	if err != nil || len(got) != 1 || got[0].Kind != InterruptedResolve {
		t.Fatalf("recovered %+v, %v", got, err)
	}
	rec, err := p.record(target, dir)
	if err != nil || !rec.owns(link) {
		t.Fatalf("the record does not name the journaled link: %v %+v", err, rec)
	}
	// The half-written record went; the record written whole stays.
	if ents, _ := os.ReadDir(p.recordsDir()); len(ents) != 1 || ents[0].Name() != filepath.Base(p.RecordFile(target)) {
		t.Errorf("the records directory after recovery: %v", ents)
	}
	if _, err := os.Stat(j.path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the journal survived its recovery: %v", err)
	}
	if _, err := p.Begin(ctx, target, dir); err != nil {
		t.Errorf("Begin after recovery: %v", err)
	}
}

// TestRecoverFinishesPlacement: a run killed after announcing a link, a
// copy and a written file, before making any, leaves a journal that
// Recover carries out whole; one whose path another file took meanwhile is
// left alone.
func TestRecoverFinishesPlacement(t *testing.T) {
	ctx := context.Background()
	p := openPrefix(t)
	k := keyOf("libw")
	src := storeFiles(t, p, k, "libw.so.1", "libwc.so.1")
	dir := t.TempDir()
	target := "dir:" + dir
	c, err := p.Begin(ctx, target, dir)
	if err != nil {
		t.Fatal(err)
	}
	files := []File{
		{Path: filepath.Join(dir, "libw.so.1"), From: src[0]},
		{Path: filepath.Join(dir, "libwc.so.1"), From: src[1]},
		{Path: filepath.Join(dir, "w.txt"), Data: []byte("written")},
		{Path: filepath.Join(dir, "taken.so"), From: src[0]},
	}
	copies := []bool{false, true, false, false}
	for i, f := range files {
		var pl Placed
		l, err := pl.plan(f, copies[i], "")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.intend(l); err != nil {
			t.Fatal(err)
		}
	}
	c.j.f.Close() // killed before any placement
	mustWrite(t, files[3].Path, "someone else's")
	got, err := p.Recover(ctx)
	if err != nil || len(got) != 1 {
		t.Fatalf("recover: %+v %v", got, err)
	}
	if want := []string{files[0].Path, files[1].Path, files[2].Path}; !slices.Equal(got[0].Finished, want) {
		t.Errorf("finished %q, want %q", got[0].Finished, want)
	}
	rec, err := p.record(target, dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range files {
		pl, ok := rec.placed(f.Path)
		if i == 3 {
			if ok {
				t.Errorf("%s, someone else's, was recorded", f.Path)
			}
			continue
		}
		if !ok || !pl.unchanged() {
			t.Errorf("%s: recorded %v, %+v", f.Path, ok, pl)
		}
	}
	if data, _ := os.ReadFile(files[2].Path); string(data) != "written" {
		t.Errorf("written file: %q", data)
	}
}

// killedRecordWrite leaves what a process killed while writing a record
// leaves: its temporary file, half written.
func killedRecordWrite(t *testing.T, record string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(record), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("the record write was not cut short")
		}
	}()
	_ = atomicfile.WriteFrom(record, io.MultiReader(strings.NewReader(`{"schema":`), dyingReader{}), 0o644)
}

// dyingReader stops a write where the process is killed.
type dyingReader struct{}

func (dyingReader) Read([]byte) (int, error) { panic("killed") }
