// Package agentlease tells whether a data plane's agent runs, from the Lease its leader election
// holds (fedbr-agent-<clusterName>, renewed every few seconds by the active agent): the manager
// probes it with every data plane (metric fedbr_dataplane_agent_up) and `fedbr preflight`
// checks it, both with the manager's own identity, which the agent chart lets read that one
// Lease and nothing else of the agent's.
package agentlease

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/fedbr/fedbr/internal/agent/job"
)

// DefaultNamespace is where the agent chart installs the agent, and so its Lease.
const DefaultNamespace = "fedbr-system"

// Name is the Lease of the agent whose --k8s-cluster-name is clusterName.
func Name(clusterName string) string { return "fedbr-agent-" + job.LabelValue(clusterName) }

var (
	// ErrNoAgent: no agent holds the Lease (none runs with this cluster name and leader
	// election, or it stopped and released it).
	ErrNoAgent = errors.New("no agent runs for this data plane")
	// ErrStale: the Lease's holder stopped renewing it.
	ErrStale = errors.New("the agent stopped renewing its lease")
	// ErrNotReadable: the manager's identity may not read the Lease.
	ErrNotReadable = errors.New("the agent's lease is not readable")
)

// State is what the Lease says of the agent.
type State struct {
	// Holder is the active agent's identity (its pod and a unique suffix).
	Holder string
	// Renewed is when it last renewed the Lease (the agent's clock).
	Renewed time.Time
	// Duration is how long the Lease lasts unrenewed.
	Duration time.Duration
}

// Check reads the Lease of clusterName's agent in namespace and says whether an agent holds it
// and renewed it within twice its duration of now (the slack covers the two clocks).
func Check(ctx context.Context, c coordinationv1client.LeasesGetter, namespace, clusterName string, now time.Time) (State, error) {
	name := Name(clusterName)
	l, err := c.Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return State{}, fmt.Errorf("%w: no Lease %s/%s (the agent runs with --leader-elect and --k8s-cluster-name %q, in namespace %s?)",
			ErrNoAgent, namespace, name, clusterName, namespace)
	case apierrors.IsForbidden(err):
		return State{}, fmt.Errorf("%w: Lease %s/%s: %w (the agent chart's managerAccess grants it)", ErrNotReadable, namespace, name, err)
	case err != nil:
		return State{}, fmt.Errorf("read Lease %s/%s: %w", namespace, name, err)
	}
	var st State
	if h := l.Spec.HolderIdentity; h != nil {
		st.Holder = *h
	}
	if r := l.Spec.RenewTime; r != nil {
		st.Renewed = r.Time
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil {
		st.Duration = time.Duration(*d) * time.Second
	}
	switch {
	case st.Holder == "":
		return st, fmt.Errorf("%w: Lease %s/%s has no holder (the agent stopped and released it)", ErrNoAgent, namespace, name)
	case st.Renewed.IsZero() || st.Duration <= 0:
		return st, fmt.Errorf("%w: Lease %s/%s held by %s has no renew time or duration", ErrStale, namespace, name, st.Holder)
	case now.Sub(st.Renewed) > 2*st.Duration:
		return st, fmt.Errorf("%w: Lease %s/%s held by %s was last renewed %s ago (it lasts %s)", ErrStale, namespace, name, st.Holder,
			now.Sub(st.Renewed).Round(time.Second), st.Duration)
	}
	return st, nil
}
