// Command fedbr is the binary users install: manager, agent, BR engine and warm-up are its
// subcommands, so the Jobs an agent starts run exactly the agent's own build. The lab is not
// in it (cmd/fedbr-lab). Installed (or linked) as kubectl-fedbr on the PATH, it is also the
// kubectl plugin `kubectl fedbr describe|logs …`.
package main

import (
	"os"
	"path/filepath"

	"github.com/fedbr/fedbr/internal/cmd/root"
)

func main() {
	cmd := root.NewCmd()
	if filepath.Base(os.Args[0]) == "kubectl-fedbr" {
		cmd.Use = "kubectl fedbr"
	}
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
