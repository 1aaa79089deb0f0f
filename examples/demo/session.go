package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/cudadeps/cudadeps/examples/internal/demoset"
	"github.com/cudadeps/cudadeps/internal/shquote"
)

// session runs cudadeps and prints what it does.
type session struct {
	out    io.Writer
	bin    string
	dir    string // shown as $DEMO
	server string // shown as $SERVER
	env    []string
}

// tell runs the demonstration's steps, each with a line on what it shows.
func (s *session) tell(d layout, keep bool) error {
	s.say("cudadeps demonstration: a package whose CUDA libraries are missing, made whole offline.\n\n")
	s.say("  DEMO=%s\n", s.dir)
	s.say("  SERVER=%s  (a package index and an NVIDIA-layout mirror on this machine)\n", s.server)
	s.say("\nThe package demo 0.1 is installed in $DEMO/site-packages. Its library needs\n")
	s.say("  libcudart.so.13  from nvidia-cuda-runtime %s, installed;\n", demoset.RuntimePin)
	s.say("  libcublas.so.13  from nvidia-cublas %s, which demo pins: installed, but its library\n", demoset.CublasPin)
	s.say("                   was deleted, as in an image slimmed by removing large files;\n")
	s.say("  libcudss.so.0    which demo does not declare, as PyTorch's aarch64 wheels do not.\n")
	s.say("`import demo` would fail with \"libcublas.so.13: cannot open shared object file\".\n")
	s.say("\n1. What the loader would do:\n")
	if err := s.cudadeps(3, "scan", d.lib); err != nil {
		return err
	}
	s.say("\n2. resolve brings the pinned wheel from the index and cuDSS from NVIDIA's archives\n")
	s.say("   (here the mirror), verifies them, installs them into the store and links each\n")
	s.say("   where the library's RPATH looks (--yes: nobody is asked; --quiet: no progress):\n")
	if err := s.cudadeps(0, "resolve", "demo", "--site-packages", d.site, "--index-url", s.server+"/simple/",
		"--mirror", s.server+"/", "--catalog", d.catalog, "--prefix", s.dir+"/prefix", "--cache", s.dir+"/cache", "--yes", "--quiet"); err != nil {
		return err
	}
	s.say("\n3. The loader now finds everything, in a new shell, with no environment change:\n")
	if err := s.cudadeps(0, "scan", d.lib); err != nil {
		return err
	}
	s.say("\n4. undo removes exactly what resolve placed:\n")
	if err := s.cudadeps(0, "undo", "demo", "--prefix", s.dir+"/prefix"); err != nil {
		return err
	}
	s.say("\nand the loader is back where it started:\n")
	if err := s.cudadeps(3, "scan", d.lib); err != nil {
		return err
	}
	if keep {
		s.say("\nThe demonstration's files are kept in $DEMO.\n")
	}
	s.say("\nOn a machine with a real CUDA wheel: cudadeps resolve torch --dry-run, then cudadeps resolve torch.\n")
	return nil
}

func (s *session) say(format string, a ...any) {
	fmt.Fprintf(s.out, format, a...)
}

// cudadeps runs one command line and prints it and its output, failing when it exits otherwise than want.
func (s *session) cudadeps(want int, args ...string) error {
	words := []string{"$", "cudadeps"}
	for _, a := range args {
		words = append(words, s.show(shquote.Quote(a)))
	}
	s.say("\n%s\n", strings.Join(words, " "))
	cmd := exec.Command(s.bin, args...)
	cmd.Env = s.env
	var output bytes.Buffer // both, in the order written, as on a screen
	cmd.Stdout, cmd.Stderr = &output, &output
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return err
	}
	s.say("%s", s.show(output.String()))
	if code := cmd.ProcessState.ExitCode(); code != want {
		return fmt.Errorf("cudadeps %s: exit status %d, expected %d", args[0], code, want)
	} else if code != 0 {
		s.say("(exit status %d: libraries are missing)\n", code)
	}
	return nil
}
