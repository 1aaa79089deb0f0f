package lddtest

import (
	"debug/elf"
	"io/fs"
	"path/filepath"
	"sync"
)

// SharedObjects lists the dynamic shared objects under dir, each file once
// (the first name met of a file linked under several): the objects an
// oracle comparison loads as `ldd` would. Executables, static objects and
// files that are not ELF are left out. debug/elf reads them, so the list
// does not depend on the code under test.
func SharedObjects(dir string) []string {
	var files []string
	seen := map[string]bool{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || !isSharedObject(p) {
			return nil
		}
		if real, err := filepath.EvalSymlinks(p); err == nil && !seen[real] {
			seen[real] = true
			files = append(files, p)
		}
		return nil
	})
	return files
}

// isSharedObject reports an ET_DYN file with a dynamic segment that has
// bytes in the file and no interpreter (a PIE executable has one).
func isSharedObject(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	if f.Type != elf.ET_DYN {
		return false
	}
	dynamic := false
	for _, prog := range f.Progs {
		switch {
		case prog.Type == elf.PT_INTERP:
			return false
		case prog.Type == elf.PT_DYNAMIC && prog.Filesz > 0:
			dynamic = true
		}
	}
	return dynamic
}

// Parallel calls check for each file from workers goroutines at once: each
// oracle run is a process, and the comparisons are independent.
func Parallel(files []string, workers int, check func(file string)) {
	work := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				check(f)
			}
		}()
	}
	for _, f := range files {
		work <- f
	}
	close(work)
	wg.Wait()
}
