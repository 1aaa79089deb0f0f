package resolver

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
)

// presence says which of files exist, stat'ing several at once: a
// layout asks about every file a package's distributions list (torch's
// RECORD alone has twelve thousand), and the file system answers stats in
// parallel.
func presence(files []string) []bool {
	out := make([]bool, len(files))
	workers := min(runtime.GOMAXPROCS(0), (len(files)+255)/256)
	if workers <= 1 {
		for i, f := range files {
			out[i] = fileExists(f)
		}
		return out
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				out[i] = fileExists(files[i])
			}
		}()
	}
	wg.Wait()
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
