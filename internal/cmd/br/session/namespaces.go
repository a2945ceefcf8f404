package session

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/fedbr/fedbr/internal/meta"
)

// SourceNamespacesFlag is the flag of the steps that restore from or delete snapshots
// (restore-volumes, clean): the data-plane namespaces whose snapshots they may use.
const SourceNamespacesFlag = "source-namespaces"

// SourceNamespaces is --source-namespaces as registered; nil until given.
type SourceNamespaces struct{ list []string }

// Register adds --source-namespaces to f; without describes what the step checks when it is
// not given.
func (s *SourceNamespaces) Register(f *pflag.FlagSet, without string) {
	f.StringSliceVar(&s.list, SourceNamespacesFlag, nil,
		"data-plane namespaces or globs (path.Match syntax, comma-separated) whose snapshots this step may use: every snapshot must carry fedbr.io/namespace with one of them, or the step fails before it creates or deletes anything (the agent passes the namespaces its policy lets the member's owner act on); without it, "+without)
}

// Parse validates the flag: nil when it was not given.
func (s *SourceNamespaces) Parse() (meta.Namespaces, error) {
	if s.list == nil {
		return nil, nil
	}
	n := meta.Namespaces(s.list)
	if err := n.Validate(); err != nil {
		return nil, fmt.Errorf("--%s: %w", SourceNamespacesFlag, err)
	}
	return n, nil
}
