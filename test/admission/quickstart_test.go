package admission

import (
	"context"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/testenv"
)

// TestQuickstartObjectsAreAccepted sends every object of docs/quickstart-eks.md to the API
// server with fedbr's CRDs, as written there (its own namespace, its own name), so that the
// quickstart never shows a user an object admission refuses.
func TestQuickstartObjectsAreAccepted(t *testing.T) {
	doc := filepath.Join(env.RepoRoot, "docs", "quickstart-eks.md")
	kinds := map[string]bool{}
	for i, block := range testenv.CodeBlocks(t, doc, "yaml") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(block), &obj.Object); err != nil {
			t.Fatalf("%s yaml block %d: %v", doc, i, err)
		}
		if obj.GetNamespace() == "" || obj.GetName() == "" {
			t.Fatalf("%s yaml block %d: no namespace or name:\n%s", doc, i, block)
		}
		ensureNamespace(t, obj.GetNamespace())
		if err := env.Client.Create(context.Background(), obj, client.DryRunAll); err != nil {
			t.Errorf("%s: %s %s/%s refused: %v", doc, obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
		kinds[obj.GetKind()] = true
	}
	for _, k := range []string{"VolumeBackup", "VolumeBackupSchedule", "VolumeRestore"} {
		if !kinds[k] {
			t.Errorf("%s shows no %s", doc, k)
		}
	}
}
