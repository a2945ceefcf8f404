package report

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// Signal reads a go signal off a member object: its value and whether it is given.
type Signal func(member *unstructured.Unstructured) (string, bool)

// Member watches the member object a step runs for: the manager writes its go signals (start
// the pause, the backup ts, release the pause, restore the data) into the member's spec, the
// one place a step reads them from.
type Member struct {
	client    dynamic.ResourceInterface
	namespace string
	name      string
	resource  schema.GroupVersionResource
}

// NewMember returns the watcher of the object name of resource in namespace through cfg.
func NewMember(cfg *rest.Config, resource schema.GroupVersionResource, namespace, name string) (*Member, error) {
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for member %s/%s: %w", namespace, name, err)
	}
	return &Member{client: c.Resource(resource).Namespace(namespace), namespace: namespace, name: name, resource: resource}, nil
}

// String names the member for logs.
func (m *Member) String() string { return m.resource.Resource + " " + m.namespace + "/" + m.name }

// Step reads the member's report of step (its entry in status.steps) from the API server;
// false when the member has no such entry.
func (m *Member) Step(ctx context.Context, step string) (dpv1alpha1.StepReport, bool, error) {
	u, err := m.client.Get(ctx, m.name, metav1.GetOptions{})
	if err != nil {
		return dpv1alpha1.StepReport{}, false, fmt.Errorf("read %s: %w", m, err)
	}
	steps, _, err := unstructured.NestedSlice(u.Object, "status", "steps")
	if err != nil {
		return dpv1alpha1.StepReport{}, false, fmt.Errorf("read %s: status.steps: %w", m, err)
	}
	for _, raw := range steps {
		obj, ok := raw.(map[string]any)
		if !ok || obj["name"] != step {
			continue
		}
		var s dpv1alpha1.StepReport
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &s); err != nil {
			return s, false, fmt.Errorf("read %s: status.steps[%s]: %w", m, step, err)
		}
		return s, true, nil
	}
	return dpv1alpha1.StepReport{}, false, nil
}

// ErrCannotWatch marks a member this step may not read (a service account without the rule,
// or no such member): the step cannot learn its go signal.
var ErrCannotWatch = errors.New("cannot watch the member")

// Wait returns the value of sig once the member gives it, watching the member until then.
func (m *Member) Wait(ctx context.Context, sig Signal) (string, error) {
	v, err := named{
		name: m.name,
		list: func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
			l, err := m.client.List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			items := make([]runtime.Object, len(l.Items))
			for i := range l.Items {
				items[i] = &l.Items[i]
			}
			return items, l.GetResourceVersion(), nil
		},
		watch: m.client.Watch,
		value: func(o runtime.Object) (string, bool) {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				return "", false
			}
			return sig(u)
		},
		listFailed: func(err error) error {
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) {
				return fmt.Errorf("%w %s: %w", ErrCannotWatch, m, err)
			}
			return nil
		},
	}.wait(ctx)
	switch {
	case errors.Is(err, errGone):
		return "", fmt.Errorf("%w %s: it does not exist", ErrCannotWatch, m)
	case err != nil && !errors.Is(err, ErrCannotWatch):
		return "", fmt.Errorf("waiting for %s: %w", m, err)
	}
	return v, err
}
