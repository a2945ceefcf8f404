// Package root is the top of fedbr's command tree: every subcommand a user installs (manager,
// agent, br, warmup, get, describe, logs, preflight, backup, restore, version). The lab is not among them; cmd/fedbr-lab adds it.
package root

import (
	// The zone database is linked in: a schedule's CRON_TZ= must resolve in an image that has
	// no /usr/share/zoneinfo (make image builds from scratch).
	_ "time/tzdata"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/cmd/agent"
	"github.com/fedbr/fedbr/internal/cmd/backup"
	"github.com/fedbr/fedbr/internal/cmd/br"
	"github.com/fedbr/fedbr/internal/cmd/describe"
	"github.com/fedbr/fedbr/internal/cmd/get"
	"github.com/fedbr/fedbr/internal/cmd/manager"
	"github.com/fedbr/fedbr/internal/cmd/restore"
	"github.com/fedbr/fedbr/internal/cmd/version"
	"github.com/fedbr/fedbr/internal/cmd/warmup"
)

// NewCmd returns the `fedbr` command with every product subcommand.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fedbr",
		Short: "Back up and restore a TiDB cluster spread over several Kubernetes clusters with EBS snapshots",
		Long: "fedbr takes transaction-consistent EBS snapshot backups of one TiDB cluster whose TiKV stores\n" +
			"run in several Kubernetes clusters, and restores them into fresh clusters.",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	cmd.AddCommand(version.NewCmd(), br.NewCmd(), manager.NewCmd(), agent.NewCmd(), warmup.NewCmd(),
		get.NewCmd(), describe.NewDescribeCmd(), describe.NewLogsCmd(), describe.NewPreflightCmd(), backup.NewCmd(), restore.NewCmd())
	return cmd
}
