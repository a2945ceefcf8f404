// Package br is `fedbr br`: the BR engine steps the data-plane Jobs run.
package br

import (
	"github.com/spf13/cobra"

	brclean "github.com/fedbr/fedbr/internal/cmd/br/clean"
	brpause "github.com/fedbr/fedbr/internal/cmd/br/pause"
	brrestoredata "github.com/fedbr/fedbr/internal/cmd/br/restoredata"
	brrestorevolumes "github.com/fedbr/fedbr/internal/cmd/br/restorevolumes"
	brsize "github.com/fedbr/fedbr/internal/cmd/br/size"
	brsnapshot "github.com/fedbr/fedbr/internal/cmd/br/snapshot"
)

// NewCmd returns `fedbr br` with its subcommands, in the order a backup and a restore use them.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "br",
		Short: "BR engine steps run by the data-plane Jobs",
	}
	cmd.AddCommand(brpause.NewCmd(), brsnapshot.NewCmd(), brsize.NewCmd(), brclean.NewCmd(),
		brrestorevolumes.NewCmd(), brrestoredata.NewCmd())
	return cmd
}
