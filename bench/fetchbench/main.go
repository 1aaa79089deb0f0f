// Command fetchbench drives the fetch package for bench/fetch-vs-curl.sh:
// it generates a test archive, serves a directory on 127.0.0.1, and fetches
// archives through the same code as cudadeps (download, verify, extract,
// install), without a catalog.
//
//	fetchbench gen -mb 400 [-seed N] | xz -6 > archive.tar.xz
//	fetchbench serve DIR                  prints the base URL, serves until killed
//	fetchbench fetch -store S -cache C [-xz auto|go|PATH] [-mode install|sequential] [-parallel N] URL SHA256 SIZE [URL SHA256 SIZE]...
//	fetchbench unzstd FILE                decodes a .zst to nothing, as the fetch package's decoder is set up
package main

import (
	"archive/tar"
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/cudadeps/cudadeps/fetch"
)

// unzstd decodes a file with the decoder settings of fetch's .tar.zst
// extraction (one goroutine, a window of at most 128 MiB), for a comparison
// of the bare decoders with the zstd program.
func unzstd(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: unzstd FILE")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := zstd.NewReader(bufio.NewReaderSize(f, 256<<10), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(128<<20))
	if err != nil {
		return err
	}
	defer zr.Close()
	_, err = io.Copy(io.Discard, zr)
	return err
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = gen(os.Args[2:])
	case "serve":
		err = serve(os.Args[2:])
	case "fetch":
		err = fetchCmd(os.Args[2:])
	case "unzstd":
		err = unzstd(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fetchbench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: fetchbench gen|serve|fetch ... (see the package comment)")
	os.Exit(2)
}

// gen writes a tar shaped like an NVIDIA redist archive to stdout: one top
// directory, a few large libraries, static archives and many headers. The
// bytes mix random blocks (as in machine code) with repetitive text, so that
// xz has real work to do.
func gen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	mb := fs.Int("mb", 400, "uncompressed size in MB")
	seed := fs.Uint64("seed", 1, "seed of the contents: archives with other seeds differ")
	fs.Parse(args)
	total := int64(*mb) << 20
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	tw := tar.NewWriter(w)
	r := rand.New(rand.NewPCG(*seed, 2))
	const top = "libbench-linux-x86_64-1.0.0_cuda13-archive/"
	dirs := []string{top, top + "lib/", top + "include/"}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return err
		}
	}
	var written int64
	add := func(name string, size int64) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: size}); err != nil {
			return err
		}
		_, err := io.CopyN(tw, &mixed{r: r}, size)
		written += size
		return err
	}
	// 500 headers of 16 KiB, then libraries of up to 64 MiB.
	for i := 0; i < 500 && written < total/10; i++ {
		if err := add(fmt.Sprintf("%sinclude/bench_%03d.h", top, i), 16<<10); err != nil {
			return err
		}
	}
	for i := 0; written < total; i++ {
		size := min(64<<20, total-written)
		name := fmt.Sprintf("%slib/libbench%d.so.1.0.0", top, i)
		if err := add(name, size); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%slib/libbench%d.so.1", top, i), Typeflag: tar.TypeSymlink, Linkname: filepath.Base(name)}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return w.Flush()
}

// mixed yields 64 KiB blocks: 40 % random, 60 % text from a small
// vocabulary (compresses about 5x).
type mixed struct {
	r     *rand.Rand
	words []string
	buf   []byte
}

const vocabulary = "cuda kernel launch stream memcpy device host sync error grid block thread warp shared global solver matrix factor analysis phase"

func (m *mixed) Read(p []byte) (int, error) {
	if m.words == nil {
		m.words = strings.Fields(vocabulary)
	}
	if len(m.buf) == 0 {
		b := make([]byte, 0, 64<<10)
		if m.r.IntN(10) < 4 {
			b = b[:cap(b)]
			for i := 0; i+8 <= len(b); i += 8 {
				v := m.r.Uint64()
				for j := range 8 {
					b[i+j] = byte(v >> (8 * j))
				}
			}
		} else {
			for len(b) < cap(b)-16 {
				b = append(b, m.words[m.r.IntN(len(m.words))]...)
				b = append(b, ' ')
			}
			b = b[:cap(b)]
		}
		m.buf = b
	}
	n := copy(p, m.buf)
	m.buf = m.buf[n:]
	return n, nil
}

// serve serves dir on a free port of 127.0.0.1 (with Range support) and
// prints the base URL.
func serve(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("serve DIR")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("http://%s\n", ln.Addr())
	os.Stdout.Sync()
	return http.Serve(ln, http.FileServer(http.Dir(args[0])))
}

// fetchCmd installs archives into a store (mode install: downloads and
// extracts overlap) or downloads each then extracts it (mode sequential).
func fetchCmd(args []string) error {
	fs := flag.NewFlagSet("fetch", flag.ExitOnError)
	store := fs.String("store", "", "store directory (install) or extraction directory (sequential)")
	cache := fs.String("cache", "", "download cache directory")
	xzOpt := fs.String("xz", "auto", "xz decoder: auto, go, or the path of an xz program")
	mode := fs.String("mode", "install", "install or sequential")
	parallel := fs.Int("parallel", 0, "archives in flight at once (0: default)")
	progress := fs.Bool("progress", false, "show progress on stderr")
	fs.Parse(args)
	rest := fs.Args()
	if len(rest) == 0 || len(rest)%3 != 0 || *store == "" || *cache == "" {
		return fmt.Errorf("usage: fetch -store S -cache C URL SHA256 SIZE [URL SHA256 SIZE]")
	}
	opts := fetch.Options{
		CacheDir: *cache,
		Parallel: *parallel,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if *xzOpt != "auto" {
		opts.XZ = *xzOpt
	}
	if *progress {
		opts.Progress = os.Stderr
	}
	c, err := fetch.NewClient(opts)
	if err != nil {
		return err
	}
	ctx := context.Background()
	var items []fetch.Item
	for i := 0; i < len(rest); i += 3 {
		size, err := strconv.ParseInt(rest[i+2], 10, 64)
		if err != nil {
			return err
		}
		items = append(items, fetch.Item{
			Key:     fetch.Key{Component: fmt.Sprintf("bench%d", i/3), Version: "1.0.0", Platform: "linux-x86_64", Variant: "cuda13"},
			Request: fetch.Request{URL: rest[i], SHA256: rest[i+1], Size: size},
		})
	}
	start := time.Now()
	switch *mode {
	case "install":
		s, err := fetch.OpenStore(*store)
		if err != nil {
			return err
		}
		if _, err := s.Install(ctx, c, items); err != nil {
			return err
		}
	case "sequential":
		for i, it := range items {
			p, err := c.Download(ctx, it.Request)
			if err != nil {
				return err
			}
			if err := c.Extract(ctx, p, filepath.Join(*store, strconv.Itoa(i))); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown mode %q", *mode)
	}
	fmt.Fprintf(os.Stderr, "fetchbench: %s, %d archive(s) in %.2fs\n", *mode, len(items), time.Since(start).Seconds())
	return nil
}
