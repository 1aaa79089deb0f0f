// Command demo shows cudadeps make a broken CUDA package whole, offline, in
// one command:
//
//	go run ./examples/demo
//
// It writes, in a new directory ($DEMO), a site-packages holding a package
// shaped like a CUDA 13 PyTorch build whose library needs cuBLAS (pinned,
// not installed) and cuDSS (not declared); serves, on 127.0.0.1 ($SERVER),
// a package index with the pinned cuBLAS wheel and an NVIDIA-layout mirror
// with a cuDSS archive, all of generated libraries for this machine; then
// runs cudadeps scan, resolve, scan again and undo against them, printing
// each command and what it prints, with the two places shown as $DEMO and
// $SERVER so that the output is the same on every run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cudadeps/cudadeps/examples/internal/demoset"
	"github.com/cudadeps/cudadeps/platform"
)

func main() {
	dir := flag.String("dir", "", "the demonstration's `DIR` (default: a new temporary directory, removed at the end unless -keep)")
	keep := flag.Bool("keep", false, "keep the demonstration's directory")
	bin := flag.String("cudadeps", "", "the cudadeps `BINARY` to run (default: built from this module with go build)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: go run ./examples/demo [-dir DIR] [-keep] [-cudadeps BINARY]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(context.Background(), os.Stdout, *dir, *keep, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, dir string, keep bool, bin string) error {
	set, err := demoset.For(platform.HostMachine())
	if err != nil {
		return err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "cudadeps-demo-"); err != nil {
			return err
		}
		if !keep {
			defer os.RemoveAll(dir)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	if bin == "" {
		if bin, err = build(ctx, dir); err != nil {
			return err
		}
	}
	d, err := prepare(set, dir)
	if err != nil {
		return err
	}
	srv, err := serve(d.mirror)
	if err != nil {
		return err
	}
	defer srv.Close()
	s := &session{out: out, bin: bin, dir: dir, server: strings.TrimSuffix(srv.URL, "/"), env: childEnv(dir)}
	return s.tell(d, keep)
}

// build compiles cudadeps into dir/bin, from the module this command is in.
func build(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "bin", "cudadeps")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/cudadeps/cudadeps/cmd/cudadeps")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build cudadeps: %w", err)
	}
	return bin, nil
}

// childEnv is the environment cudadeps runs in: the user's PATH, and a
// home, configuration, data and cache of the demonstration's own, so that
// nothing of the user's (a config file, pip's index, LD_LIBRARY_PATH, the
// download cache) changes what it does or is changed by it.
func childEnv(dir string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, "home"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "home", ".config"),
		"XDG_DATA_HOME=" + filepath.Join(dir, "home", ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(dir, "home", ".cache"),
		"PIP_CONFIG_FILE=" + os.DevNull,
		"LC_ALL=C",
	}
	if t := os.Getenv("TMPDIR"); t != "" {
		env = append(env, "TMPDIR="+t)
	}
	return env
}

// show is what a path or URL looks like in the output.
func (s *session) show(text string) string {
	return strings.NewReplacer(s.server, "$SERVER", s.dir, "$DEMO").Replace(text)
}
