package plane

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agentlease"
	"github.com/fedbr/fedbr/internal/metrics"
	"github.com/fedbr/fedbr/internal/testenv"
)

// TestProbeSeesTheAgent: each probe reads the plane's agent Lease. Without it the plane has no
// agent (ErrNoAgent, fedbr_dataplane_agent_up 0); a held and renewed one makes it 1; one not
// renewed for an hour is stale (ErrStale, 0).
func TestProbeSeesTheAgent(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	env := testenv.Start(t)
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, dpv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "planes")
	if err := testenv.WriteKubeconfig(path, map[string]*testenv.Env{"dp1": env}); err != nil {
		t.Fatal(err)
	}
	s, err := Load(Options{Kubeconfig: path, Scheme: scheme, Log: logr.Discard(), ProbeInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := s.Get("dp1")
	if !ok {
		t.Fatal("plane dp1 not loaded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan struct{})
	go func() { _ = s.Start(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	up := func() float64 { return testutil.ToFloat64(metrics.PlaneAgentUp.WithLabelValues("dp1")) }
	wait := func(what string, want error, metric float64) {
		t.Helper()
		for {
			checked, err := p.Agent()
			if checked && errors.Is(err, want) && (want != nil || err == nil) && up() == metric {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: the probe says checked %v, %v, fedbr_dataplane_agent_up %v; want %v and %v", what, checked, err, up(), want, metric)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait("no Lease", agentlease.ErrNoAgent, 0)

	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentlease.DefaultNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name("dp1")},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("fedbr-agent-0_1"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
	if err := env.Client.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	wait("a renewed Lease", nil, 1)

	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now().Add(-time.Hour)))
	if err := env.Client.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	wait("a Lease not renewed for an hour", agentlease.ErrStale, 0)
}
