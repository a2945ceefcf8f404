// Package lab is `fedbr-lab lab`: the embedded environment that runs every part of fedbr on one
// machine, with doubles for what the machine cannot have (AWS, PD/TiKV, kubelets).
package lab

import (
	pingcaplog "github.com/pingcap/log"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"

	labaws "github.com/fedbr/fedbr/internal/cmd/lab/aws"
	labbank "github.com/fedbr/fedbr/internal/cmd/lab/bank"
	labdemo "github.com/fedbr/fedbr/internal/cmd/lab/demo"
	"github.com/fedbr/fedbr/internal/cmd/lab/down"
	labeksauth "github.com/fedbr/fedbr/internal/cmd/lab/eksauth"
	labinstall "github.com/fedbr/fedbr/internal/cmd/lab/install"
	lablogs "github.com/fedbr/fedbr/internal/cmd/lab/logs"
	labnode "github.com/fedbr/fedbr/internal/cmd/lab/node"
	labop "github.com/fedbr/fedbr/internal/cmd/lab/operator"
	labpd "github.com/fedbr/fedbr/internal/cmd/lab/pd"
	labregions "github.com/fedbr/fedbr/internal/cmd/lab/regions"
	"github.com/fedbr/fedbr/internal/cmd/lab/status"
	labtidb "github.com/fedbr/fedbr/internal/cmd/lab/tidb"
	labtikv "github.com/fedbr/fedbr/internal/cmd/lab/tikv"
	"github.com/fedbr/fedbr/internal/cmd/lab/up"
)

// NewCmd returns `fedbr-lab lab` with its subcommands.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Run fedbr's lab: real Kubernetes control planes plus AWS, PD and TiKV doubles on this machine",
		// PD's client logs every connection and leader change at info (pingcap/log); in the lab's
		// commands that drowns their own progress lines.
		PersistentPreRun: func(*cobra.Command, []string) { pingcaplog.SetLevel(zapcore.WarnLevel) },
	}
	cmd.AddCommand(up.NewCmd(), down.NewCmd(), labinstall.NewCmd(), status.NewCmd(), lablogs.NewCmd(),
		labnode.NewCmd(), labop.NewCmd(), labaws.NewCmd(), labeksauth.NewCmd(), labpd.NewCmd(), labtikv.NewCmd(), labregions.NewCmd(), labbank.NewCmd(), labtidb.NewCmd(), labdemo.NewCmd())
	return cmd
}
