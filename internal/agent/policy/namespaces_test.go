package policy

import (
	"slices"
	"testing"
)

// TestDataNamespaces: the data-plane namespaces a control-plane namespace may act on, as globs,
// are exactly those namespaceAllowed accepts for it: its namesake with --allow-same-namespace,
// and the data-plane globs of every --allow-namespaces mapping whose control-plane glob matches
// it, once each and in the order the flags give them.
func TestDataNamespaces(t *testing.T) {
	for _, tt := range []struct {
		name  string
		c     Config
		owner string
		want  []string
	}{
		{"same namespace", Config{SameNamespace: true}, "tidb", []string{"tidb"}},
		{"same namespace off, nothing mapped", Config{}, "tidb", nil},
		{"no owner", Config{SameNamespace: true, Namespaces: []string{"*=shared"}}, "", nil},
		{"a mapping adds its data namespaces", Config{SameNamespace: true, Namespaces: []string{"team-a=team-a-restore,team-a-dr-*"}},
			"team-a", []string{"team-a", "team-a-restore", "team-a-dr-*"}},
		{"a mapping of another control namespace adds nothing", Config{SameNamespace: true, Namespaces: []string{"team-b=team-b-dr"}},
			"team-a", []string{"team-a"}},
		{"a control-namespace glob", Config{Namespaces: []string{"team-*=shared-dr"}}, "team-a", []string{"shared-dr"}},
		{"several mappings, each namespace once", Config{SameNamespace: true, Namespaces: []string{"ops=team-b,ops", "o*=team-b,team-c"}},
			"ops", []string{"ops", "team-b", "team-c"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, tt.c)
			got := p.DataNamespaces(tt.owner)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("DataNamespaces(%q) = %q, want %q", tt.owner, got, tt.want)
			}
			// Every namespace the globs match is one the member check allows, and the reverse.
			for _, dp := range []string{"tidb", "team-a", "team-a-restore", "team-a-dr-1", "team-b", "team-b-dr", "team-c", "shared-dr", "ops", "kube-system"} {
				if in, allowed := matchAny(got, dp), tt.owner != "" && p.namespaceAllowed(tt.owner, dp); in != allowed {
					t.Errorf("%s: in the globs %v, allowed by the member check %v", dp, in, allowed)
				}
			}
		})
	}
	var none *Policy
	if got := none.DataNamespaces("tidb"); got != nil {
		t.Errorf("a nil policy: %q, want none", got)
	}
}
