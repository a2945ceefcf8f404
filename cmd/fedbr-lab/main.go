// Command fedbr-lab is fedbr plus `lab`: every subcommand of fedbr and the lab's (doubles of
// AWS, PD and TiKV, lab nodes, the stand-in operator), so that the lab runs one binary for every
// process it starts, fedbr's own steps included. It is for development and tests; users install
// fedbr.
package main

import (
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/cmd/lab"
	"github.com/fedbr/fedbr/internal/cmd/root"
)

func newRootCmd() *cobra.Command {
	cmd := root.NewCmd()
	cmd.Use = "fedbr-lab"
	cmd.Short = "fedbr's subcommands plus the lab: AWS, PD and TiKV doubles, lab nodes and Kubernetes control planes on one machine"
	cmd.AddCommand(lab.NewCmd())
	return cmd
}

func main() {
	// The lab's step pods run this binary: the exit marker and delay as in fedbr.
	os.Exit(root.Exit{Getenv: os.Getenv, Sleep: time.Sleep, Stderr: os.Stderr}.Execute(newRootCmd()))
}
