package kubelet

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// RootEnv is the environment variable that tells a lab process where its container's
// filesystem root is: a volume mounted at /data in the pod spec is at $FEDBR_LAB_ROOT/data.
const RootEnv = "FEDBR_LAB_ROOT"

// envSource resolves what a container's environment refers to.
type envSource struct {
	client kubernetes.Interface
	pod    *corev1.Pod
	// node fields for the downward API and the resource defaults.
	nodeName string
	hostIP   string
	alloc    corev1.ResourceList
}

// environment builds a container's environment the way the kubelet does: envFrom first,
// then env (later entries win), with $(VAR) references expanded against what is defined so
// far. base holds runtime-provided variables that the spec may override.
func (s envSource) environment(ctx context.Context, c *corev1.Container, base []corev1.EnvVar) ([]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, e := range base {
		set(e.Name, e.Value)
	}
	for _, from := range c.EnvFrom {
		data, err := s.envFrom(ctx, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vals))
			continue
		}
		v, err := s.valueFrom(ctx, c, e)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if v != nil {
			set(e.Name, *v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out, nil
}

func (s envSource) envFrom(ctx context.Context, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := s.client.CoreV1().ConfigMaps(s.pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("envFrom configmap %s: %w", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		sec, err := s.client.CoreV1().Secrets(s.pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("envFrom secret %s: %w", from.SecretRef.Name, err)
		}
		out := make(map[string]string, len(sec.Data))
		for k, v := range sec.Data {
			out[k] = string(v)
		}
		return out, nil
	}
	return nil, nil
}

// valueFrom resolves one env var's valueFrom; nil means a missing optional key.
func (s envSource) valueFrom(ctx context.Context, c *corev1.Container, e corev1.EnvVar) (*string, error) {
	vf := e.ValueFrom
	switch {
	case vf.FieldRef != nil:
		v, err := s.field(vf.FieldRef.FieldPath)
		return &v, err
	case vf.ResourceFieldRef != nil:
		v, err := s.resource(c, vf.ResourceFieldRef)
		return &v, err
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		sec, err := s.client.CoreV1().Secrets(s.pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && optional {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", ref.Name, err)
		}
		v, ok := sec.Data[ref.Key]
		switch {
		case ok:
			return new(string(v)), nil
		case optional:
			return nil, nil
		}
		return nil, fmt.Errorf("secret %s has no key %q", ref.Name, ref.Key)
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, err := s.client.CoreV1().ConfigMaps(s.pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && optional {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("configmap %s: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		switch {
		case ok:
			return &v, nil
		case optional:
			return nil, nil
		}
		return nil, fmt.Errorf("configmap %s has no key %q", ref.Name, ref.Key)
	}
	return nil, fmt.Errorf("unsupported valueFrom")
}

// field is the downward API: the value of a pod field path.
func (s envSource) field(path string) (string, error) {
	p := s.pod
	if k, ok := subscript(path, "metadata.labels"); ok {
		return p.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return p.Annotations[k], nil
	}
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return s.nodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.podIP", "status.hostIPs", "status.podIPs":
		// Pods share the node's network in the lab.
		return s.hostIP, nil
	case "metadata.labels", "metadata.annotations":
		m := p.Labels
		if path == "metadata.annotations" {
			m = p.Annotations
		}
		return formatMap(m), nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

func formatMap(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return b.String()
}

// resource is a resourceFieldRef: the container's limit or request, defaulting (like the
// kubelet) to the node's allocatable for an unset limit.
func (s envSource) resource(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" {
		found := false
		for i := range s.pod.Spec.Containers {
			if s.pod.Spec.Containers[i].Name == ref.ContainerName {
				c, found = &s.pod.Spec.Containers[i], true
			}
		}
		if !found {
			return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		q, ok = s.alloc[corev1.ResourceName(name)]
	}
	if !ok {
		return "0", nil
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(div.MilliValue())))), nil
}

// expand replaces $(VAR) with defined values, turns $$ into $, and leaves unknown
// references as written, like the kubelet's expansion.
func expand(in string, vals map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		if in[i] != '$' || i+1 >= len(in) {
			b.WriteByte(in[i])
			continue
		}
		switch in[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(in[i+2:], ')')
			if end < 0 {
				b.WriteString(in[i:])
				return b.String()
			}
			name := in[i+2 : i+2+end]
			if v, ok := vals[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(in[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func expandAll(in []string, env []string) []string {
	vals := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, vals)
	}
	return out
}
