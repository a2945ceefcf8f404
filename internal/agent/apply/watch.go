package apply

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fedbr/fedbr/internal/agent/job"
)

// MapOwner maps a Job or ConfigMap the agent created to the member of kind it belongs to (its
// job.AnnotationOwner), so a step's progress wakes the member's reconcile at once.
func MapOwner(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		k, name, ok := strings.Cut(o.GetAnnotations()[job.AnnotationOwner], "/")
		if !ok || k != kind || name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
}
