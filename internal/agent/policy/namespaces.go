package policy

import (
	"slices"
	"strings"
)

// DataNamespaces are the data-plane namespaces control-plane namespace owner may act on, as
// path.Match globs: its namesake with --allow-same-namespace, then the data-plane globs of
// every --allow-namespaces mapping whose control-plane glob matches owner, each once. A
// namespace matches one of them exactly when the member check allows owner to act on it. None
// for no owner (such a member is refused) or a nil policy.
//
// The agent gives them to the steps that restore from or delete snapshots (restore-volumes,
// clean) as --source-namespaces: a snapshot is used only when its fedbr.io/namespace tag is
// among them, so a backupmeta copied from another tenant's storage names snapshots the step
// refuses.
func (p *Policy) DataNamespaces(owner string) []string {
	if p == nil || owner == "" {
		return nil
	}
	var globs []string
	add := func(g string) {
		if !slices.Contains(globs, g) {
			globs = append(globs, g)
		}
	}
	if p.c.SameNamespace {
		add(literal(owner))
	}
	for _, m := range p.namespaces {
		if match(m.cp, owner) {
			for _, dp := range m.dp {
				add(dp)
			}
		}
	}
	return globs
}

// literal is a glob matching s alone: namespace names and label values hold no glob
// characters, but an owner that somehow did must still name one namespace, not a pattern.
func literal(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
