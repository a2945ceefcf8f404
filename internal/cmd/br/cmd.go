// Package br is `fedbr br`: the BR engine steps the data-plane Jobs run.
package br

import (
	"github.com/spf13/cobra"

	brclean "github.com/fedbr/fedbr/internal/cmd/br/clean"
	brsize "github.com/fedbr/fedbr/internal/cmd/br/size"
)

// NewCmd returns `fedbr br` with its subcommands.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "br",
		Short: "BR engine steps run by the data-plane Jobs: pause, clean, size, …",
	}
	cmd.AddCommand(brclean.NewCmd(), brsize.NewCmd())
	return cmd
}
