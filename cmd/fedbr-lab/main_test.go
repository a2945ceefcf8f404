package main

import (
	"slices"
	"testing"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/cmd/root"
)

// TestLabBinaryIsFedbrPlusLab: the lab runs fedbr-lab for every process, fedbr's own steps
// included, so it must have every subcommand of fedbr, and lab.
func TestLabBinaryIsFedbrPlusLab(t *testing.T) {
	want := append(subcommands(root.NewCmd()), "lab")
	slices.Sort(want)
	if got := subcommands(newRootCmd()); !slices.Equal(got, want) {
		t.Errorf("fedbr-lab subcommands %v, want fedbr's plus lab: %v", got, want)
	}
}

func subcommands(cmd *cobra.Command) []string {
	var names []string
	for _, c := range cmd.Commands() {
		names = append(names, c.Name())
	}
	slices.Sort(names)
	return names
}
