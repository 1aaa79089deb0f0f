package lddtest

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// ldconfigAuxCache is ldconfig's own record of the files it read last
// time (their inode, size and times): every ldconfig run rewrites it, as a
// distribution's package installs do, and no loader reads it.
const ldconfigAuxCache = "/var/cache/ldconfig/aux-cache"

// TreeState lists every file, link and directory under root with what
// makes it itself, sorted: a link's target; a file's size and sha256 (or,
// above 1 MiB, its size and modification time: the large libraries of a
// system tree are never rewritten in place by what is tested). skip (a
// directory, such as the prefix whose store holds what was installed) and
// the judge's copied-in emulator are left out, and ldconfig's auxiliary
// cache is listed by its presence alone. Two states compare with Diff.
func TreeState(t testing.TB, root, skip string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		rel := p[len(root):]
		if rel == "/.qemu-aarch64-static" {
			return nil
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := rel + " " + st.Mode().String()
		switch {
		case st.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case !st.Mode().IsRegular() || rel == ldconfigAuxCache:
		case st.Size() > 1<<20:
			line += fmt.Sprintf(" %d %s", st.Size(), st.ModTime().UTC().Format(time.RFC3339Nano))
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %x", st.Size(), sha256.Sum256(data))
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// Diff names the first difference of two TreeStates, "" when they are
// equal.
func Diff(before, after []string) string {
	for i := 0; i < len(before) && i < len(after); i++ {
		if before[i] != after[i] {
			return before[i] + " | " + after[i]
		}
	}
	switch {
	case len(before) > len(after):
		return "gone: " + before[len(after)]
	case len(after) > len(before):
		return "new: " + after[len(before)]
	}
	return ""
}
