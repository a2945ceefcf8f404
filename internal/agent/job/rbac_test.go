package job

import (
	"bytes"
	"os"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// TestStepClusterRoleMatchesTheAgentsRole: the ClusterRole shipped for a template's own
// service account (config/rbac, fedbr-br-step) grants what the Role the agent creates grants,
// so a step behaves the same under either.
func TestStepClusterRoleMatchesTheAgentsRole(t *testing.T) {
	b, err := os.ReadFile("../../../config/rbac/agent_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, role, _ := ServiceAccountObjects("ns")
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		var cr rbacv1.ClusterRole
		if err := yaml.Unmarshal(doc, &cr); err != nil {
			t.Fatal(err)
		}
		if cr.Kind != "ClusterRole" || cr.Name != "fedbr-br-step" {
			continue
		}
		if !equality.Semantic.DeepEqual(cr.Rules, role.Rules) {
			t.Errorf("fedbr-br-step rules = %+v\nthe agent's Role grants %+v", cr.Rules, role.Rules)
		}
		return
	}
	t.Fatal("no ClusterRole fedbr-br-step in config/rbac/agent_role.yaml")
}
