package main

import "github.com/spf13/cobra"

// commands lists every subcommand; each lives in its own file.
func (a *app) commands() []*cobra.Command {
	return []*cobra.Command{
		a.scanCommand(),
		a.whyCommand(),
		a.catalogCommand(),
		a.resolveCommand(),
		a.undoCommand(),
		a.fetchCommand(),
		a.storeCommand(),
		a.doctorCommand(),
		a.configCommand(),
		a.mirrorCommand(),
		a.applyCommand(),
		a.checkCommand(),
	}
}
