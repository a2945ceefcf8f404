// Package status is `fedbr-lab lab status`: what the lab in a directory runs.
package status

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/env"
)

// NewCmd returns `fedbr-lab lab status`.
func NewCmd() *cobra.Command {
	var dir, output string
	cmd := &cobra.Command{
		Use:   "status --dir DIR",
		Short: "Show every process of the lab in DIR and whether it runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("--output must be empty or json, not %q", output)
			}
			sts, err := env.Status(dir)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(sts)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			_, _ = fmt.Fprintln(w, "CLUSTER\tCOMPONENT\tNAME\tPID\tPORT\tSTATE\tLOG")
			for _, s := range sts {
				state := "stopped"
				if s.Running {
					state = "running"
				}
				cluster, port := s.Cluster, "-"
				if cluster == "" {
					cluster = "-"
				}
				if s.Process.Port != 0 {
					port = fmt.Sprint(s.Process.Port)
				}
				_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", cluster, s.Component, s.Name, s.Process.PID, port, state, s.Process.Log)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "lab state directory")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: empty for a table, or json")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}
