package resolver

import (
	"os"
	"runtime"

	"github.com/cudadeps/cudadeps/internal/workers"
)

// presence says which of files exist, stat'ing several at once: a
// layout asks about every file a package's distributions list (torch's
// RECORD alone has twelve thousand), and the file system answers stats in
// parallel.
func presence(files []string) []bool {
	out := make([]bool, len(files))
	workers.Each(len(files), max(1, min(runtime.GOMAXPROCS(0), (len(files)+255)/256)), func(i int) {
		out[i] = fileExists(files[i])
	})
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
