// Command fedbr is the one binary of fedbr: manager, agent, BR engine, warm-up and lab are its
// subcommands, so the Jobs an agent starts run exactly the agent's own build.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/cmd/agent"
	"github.com/fedbr/fedbr/internal/cmd/br"
	"github.com/fedbr/fedbr/internal/cmd/lab"
	"github.com/fedbr/fedbr/internal/cmd/manager"
	"github.com/fedbr/fedbr/internal/cmd/version"
	"github.com/fedbr/fedbr/internal/cmd/warmup"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "fedbr",
		Short: "Back up and restore a TiDB cluster spread over several Kubernetes clusters with EBS snapshots",
		Long: "fedbr takes transaction-consistent EBS snapshot backups of one TiDB cluster whose TiKV stores\n" +
			"run in several Kubernetes clusters, and restores them into fresh clusters.",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(version.NewCmd(), br.NewCmd(), lab.NewCmd(), manager.NewCmd())
	root.AddCommand(agent.NewCmd(), warmup.NewCmd())
	return root
}

func main() {
	if err := newRootCmd().Execute(); err != nil {
		os.Exit(1)
	}
}
