// Package br is `fedbr br`: the BR engine steps the data-plane Jobs run.
package br

import (
	"fmt"

	pingcaplog "github.com/pingcap/log"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"

	brclean "github.com/fedbr/fedbr/internal/cmd/br/clean"
	brlift "github.com/fedbr/fedbr/internal/cmd/br/lift"
	brpause "github.com/fedbr/fedbr/internal/cmd/br/pause"
	brpreflight "github.com/fedbr/fedbr/internal/cmd/br/preflight"
	brrestoredata "github.com/fedbr/fedbr/internal/cmd/br/restoredata"
	brrestorevolumes "github.com/fedbr/fedbr/internal/cmd/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	brsize "github.com/fedbr/fedbr/internal/cmd/br/size"
	brsnapshot "github.com/fedbr/fedbr/internal/cmd/br/snapshot"
	brverify "github.com/fedbr/fedbr/internal/cmd/br/verify"
)

// NewCmd returns `fedbr br` with its subcommands, in the order a backup and a restore use them.
func NewCmd() *cobra.Command {
	var logLevel string
	cmd := &cobra.Command{
		Use:   "br",
		Short: "BR engine steps run by the data-plane Jobs",
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// The first line of every step, stamped like the steps' own lines: it shows when
			// the pod's process started and, against the next line, the step's preparation.
			session.Logf(session.NewLockedWriter(cmd.ErrOrStderr()))("fedbr br %s started", cmd.Name())
			return setLibraryLogLevel(logLevel)
		},
	}
	cmd.PersistentFlags().StringVar(&logLevel, "log-level", "warn",
		"level of the PD and TiKV client libraries' own log (debug, info, warn, error); fedbr's progress lines are always printed")
	cmd.AddCommand(brpause.NewCmd(), brlift.NewCmd(), brsnapshot.NewCmd(), brsize.NewCmd(), brclean.NewCmd(),
		brrestorevolumes.NewCmd(), brrestoredata.NewCmd(), brverify.NewCmd(), brpreflight.NewCmd())
	return cmd
}

// setLibraryLogLevel sets the level of pingcap/log, the global logger of PD's client: at info
// it logs every connection and leader change, which drowns the steps' own progress lines.
func setLibraryLogLevel(level string) error {
	var l zapcore.Level
	switch level {
	case "debug", "info", "warn", "error":
		if err := l.UnmarshalText([]byte(level)); err != nil {
			return fmt.Errorf("--log-level %q: %w", level, err)
		}
	default:
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	pingcaplog.SetLevel(l)
	return nil
}
