// Command fedbr is the binary users install: manager, agent, BR engine and warm-up are its
// subcommands, so the Jobs an agent starts run exactly the agent's own build. The lab is not
// in it (cmd/fedbr-lab).
package main

import (
	"os"

	"github.com/fedbr/fedbr/internal/cmd/root"
)

func main() {
	if err := root.NewCmd().Execute(); err != nil {
		os.Exit(1)
	}
}
