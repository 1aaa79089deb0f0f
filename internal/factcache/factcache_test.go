package factcache

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

type fact struct {
	Inputs Inputs
	Lines  []string
}

func TestSaveLoad(t *testing.T) {
	d := At(filepath.Join(t.TempDir(), "facts"))
	want := fact{Inputs: Capture([]string{"/", "/nonexistent-path"}), Lines: []string{"a", "b"}}
	if err := d.Save("x", want); err != nil {
		t.Fatal(err)
	}
	var got fact
	if !d.Load("x", &got) || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}
	if !got.Inputs.Stamps[1].Missing() || got.Inputs.Stamps[0].Missing() {
		t.Errorf("stamps %+v: want / present, the other missing", got.Inputs.Stamps)
	}
	if d.Load("absent", &got) {
		t.Error("an absent file loads")
	}
}

// TestDamagedFileIsIgnored: a truncated file, a flipped byte, a file of
// another version or of garbage never load, and saving again repairs.
func TestDamagedFileIsIgnored(t *testing.T) {
	d := At(t.TempDir())
	if err := d.Save("x", fact{Lines: []string{"first", "second"}}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d.Path(), "x")
	good, _ := os.ReadFile(p)
	damaged := map[string][]byte{
		"truncated": good[:len(good)-3],
		"flipped":   append(append([]byte(nil), good[:len(good)-2]...), good[len(good)-2]^1, good[len(good)-1]),
		"version":   append([]byte("cudadeps facts 0\n"), good[len(magic):]...),
		"garbage":   []byte("not a cache file at all"),
		"empty":     nil,
	}
	for name, data := range damaged {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var f fact
		if d.Load("x", &f) {
			t.Errorf("%s: loads as %+v", name, f)
		}
	}
	if err := d.Save("x", fact{Lines: []string{"again"}}); err != nil {
		t.Fatal(err)
	}
	var f fact
	if !d.Load("x", &f) || len(f.Lines) != 1 {
		t.Errorf("after saving again: %+v", f)
	}
}

// TestUnwritableCache: saving fails with an error the caller may ignore;
// loading finds nothing; neither panics nor blocks.
func TestUnwritableCache(t *testing.T) {
	base := t.TempDir()
	blocker := filepath.Join(base, "file")
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []Dir{{}, At(filepath.Join(blocker, "facts"))} {
		if err := d.Save("x", fact{}); err == nil {
			t.Errorf("%q: saved under a file", d.Path())
		}
		var f fact
		if d.Load("x", &f) {
			t.Errorf("%q: loaded", d.Path())
		}
	}
}

// TestUnchanged: the inputs hold until a file is rewritten (even to the
// same size), replaced, removed, or a file appears in a directory.
func TestUnchanged(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lib.so")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("aaaa")
	past := time.Now().Add(-time.Hour)
	settle := func() {
		t.Helper()
		for _, p := range []string{file, dir} {
			if err := os.Chtimes(p, past, past); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
	}
	settle()
	absent := filepath.Join(dir, "libnew.so")
	capture := func() Inputs { return Capture([]string{dir, file, absent}) }
	in := capture()
	if !in.Unchanged() {
		t.Fatal("changed without a change")
	}
	for name, change := range map[string]func(){
		"rewritten":  func() { write("bbbb") },
		"replaced":   func() { os.Remove(file); write("aaaa") },
		"removed":    func() { os.Remove(file) },
		"new file":   func() { os.WriteFile(absent, nil, 0o644) },
		"mode":       func() { os.Chmod(file, 0o600) },
		"timestamps": func() { os.Chtimes(file, past.Add(time.Second), past.Add(time.Second)) },
	} {
		write("aaaa")
		os.Chmod(file, 0o644)
		os.Remove(absent)
		settle()
		in := capture()
		change()
		if in.Unchanged() {
			t.Errorf("%s: still unchanged", name)
		}
	}
}

// TestSettled: a fact whose inputs changed just now is not worth keeping.
func TestSettled(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if Capture([]string{p}).Settled(time.Now(), 2*time.Second) {
		t.Error("a file written now is settled")
	}
	old := time.Now().Add(-time.Minute)
	os.Chtimes(p, old, old)
	in := Capture([]string{p})
	// The change time moved with Chtimes; only the modification time is old.
	in.Stamps[0].Ctime = old.UnixNano()
	if !in.Settled(time.Now(), 2*time.Second) {
		t.Error("a file a minute old is not settled")
	}
}

// TestConcurrentSaves: writers racing on one name leave a file that loads
// as one of theirs, never a mix.
func TestConcurrentSaves(t *testing.T) {
	d := At(t.TempDir())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lines := make([]string, 1000)
			for j := range lines {
				lines[j] = fmt.Sprint(i)
			}
			for range 5 {
				_ = d.Save("x", fact{Lines: lines})
			}
		}()
	}
	wg.Wait()
	var f fact
	if !d.Load("x", &f) || len(f.Lines) != 1000 {
		t.Fatalf("loaded %d lines", len(f.Lines))
	}
	for _, l := range f.Lines {
		if l != f.Lines[0] {
			t.Fatal("a mix of two writers")
		}
	}
}

func TestTrim(t *testing.T) {
	d := At(t.TempDir())
	for i := range 6 {
		if err := d.Save(fmt.Sprintf("check-%d", i), fact{}); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(time.Duration(i-10) * time.Minute)
		os.Chtimes(filepath.Join(d.Path(), fmt.Sprintf("check-%d", i)), at, at)
	}
	if err := d.Save("python-x", fact{}); err != nil {
		t.Fatal(err)
	}
	d.Trim("check-", 2)
	ents, _ := os.ReadDir(d.Path())
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if fmt.Sprint(names) != "[check-4 check-5 python-x]" {
		t.Errorf("left %v, want the two newest checks and the other kind", names)
	}
}

func TestKey(t *testing.T) {
	if Key("check", "a", "bc") == Key("check", "ab", "c") {
		t.Error("parts run together")
	}
	if Key("check", "a") == Key("python", "a") {
		t.Error("kinds collide")
	}
}

// BenchmarkUnchanged checks the stamps of a thousand paths (files and
// their directories), what a cached check costs on top of loading its
// answer.
func BenchmarkUnchanged(b *testing.B) {
	dir := b.TempDir()
	var paths []string
	for i := range 100 {
		sub := filepath.Join(dir, fmt.Sprint(i))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, sub)
		for j := range 9 {
			p := filepath.Join(sub, fmt.Sprint(j))
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				b.Fatal(err)
			}
			paths = append(paths, p)
		}
	}
	in := Capture(paths)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if !in.Unchanged() {
			b.Fatal("changed")
		}
	}
}

// torchLikePaths are n paths laid out as a Python environment's are: a few
// thousand files under a few deep directories, and some that are missing.
func torchLikePaths(t testing.TB, n int) []string {
	root := t.TempDir()
	site := filepath.Join(root, "lib", "python3.12", "site-packages")
	var paths []string
	for i := range n {
		dir := filepath.Join(site, fmt.Sprintf("pkg%d", i%7), "sub", fmt.Sprintf("d%d", i%31))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, fmt.Sprintf("module_%d.cpython-312-x86_64-linux-gnu.so", i))
		if i%10 != 3 { // every tenth is missing: a zero stamp between others
			if err := os.WriteFile(p, make([]byte, i%5000), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		paths = append(paths, p, dir)
	}
	return paths
}

// plainInputs is Inputs as gob wrote it before its own encoding.
type plainInputs struct {
	Paths  []string
	Stamps []Stamp
}

// TestInputsEncoding: inputs come back exactly as kept, in far fewer bytes
// than gob's form, and every damaged or hostile encoding is an error, never
// a panic or a huge allocation.
func TestInputsEncoding(t *testing.T) {
	in := Capture(torchLikePaths(t, 2000))
	enc, err := in.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Inputs
	if err := got.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(in) {
		t.Fatal("inputs changed through their encoding")
	}
	if !got.Unchanged() {
		t.Error("decoded inputs are not unchanged")
	}
	var plain bytes.Buffer
	if err := gob.NewEncoder(&plain).Encode(plainInputs(in)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d paths: %d bytes, gob's form %d", len(in.Paths), len(enc), plain.Len())
	if len(enc)*2 > plain.Len() {
		t.Errorf("encoded in %d bytes, not half of gob's %d", len(enc), plain.Len())
	}
	var empty Inputs
	if e, err := (Inputs{}).MarshalBinary(); err != nil || empty.UnmarshalBinary(e) != nil || len(empty.Paths) != 0 {
		t.Errorf("empty inputs: %v", err)
	}
	if _, err := (Inputs{Paths: []string{"/a"}}).MarshalBinary(); err == nil {
		t.Error("paths without stamps encoded")
	}
	for n := 0; n < len(enc); n += 1 + n/64 { // every cut near the start, then sparser
		var x Inputs
		if x.UnmarshalBinary(enc[:n]) == nil {
			t.Fatalf("cut at %d of %d bytes: decoded", n, len(enc))
		}
	}
	if (&Inputs{}).UnmarshalBinary(append(slices.Clone(enc), 0)) == nil {
		t.Error("a byte after the inputs: decoded")
	}
	hostile := map[string][]byte{
		"another format":                   {2, 0},
		"more paths than bytes":            binary.AppendUvarint([]byte{inputsFormat}, 1<<40),
		"shares more than the path before": {inputsFormat, 1, 5, 1, 'a'},
		"a path longer than PATH_MAX":      binary.AppendUvarint(binary.AppendUvarint([]byte{inputsFormat, 2}, 0), maxPath+1),
	}
	for name, b := range hostile {
		var x Inputs
		if err := x.UnmarshalBinary(append(b, make([]byte, 8)...)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzInputsDecode: no input makes decoding panic, and what decodes
// encodes back to the same inputs.
func FuzzInputsDecode(f *testing.F) {
	in := Capture([]string{"/", "/etc", "/nonexistent-path", "/etc/hostname"})
	enc, err := in.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(enc)
	f.Add([]byte{inputsFormat, 1, 0, 1, 'x', 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var x Inputs
		if x.UnmarshalBinary(b) != nil {
			return
		}
		again, err := x.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var y Inputs
		if err := y.UnmarshalBinary(again); err != nil || fmt.Sprint(x) != fmt.Sprint(y) {
			t.Fatalf("re-encoded inputs differ: %v", err)
		}
	})
}

// BenchmarkInputsLoad reads back the inputs of a check of an environment
// (five thousand paths) from a cache file, in this package's encoding and
// in gob's plain form of the same inputs.
func BenchmarkInputsLoad(b *testing.B) {
	in := Capture(torchLikePaths(b, 2500))
	d := At(b.TempDir())
	type plainFact struct {
		Inputs plainInputs
		Lines  []string
	}
	b.Run("compact", func(b *testing.B) {
		benchLoad(b, d, "compact", fact{Inputs: in}, func() any { return new(fact) })
	})
	b.Run("gob", func(b *testing.B) {
		benchLoad(b, d, "gob", plainFact{Inputs: plainInputs(in)}, func() any { return new(plainFact) })
	})
}

// benchLoad saves v as name and loads it back into fresh values, reporting
// the file's size.
func benchLoad(b *testing.B, d Dir, name string, v any, fresh func() any) {
	if err := d.Save(name, v); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(d.Path(), name))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for range b.N {
		if !d.Load(name, fresh()) {
			b.Fatal("not loaded")
		}
	}
	b.ReportMetric(float64(st.Size()), "file-bytes")
}
