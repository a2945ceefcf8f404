package agentlease

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestCheck(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewed time.Time, secs int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: Name("dp1")}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		if !renewed.IsZero() {
			l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(renewed))
		}
		if secs > 0 {
			l.Spec.LeaseDurationSeconds = ptr.To(secs)
		}
		return l
	}
	for _, tt := range []struct {
		name  string
		lease *coordinationv1.Lease
		want  error
	}{
		{"held and renewed", lease("agent-0_x", now.Add(-5*time.Second), 15), nil},
		{"renewed within twice its duration (two clocks)", lease("agent-0_x", now.Add(-29*time.Second), 15), nil},
		{"not renewed for longer", lease("agent-0_x", now.Add(-31*time.Second), 15), ErrStale},
		{"released", lease("", now, 15), ErrNoAgent},
		{"no renew time", lease("agent-0_x", time.Time{}, 15), ErrStale},
		{"no lease", nil, ErrNoAgent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset()
			if tt.lease != nil {
				c = fake.NewClientset(tt.lease)
			}
			st, err := Check(context.Background(), c.CoordinationV1(), DefaultNamespace, "dp1", now)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Check = %+v, %v; want %v", st, err, tt.want)
			}
		})
	}
	if got := Name("dp1"); got != "fedbr-agent-dp1" {
		t.Errorf("Name(dp1) = %q", got)
	}
}
