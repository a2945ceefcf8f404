package meta

import (
	"errors"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/cloud"
)

// TestCheckNamespace: a snapshot is used only when its namespace tag matches an allowed glob;
// one without the tag only when its backup has no fedbr identity (upstream BR tags none); nil
// Namespaces checks nothing.
func TestCheckNamespace(t *testing.T) {
	snap := func(tags map[string]string) cloud.Snapshot {
		return cloud.Snapshot{ID: "snap-1", Owned: true, Tags: tags}
	}
	tagged := func(ns string) cloud.Snapshot { return snap(map[string]string{TagBackup: "b1", TagNamespace: ns}) }
	for _, tt := range []struct {
		name     string
		s        cloud.Snapshot
		backupID string
		n        Namespaces
		want     string // "" passes
	}{
		{"its namespace", tagged("tidb"), "b1", Namespaces{"tidb"}, ""},
		{"a glob", tagged("tidb-dr"), "b1", Namespaces{"ops", "tidb-*"}, ""},
		{"another namespace", tagged("tenant-b"), "b1", Namespaces{"tenant-a", "tenant-a-*"}, `tagged fedbr.io/namespace="tenant-b", a namespace this member may not act on (allowed: tenant-a, tenant-a-*`},
		{"no tag", snap(map[string]string{TagBackup: "b1"}), "b1", Namespaces{"tidb"}, "carries no fedbr.io/namespace tag"},
		{"an empty tag", tagged(""), "b1", Namespaces{"tidb"}, `tagged fedbr.io/namespace=""`},
		{"upstream, no tag", snap(nil), "", Namespaces{"tidb"}, ""},
		{"upstream, another namespace's", tagged("tenant-b"), "", Namespaces{"tidb"}, `tagged fedbr.io/namespace="tenant-b"`},
		{"no check", tagged("tenant-b"), "b1", nil, ""},
		{"no check, no tag", snap(nil), "b1", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckNamespace(tt.s, tt.backupID, tt.n)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "":
			case !errors.Is(err, ErrForeignSnapshot) || !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), tt.want) ||
				!strings.Contains(err.Error(), "snap-1") || !strings.Contains(err.Error(), "rule "+RuleNamespace):
				t.Fatalf("error %v, want %v naming snap-1, %q and the rule", err, ErrForeignSnapshot, tt.want)
			}
		})
	}
}

func TestNamespacesValidate(t *testing.T) {
	for _, tt := range []struct {
		n    Namespaces
		want string
	}{
		{nil, ""},
		{Namespaces{"tidb", "team-*"}, ""},
		{Namespaces{}, "no namespace"},
		{Namespaces{" "}, "an empty namespace pattern"},
		{Namespaces{"team-[a"}, `namespace pattern "team-[a": not a glob`},
	} {
		err := tt.n.Validate()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%q: %v, want %q", []string(tt.n), err, tt.want)
		}
	}
}
