package describe

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
)

// LogOptions narrow `fedbr logs`.
type LogOptions struct {
	// Step keeps only that step's pods (pause, snapshot, restore-data, warmup-0, …).
	Step string
	// Plane keeps only that data plane.
	Plane string
	// Tail is the number of lines from each pod's end (0: all).
	Tail int64
	// Previous prints the previous run of a restarted container.
	Previous bool
}

// target is one member of an operation: its plane, namespace and name, and the storage of the
// backup it belongs to or restores (where its steps save their logs).
type target struct{ plane, namespace, member, storage string }

// targets are the members of a VolumeBackup (kind "backup") or VolumeRestore ("restore").
func (s *Source) targets(ctx context.Context, kind, namespace, name string) ([]target, error) {
	var out []target
	switch kind {
	case "backup":
		var b fedv1alpha1.VolumeBackup
		if err := s.get(ctx, "VolumeBackup", namespace, name, &b); err != nil {
			return nil, err
		}
		for _, c := range b.Spec.Clusters {
			out = append(out, target{c.K8sClusterName, c.TCNamespace, fedv1alpha1.MemberName(b.Name), storageFlag(b.Spec.Template.MemberStorage(c.K8sClusterName))})
		}
	case "restore":
		var r fedv1alpha1.VolumeRestore
		if err := s.get(ctx, "VolumeRestore", namespace, name, &r); err != nil {
			return nil, err
		}
		for _, c := range r.Spec.Clusters {
			out = append(out, target{c.K8sClusterName, c.TCNamespace, fedv1alpha1.MemberName(r.Name), storageFlag(c.Backup)})
		}
	default:
		return nil, fmt.Errorf("logs of %q: want backup or restore", kind)
	}
	return out, nil
}

// Logs writes the logs of every step pod of a VolumeBackup (kind "backup") or VolumeRestore
// ("restore") in every data plane, each pod's under a header naming its plane, namespace, pod
// and step. A plane or pod that cannot be read is reported in place; the rest still print.
func (s *Source) Logs(ctx context.Context, out io.Writer, kind, namespace, name string, o LogOptions) error {
	w := &errWriter{w: out}
	targets, err := s.targets(ctx, kind, namespace, name)
	if err != nil {
		return err
	}
	found := false
	for _, t := range targets {
		if o.Plane != "" && t.plane != o.Plane {
			continue
		}
		found = true
		if err := s.planeLogs(ctx, w, t, o); err != nil {
			w.printf("==> %s: %v <==\n", t.plane, err)
		}
	}
	if !found {
		return fmt.Errorf("%s %s/%s has no member in data plane %q", kind, namespace, name, o.Plane)
	}
	return w.err
}

// errWriter keeps the first write error (a closed pipe) and writes nothing after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

func (s *Source) planeLogs(ctx context.Context, w *errWriter, t target, o LogOptions) error {
	p, ok := s.Planes[t.plane]
	switch {
	case !ok:
		return fmt.Errorf("not in the data planes' kubeconfig")
	case p.Err != nil:
		return fmt.Errorf("unreachable: %w", p.Err)
	}
	sel := job.Selector(t.member)
	if o.Step != "" {
		sel[job.LabelStep] = o.Step
	}
	pods, err := p.Kube.CoreV1().Pods(t.namespace).List(ctx, metav1ListOptions(sel))
	if err != nil {
		return fmt.Errorf("list the step pods of %s/%s: %w", t.namespace, t.member, err)
	}
	items := pods.Items
	sort.Slice(items, func(i, j int) bool { return items[i].CreationTimestamp.Before(&items[j].CreationTimestamp) })
	if len(items) == 0 {
		w.printf("==> %s/%s: no step pods of %s (deleted with their Jobs, or not started) <==\n", t.plane, t.namespace, t.member)
	}
	for i := range items {
		pod := &items[i]
		container := job.ContainerName
		if len(pod.Spec.Containers) > 0 && !hasContainer(pod, container) {
			container = pod.Spec.Containers[0].Name
		}
		w.printf("==> %s/%s/%s (step %s) <==\n", t.plane, t.namespace, pod.Name, pod.Labels[job.LabelStep])
		opts := &corev1.PodLogOptions{Container: container, Previous: o.Previous}
		if o.Tail > 0 {
			opts.TailLines = &o.Tail
		}
		stream, err := p.Kube.CoreV1().Pods(t.namespace).GetLogs(pod.Name, opts).Stream(ctx)
		if err != nil {
			w.printf("(no logs: %v)\n", err)
			continue
		}
		sc := bufio.NewScanner(stream)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for w.err == nil && sc.Scan() {
			w.printf("%s\n", sc.Text())
		}
		if err := sc.Err(); err != nil {
			w.printf("(log cut: %v)\n", err)
		}
		_ = stream.Close()
	}
	return nil
}

func hasContainer(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func metav1ListOptions(sel map[string]string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()}
}
