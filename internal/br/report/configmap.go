package report

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// ConfigMap is the Sink of one command's keys in one ConfigMap.
type ConfigMap struct {
	client    corev1client.ConfigMapsGetter
	namespace string
	name      string
	manager   string
}

// NewConfigMap returns the Sink that server-side applies command's keys to the ConfigMap
// namespace/name through cfg, as field manager FieldManager(command).
func NewConfigMap(cfg *rest.Config, namespace, name, command string) (*ConfigMap, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = FieldManager(command)
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultAttemptTimeout
	}
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for the status ConfigMap: %w", err)
	}
	return &ConfigMap{client: c, namespace: namespace, name: name, manager: FieldManager(command)}, nil
}

// Apply server-side applies data as the ConfigMap's keys owned by this command. Only these
// keys are sent, so other writers' keys are untouched; an apply creates the ConfigMap when it
// is missing (without the owner reference the agent gives it). Force takes over a key another
// manager happened to set: the key is this command's by contract.
func (c *ConfigMap) Apply(ctx context.Context, data map[string]string) error {
	cm := corev1ac.ConfigMap(c.name, c.namespace).WithData(data)
	if _, err := c.client.ConfigMaps(c.namespace).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: c.manager, Force: true}); err != nil {
		return fmt.Errorf("apply ConfigMap %s/%s: %w", c.namespace, c.name, err)
	}
	return nil
}

// String names the ConfigMap for logs.
func (c *ConfigMap) String() string { return c.namespace + "/" + c.name }

// WaitKey returns the value of key once the ConfigMap has it, watching it until then: a step
// started ahead of time waits here for what only the agent can give it (the backup ts), and
// learns it within one watch event of its being written.
func (c *ConfigMap) WaitKey(ctx context.Context, key string) (string, error) {
	cms := c.client.ConfigMaps(c.namespace)
	v, err := named{
		name: c.name,
		list: func(ctx context.Context, o metav1.ListOptions) ([]runtime.Object, string, error) {
			l, err := cms.List(ctx, o)
			if err != nil {
				return nil, "", err
			}
			items := make([]runtime.Object, len(l.Items))
			for i := range l.Items {
				items[i] = &l.Items[i]
			}
			return items, l.ResourceVersion, nil
		},
		watch: cms.Watch,
		value: func(o runtime.Object) (string, bool) {
			cm, ok := o.(*corev1.ConfigMap)
			if !ok {
				return "", false
			}
			v, has := cm.Data[key]
			return v, has
		},
		listFailed: func(error) error { return nil }, // the API server comes back; keep trying
	}.wait(ctx)
	if err != nil {
		return "", fmt.Errorf("waiting for %s in ConfigMap %s: %w", key, c, err)
	}
	return v, nil
}
