package resolver

import (
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cudadeps/cudadeps/fetch"
	"github.com/cudadeps/cudadeps/internal/testkit/elfwrite"
)

// TestSharedDirectory resolves two packages of one environment whose
// libraries search the same nvidia/cudss/lib (as torch and torchvision
// do), then undoes them one at a time: the first undo leaves what the
// second still loads, and says for whom; the second restores the tree.
func TestSharedDirectory(t *testing.T) {
	f := newFixture(t, false)
	ctx := context.Background()
	second := filepath.Join(f.site, "gpuvision/lib/libgpuvision.so")
	writeDist(t, f.site, "gpuvision", "1.0", []string{"gpupkg"}, map[string][]byte{
		"gpuvision/__init__.py": []byte("import gpupkg\n"),
		"gpuvision/lib/libgpuvision.so": elfBytes(t, elfwrite.Spec{Soname: "libgpuvision.so", Needed: []string{"libcudss.so.0", "libc.so.6"},
			RPath: elfwrite.Str("$ORIGIN/../../nvidia/cudss/lib:$ORIGIN")}),
	}, map[string]fs.FileMode{"gpuvision/lib/libgpuvision.so": 0o755})
	before := snapshot(t, f.site)

	resolve := func(name string) *Outcome {
		t.Helper()
		target, err := FindTarget(ctx, name, TargetOptions{Python: f.python})
		if err != nil {
			t.Fatal(err)
		}
		opts := f.options(t, false)
		opts.Verify = false
		out, err := Resolve(ctx, target, opts)
		if err != nil || !out.OK {
			t.Fatalf("resolve %s: %v %+v", name, err, out)
		}
		return out
	}
	loads := func(file string) bool {
		t.Helper()
		ok := true
		for _, l := range realLoaderFinds(t, file).Lines {
			if l.NotFound {
				t.Logf("ld.so does not find %s for %s", l.Name, filepath.Base(file))
				ok = false
			}
		}
		return ok
	}
	resolve("gpupkg")
	visionKey := resolve("gpuvision").Target.Key()
	if !loads(f.lib) || !loads(second) {
		t.Fatal("after both resolves, ld.so does not find everything")
	}

	store := openPrefix(t, f.prefix).Store()
	reps, err := undo(t, ctx, f.prefix, "gpupkg")
	if err != nil || len(reps) != 1 {
		t.Fatalf("undo gpupkg: %v %+v", err, reps)
	}
	// gpuvision loads cuDSS and, through cuDSS's RUNPATH, cuBLAS from the
	// shared directory: the links, the directories and both entries stay,
	// kept for gpuvision.
	keptFor := map[string][]string{}
	keptStore := map[string][]string{}
	for _, k := range reps[0].Kept {
		if k.Store != nil {
			keptStore[k.Store.Component] = k.For
		} else {
			keptFor[k.Path] = k.For
		}
	}
	cudss := filepath.Join(physical(f.site), "nvidia/cudss/lib/libcudss.so.0")
	if !slices.Equal(keptFor[cudss], []string{visionKey}) || !slices.Equal(keptStore["libcudss"], []string{visionKey}) || !slices.Equal(keptStore["libcublas"], []string{visionKey}) {
		t.Errorf("undo gpupkg kept %+v, want %s and the libcudss and libcublas entries kept for %s", reps[0].Kept, cudss, visionKey)
	}
	if len(reps[0].Removed) != 0 || len(reps[0].Store) != 0 {
		t.Errorf("undo gpupkg removed %v and %v, which gpuvision loads", reps[0].Removed, reps[0].Store)
	}
	if !loads(second) {
		t.Errorf("undo of gpupkg broke gpuvision")
	}
	if _, ok, _ := store.Lookup(fetch.Key{Component: "libcudss", Version: "0.9.0.1", Platform: "linux-x86_64", Variant: "cuda13"}); !ok {
		t.Errorf("undo of gpupkg removed the store entry gpuvision uses")
	}

	reps, err = undo(t, ctx, f.prefix, "gpuvision")
	if err != nil || len(reps) != 1 || len(reps[0].Kept) != 0 || len(reps[0].Left) != 0 {
		t.Fatalf("undo gpuvision: %v %+v", err, reps)
	}
	if after := snapshot(t, f.site); after != before {
		t.Errorf("the tree is not restored:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if entries, _ := store.List(); len(entries) != 0 {
		t.Errorf("the store still holds %d entries", len(entries))
	}
	if left := residue(t, f.prefix); len(left) > 0 {
		t.Errorf("the prefix still holds %v", left)
	}
}
