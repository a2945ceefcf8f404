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
)

// Signal reads a go signal off a member object: its value and whether it is given.
type Signal func(member *unstructured.Unstructured) (string, bool)

// Member watches the member object a step runs for. The manager writes its go signals (the
// backup ts, start the pause, release it) into the member's spec; a step that watches the
// member itself learns them one hop sooner than through the agent, which copies them into the
// status ConfigMap (still watched too: whichever comes first).
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

// ErrCannotWatch marks a member this step may not read (a service account without the rule):
// the step then relies on the status ConfigMap alone.
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
	if err != nil && !errors.Is(err, ErrCannotWatch) {
		return "", fmt.Errorf("waiting for %s: %w", m, err)
	}
	return v, err
}

// ApplyStatus server-side applies fields into the member's status as fieldManager, forced:
// the fields are the step's by contract (the agent's status patches leave fields they do
// not change alone).
func (m *Member) ApplyStatus(ctx context.Context, gvk schema.GroupVersionKind, fieldManager string, fields map[string]any) error {
	u := &unstructured.Unstructured{Object: map[string]any{"status": fields}}
	u.SetGroupVersionKind(gvk)
	u.SetName(m.name)
	u.SetNamespace(m.namespace)
	if _, err := m.client.ApplyStatus(ctx, m.name, u, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply the status of %s: %w", m, err)
	}
	return nil
}
