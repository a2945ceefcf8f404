// Package down is `fedbr-lab lab down`: stop everything `fedbr-lab lab up` started.
package down

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/env"
)

// NewCmd returns `fedbr-lab lab down`.
func NewCmd() *cobra.Command {
	var (
		dir   string
		grace time.Duration
	)
	cmd := &cobra.Command{
		Use:   "down --dir DIR",
		Short: "Stop every process the lab in DIR started (SIGTERM, then SIGKILL after --grace) and check none is left",
		Long: `Stop every process of the lab in DIR: the operators, the nodes (which stop their pods), the
AWS double, then the control planes; each gets --grace after SIGTERM before SIGKILL. Only pids
that still run their recorded binary are signalled. Fails if anything survives, or if a process
of the lab (a pod process, say) was still running afterwards; such a process is killed.
The state in DIR is kept: ` + "`fedbr-lab lab up --dir DIR`" + ` brings the same lab back.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if grace < 0 {
				return errors.New("--grace cannot be negative")
			}
			start := time.Now()
			if err := env.Down(cmd.Context(), dir, grace); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "lab in %s is down (%s)\n", dir, time.Since(start).Round(time.Millisecond))
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "lab state directory")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "how long each process may take to exit after SIGTERM")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
