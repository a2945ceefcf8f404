package env

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// statusGuardObjects reads StatusGuardFile's objects, each with its resource.
func statusGuardObjects() ([]*unstructured.Unstructured, []schema.GroupVersionResource, error) {
	file := StatusGuardFile()
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	var objs []*unstructured.Unstructured
	var gvrs []schema.GroupVersionResource
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
		gvr, ok := admissionGVRs[obj.GetKind()]
		if !ok {
			return nil, nil, fmt.Errorf("%s: a %q, want a ValidatingAdmissionPolicy or its binding", file, obj.GetKind())
		}
		objs, gvrs = append(objs, obj), append(gvrs, gvr)
	}
	return objs, gvrs, nil
}

// adoptStatusGuard hands the guard that `lab up` applied to the agent's Helm release, with the
// ownership metadata Helm checks before it takes over an object, so installing the agent's
// chart (which carries the same file) upgrades it rather than failing on it.
func adoptStatusGuard(ctx context.Context, dyn dynamic.Interface, release, namespace string) error {
	objs, gvrs, err := statusGuardObjects()
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
		"annotations": map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace},
	}})
	if err != nil {
		return err
	}
	for i, obj := range objs {
		_, err := dyn.Resource(gvrs[i]).Patch(ctx, obj.GetName(), types.MergePatchType, body, metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("hand %s %s to the Helm release %s: %w", obj.GetKind(), obj.GetName(), release, err)
		}
	}
	return nil
}

// applyStatusGuard applies StatusGuardFile (server-side).
func applyStatusGuard(ctx context.Context, dyn dynamic.Interface) error {
	file := StatusGuardFile()
	objs, gvrs, err := statusGuardObjects()
	if err != nil {
		return err
	}
	for i, obj := range objs {
		gvr := gvrs[i]
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
