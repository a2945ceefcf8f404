// Package br is `fedbr br`: the BR engine steps the data-plane Jobs run.
package br

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	pingcaplog "github.com/pingcap/log"
	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	brclean "github.com/fedbr/fedbr/internal/cmd/br/clean"
	brlift "github.com/fedbr/fedbr/internal/cmd/br/lift"
	brpause "github.com/fedbr/fedbr/internal/cmd/br/pause"
	brpreflight "github.com/fedbr/fedbr/internal/cmd/br/preflight"
	brrestoredata "github.com/fedbr/fedbr/internal/cmd/br/restoredata"
	brrestorevolumes "github.com/fedbr/fedbr/internal/cmd/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	brsize "github.com/fedbr/fedbr/internal/cmd/br/size"
	brsnapshot "github.com/fedbr/fedbr/internal/cmd/br/snapshot"
	"github.com/fedbr/fedbr/internal/cmd/br/steplog"
	brtidbcluster "github.com/fedbr/fedbr/internal/cmd/br/tidbcluster"
	brverify "github.com/fedbr/fedbr/internal/cmd/br/verify"
)

// NewCmd returns `fedbr br` with its subcommands, in the order a backup and a restore use them.
func NewCmd() *cobra.Command {
	var (
		logLevel string
		saveLog  bool
		tee      *steplog.Tee
	)
	cmd := &cobra.Command{
		Use:   "br",
		Short: "BR engine steps run by the data-plane Jobs",
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if saveLog {
				if !savesLog[cmd.Name()] {
					return fmt.Errorf("--save-log: %s saves no log (only %s, which write under a backup's storage)", cmd.Name(), savingSteps())
				}
				tee = steplog.New(cmd.ErrOrStderr())
				cmd.SetErr(tee)
			}
			// The first line of every step, stamped like the steps' own lines: it shows when
			// the pod's process started and, against the next line, the step's preparation.
			session.Logf(session.NewLockedWriter(cmd.ErrOrStderr()))("fedbr br %s started", cmd.Name())
			return setLibraryLogLevel(logLevel)
		},
	}
	cmd.PersistentFlags().StringVar(&logLevel, "log-level", "warn",
		"level of the PD and TiKV client libraries' own log (debug, info, warn, error); fedbr's progress lines are always printed")
	cmd.PersistentFlags().BoolVar(&saveLog, "save-log", false,
		"when the step ends, save its own log lines (the first 64 KiB and the last 960 KiB) as logs/<pod name>.log under its --storage, where a clean deletes them with the backup (the agent's --save-step-logs)")
	cmd.AddCommand(brpause.NewCmd(), brlift.NewCmd(), brsnapshot.NewCmd(), brsize.NewCmd(), brclean.NewCmd(),
		brtidbcluster.NewCmd(), brrestorevolumes.NewCmd(), brrestoredata.NewCmd(), brverify.NewCmd(), brpreflight.NewCmd())
	for _, sub := range cmd.Commands() {
		if savesLog[sub.Name()] {
			run := sub.RunE
			sub.RunE = func(c *cobra.Command, args []string) error {
				err := run(c, args)
				if tee != nil {
					saveStepLog(c, tee, err)
				}
				return err
			}
		}
	}
	return cmd
}

// savesLog are the steps that take --save-log: those with a backup's storage. Not clean, which
// deletes the logs with the rest of the backup's metadata.
var savesLog = map[string]bool{dpv1alpha1.StepSnapshot: true, dpv1alpha1.StepSize: true,
	dpv1alpha1.StepTidbCluster: true, dpv1alpha1.StepRestoreVolumes: true, dpv1alpha1.StepRestoreData: true}

func savingSteps() string {
	names := make([]string, 0, len(savesLog))
	for n := range savesLog {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// saveStepLog saves what tee kept under the step's --storage as the log of this pod
// (POD_NAME, else the host name), ending with the step's error runErr (which the command's caller prints); a failure to
// save is logged, never the step's outcome.
func saveStepLog(c *cobra.Command, tee *steplog.Tee, runErr error) {
	logf := session.Logf(session.NewLockedWriter(c.ErrOrStderr()))
	f := session.Flags{}
	for name, to := range map[string]*string{"storage": &f.Storage, "region": &f.Region, "aws-endpoint": &f.Endpoint} {
		if fl := c.Flags().Lookup(name); fl != nil {
			*to = fl.Value.String()
		}
	}
	if f.Storage == "" {
		logf("--save-log: no --storage, the log is not saved")
		return
	}
	// The agent gives every step its pod's name (POD_NAME, which a template may not set).
	pod := os.Getenv("POD_NAME")
	if pod == "" {
		var err error
		if pod, err = os.Hostname(); err != nil {
			logf("--save-log: %v", err)
			return
		}
	}
	// The step's own context may be over (a signal, its timeout): the save gets its own.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logf("Saving this log under %s", f.Storage)
	if runErr != nil {
		tee.Keep(fmt.Sprintf("%s Error: %v\n", time.Now().UTC().Format(time.RFC3339Nano), runErr))
	}
	if _, err := steplog.Save(ctx, f, pod, tee.Bytes()); err != nil {
		logf("--save-log: %v", err)
	}
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
