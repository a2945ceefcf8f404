// Package down is `fedbr lab down`: stop everything `fedbr lab up` started.
package down

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/controlplane"
)

// NewCmd returns `fedbr lab down`.
func NewCmd() *cobra.Command {
	var (
		dir   string
		grace time.Duration
	)
	cmd := &cobra.Command{
		Use:   "down --dir DIR",
		Short: "Stop every process the lab in DIR started (SIGTERM, then SIGKILL after --grace)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if grace < 0 {
				return errors.New("--grace cannot be negative")
			}
			if err := controlplane.Down(cmd.Context(), dir, grace); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "lab in %s is down\n", dir)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "lab state directory")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "how long each process may take to exit after SIGTERM")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
