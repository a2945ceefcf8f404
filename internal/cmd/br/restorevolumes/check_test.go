package restorevolumes

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestTargetChecked: the step goes on only on the member's TargetChecked=True, ends on its
// Failed=True with the agent's reason, and keeps waiting otherwise (a retry the agent says
// with Failed=False is no verdict).
func TestTargetChecked(t *testing.T) {
	cond := func(typ, status, reason string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": "m"}
	}
	for _, tt := range []struct {
		name  string
		conds []any
		v     string
		given bool
	}{
		{"no conditions", nil, "", false},
		{"checked", []any{cond("TargetChecked", "True", "TargetMatches")}, checked, true},
		{"refused", []any{cond("Failed", "True", "ClaimConflict")}, "ClaimConflict: m", true},
		{"a retry is no verdict", []any{cond("Failed", "False", "CloudUnreachable")}, "", false},
		{"TargetChecked not True", []any{cond("TargetChecked", "False", "x")}, "", false},
		{"checked, then failed: failed is terminal", []any{cond("TargetChecked", "True", "TargetMatches"), cond("Failed", "True", "X")}, "X: m", true},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": tt.conds}}}
		if v, given := TargetChecked(u); v != tt.v || given != tt.given {
			t.Errorf("%s: %q %v, want %q %v", tt.name, v, given, tt.v, tt.given)
		}
	}
}
