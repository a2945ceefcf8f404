// Command fedbr is the binary users install: manager, agent, BR engine and warm-up are its
// subcommands, so the Jobs an agent starts run exactly the agent's own build. The lab is not
// in it (cmd/fedbr-lab). Installed (or linked) as kubectl-fedbr on the PATH, it is also the
// kubectl plugin `kubectl fedbr describe|logs …`.
package main

import (
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/cmd/root"
	"github.com/fedbr/fedbr/internal/memlimit"
)

func main() {
	// Every command, a step in a Job above all, keeps its heap under its container's memory
	// limit (internal/memlimit) unless GOMEMLIMIT says otherwise.
	memlimit.Set("/", os.Getenv)
	cmd := root.NewCmd()
	if filepath.Base(os.Args[0]) == "kubectl-fedbr" {
		// Help and usage then say `kubectl fedbr describe …` (a Use of two words would name the
		// command "kubectl").
		cmd.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl fedbr"}
	}
	// In a step's pod the agent sets the exit marker and delay (root.EnvExitMarker): whatever
	// the outcome, the marker is written and the delay waited before the process exits.
	os.Exit(root.Exit{Getenv: os.Getenv, Sleep: time.Sleep, Stderr: os.Stderr}.Execute(cmd))
}
