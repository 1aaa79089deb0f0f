// Command torchtree writes the skeleton of a recorded Python environment
// (see package torchtree) under a directory, for benchmarks and manual
// checks:
//
//	go run ./internal/testkit/torchtree/cmd/torchtree [-pad] [-others [-names DISTINFO.tgz]] [-without nvidia/cusparselt] CORPUS.jsonl.gz DIR
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"

	"github.com/cudadeps/cudadeps/internal/testkit/torchtree"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	pad := flag.Bool("pad", false, "extend every file to its recorded size as a sparse file")
	others := flag.Bool("others", false, "add small non-ELF files until the tree has as many files and directories as the real environment")
	names := flag.String("names", "", "with -others, write the files the RECORDs of this dist-info `ARCHIVE` list (the corpus' torch-2.11.0-cu130-x86_64-distinfo.tgz) and name the added files after them: the real mix of file names")
	var without []string
	flag.Func("without", "leave out every file under this `DIR` (relative to site-packages; repeatable)", func(s string) error {
		without = append(without, s)
		return nil
	})
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [-pad] [-others [-names ARCHIVE]] [-without DIR]... CORPUS DIR\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	recs, err := torchtree.LoadFile(flag.Arg(0))
	if err != nil {
		log.Error("cannot read the corpus", "error", err)
		os.Exit(1)
	}
	opts := torchtree.Options{Pad: *pad, Keep: torchtree.Without(without...)}
	if *others {
		opts.Files, opts.Dirs = torchtree.RealFiles, torchtree.RealDirs
	}
	if *names != "" {
		if opts.Names, err = torchtree.RecordPaths(*names); err != nil {
			log.Error("cannot read the dist-info archive", "error", err)
			os.Exit(1)
		}
	}
	files, err := torchtree.Build(ctx, flag.Arg(1), recs, opts)
	if err != nil {
		log.Error("cannot write the skeleton", "error", err)
		os.Exit(1)
	}
	log.Info("skeleton written", "dir", flag.Arg(1), "elf_files", len(files), "padded", *pad, "others", *others)
}
