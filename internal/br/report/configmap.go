package report

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
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
	sel := fields.OneTermEqualSelector("metadata.name", c.name).String()
	for {
		list, err := c.client.ConfigMaps(c.namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			if ctx.Err() != nil {
				return "", fmt.Errorf("waiting for %s in ConfigMap %s: %w", key, c, ctx.Err())
			}
			if !sleepCtx(ctx, time.Second) {
				return "", fmt.Errorf("waiting for %s in ConfigMap %s: %w", key, c, ctx.Err())
			}
			continue
		}
		for _, cm := range list.Items {
			if v, ok := cm.Data[key]; ok {
				return v, nil
			}
		}
		w, err := c.client.ConfigMaps(c.namespace).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			continue // listed again above
		}
		v, found := waitEvent(ctx, w, key)
		w.Stop()
		if found {
			return v, nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("waiting for %s in ConfigMap %s: %w", key, c, ctx.Err())
		}
	}
}

// waitEvent reads w until an event carries key or the watch ends.
func waitEvent(ctx context.Context, w watch.Interface, key string) (string, bool) {
	for {
		select {
		case <-ctx.Done():
			return "", false
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "", false
			}
			if cm, isCM := ev.Object.(*corev1.ConfigMap); isCM && ev.Type != watch.Deleted {
				if v, has := cm.Data[key]; has {
					return v, true
				}
			}
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
