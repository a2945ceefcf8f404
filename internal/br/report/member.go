package report

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
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
	sel := fields.OneTermEqualSelector("metadata.name", m.name).String()
	for {
		list, err := m.client.List(ctx, metav1.ListOptions{FieldSelector: sel})
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err):
			return "", fmt.Errorf("%w %s: %w", ErrCannotWatch, m, err)
		case err != nil:
			if !sleepCtx(ctx, time.Second) {
				return "", fmt.Errorf("waiting for %s: %w", m, ctx.Err())
			}
			continue
		}
		for i := range list.Items {
			if v, ok := sig(&list.Items[i]); ok {
				return v, nil
			}
		}
		w, err := m.client.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			continue // listed again above
		}
		v, found := waitSignal(ctx, w, sig)
		w.Stop()
		if found {
			return v, nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("waiting for %s: %w", m, ctx.Err())
		}
	}
}

// waitSignal reads w until an event gives sig or the watch ends.
func waitSignal(ctx context.Context, w watch.Interface, sig Signal) (string, bool) {
	for {
		select {
		case <-ctx.Done():
			return "", false
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "", false
			}
			if u, isU := ev.Object.(*unstructured.Unstructured); isU && ev.Type != watch.Deleted {
				if v, has := sig(u); has {
					return v, true
				}
			}
		}
	}
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
