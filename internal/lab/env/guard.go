package env

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// StatusGuardFile is the members' status guard (a ValidatingAdmissionPolicy and its binding),
// the very file the agent's chart installs: the lab applies it to every cluster, so step pods,
// which report with the steps' service account, are held to it as in a real data plane.
func StatusGuardFile() string {
	return filepath.Join(RepoRoot(), "charts", "fedbr-agent", "templates", "member-status-guard.yaml")
}

var admissionGVRs = map[string]schema.GroupVersionResource{
	"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
	"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
}

// applyStatusGuard applies StatusGuardFile (server-side).
func applyStatusGuard(ctx context.Context, dyn dynamic.Interface) error {
	file := StatusGuardFile()
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		gvr, ok := admissionGVRs[obj.GetKind()]
		if !ok {
			return fmt.Errorf("%s: a %q, want a ValidatingAdmissionPolicy or its binding", file, obj.GetKind())
		}
		body, err := json.Marshal(obj.Object)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(gvr).Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)}); err != nil {
			return fmt.Errorf("apply %s %s from %s: %w", obj.GetKind(), obj.GetName(), file, err)
		}
	}
	return nil
}
