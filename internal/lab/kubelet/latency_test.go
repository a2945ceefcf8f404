package kubelet

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// TestPodLatency runs short pods and logs how long each took from creation to being
// scheduled and to Succeeded, as watched through the API server. It asserts no timing.
func TestPodLatency(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("lat%d", i)
		w, err := l.client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "shell:1", Command: []string{"true"}}}}}
		start := time.Now()
		if _, err := l.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var sched, done time.Duration
		var last corev1.PodPhase
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				break
			}
			if p.Spec.NodeName != "" && sched == 0 {
				sched = time.Since(start)
			}
			last = p.Status.Phase
			if terminalPhase(last) {
				done = time.Since(start)
				break
			}
		}
		w.Stop()
		if last != corev1.PodSucceeded {
			t.Fatalf("%s ended %q, want Succeeded", name, last)
		}
		t.Logf("%s: scheduled after %s, Succeeded after %s", name, sched.Round(time.Millisecond), done.Round(time.Millisecond))
	}
}
