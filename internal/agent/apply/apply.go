// Package apply carries out the planners' actions against the API server, idempotently: an
// object that already exists, a Job already stopped or already gone is success, so a
// reconcile that crashed halfway is simply repeated.
package apply

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fedbr/fedbr/internal/agent/condition"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/metrics"
)

// Recorder records Kubernetes Events (events.k8s.io), as controller-runtime's
// manager.GetEventRecorder returns.
type Recorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Applier applies actions for one member kind.
type Applier struct {
	Client   client.Client
	Recorder Recorder
	Metrics  *metrics.Metrics
	Kind     string
}

// EnsureConfigMap creates cm unless it exists.
func (a *Applier) EnsureConfigMap(ctx context.Context, cm *corev1.ConfigMap) error {
	return ignoreExists(a.Client.Create(ctx, cm.DeepCopy()))
}

// EnsureServiceAccount creates the steps' service account, Role and RoleBinding in namespace,
// at once: a RoleBinding may name a Role that does not exist yet, and the three round trips
// sit before a step's pod start. A Role that exists with other rules gets these.
func (a *Applier) EnsureServiceAccount(ctx context.Context, namespace string) error {
	sa, role, rb := job.ServiceAccountObjects(namespace)
	return Concurrently([]client.Object{sa, role, rb}, func(o client.Object) error {
		err := a.Client.Create(ctx, o)
		if apierrors.IsAlreadyExists(err) {
			if want, ok := o.(*rbacv1.Role); ok {
				err = a.updateRules(ctx, want)
			} else {
				err = nil
			}
		}
		if err != nil {
			return fmt.Errorf("create %T %s/%s: %w", o, namespace, o.GetName(), err)
		}
		return nil
	})
}

// updateRules gives the stored Role want's rules when they differ.
func (a *Applier) updateRules(ctx context.Context, want *rbacv1.Role) error {
	have := &rbacv1.Role{}
	if err := a.Client.Get(ctx, client.ObjectKeyFromObject(want), have); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(have.Rules, want.Rules) {
		return nil
	}
	have.Rules = want.Rules
	return a.Client.Update(ctx, have)
}

// PatchStatusLocked applies mutate to obj's status and patches it with obj's resource version,
// so that what another writer wrote meanwhile is not lost (the patch fails instead, and the
// reconcile runs again).
func (a *Applier) PatchStatusLocked(ctx context.Context, obj client.Object, mutate func()) error {
	orig, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("copy %T", obj)
	}
	mutate()
	return a.Client.Status().Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// ErrForeignJob: a Job of the name the agent gives a step's Job exists and is not controlled
// by the member: the agent never adopts it.
var ErrForeignJob = errors.New("a Job the member does not control has its step Job's name")

// CreateJob creates j for member. An existing Job of that name is success when the member
// controls it (a create the cache had not seen yet); one it does not control is ErrForeignJob,
// naming it: whoever may create Jobs in the namespace could otherwise plant a step's Job.
func (a *Applier) CreateJob(ctx context.Context, member client.Object, j *batchv1.Job) error {
	log.FromContext(ctx).Info("Creating Job", "job", j.Name, "step", j.Labels[job.LabelStep])
	err := a.Client.Create(ctx, j.DeepCopy())
	if apierrors.IsAlreadyExists(err) {
		have := &batchv1.Job{}
		if err := a.Client.Get(ctx, client.ObjectKeyFromObject(j), have); err != nil {
			return fmt.Errorf("read the existing Job %s/%s: %w", j.Namespace, j.Name, err)
		}
		if !metav1.IsControlledBy(have, member) {
			return fmt.Errorf("%w: Job %s/%s: delete it", ErrForeignJob, j.Namespace, j.Name)
		}
		return nil
	}
	if err != nil {
		return err
	}
	step := j.Labels[job.LabelStep]
	a.Metrics.JobsCreated.WithLabelValues(a.Kind, step).Inc()
	a.Recorder.Eventf(member, nil, corev1.EventTypeNormal, "JobCreated", "Create", "started step %s as Job %s", step, j.Name)
	return nil
}

// StopJob suspends a Job and deletes its pods: each gets SIGTERM (the pause lifts everything
// it holds and reports Stopped) and a suspended Job starts no replacement.
func (a *Applier) StopJob(ctx context.Context, member client.Object, namespace, name string) error {
	log.FromContext(ctx).Info("Stopping Job", "job", name)
	j := &batchv1.Job{}
	if err := a.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, j); err != nil {
		return client.IgnoreNotFound(err)
	}
	if j.Spec.Suspend == nil || !*j.Spec.Suspend {
		orig := j.DeepCopy()
		j.Spec.Suspend = ptr.To(true)
		if err := a.Client.Patch(ctx, j, client.MergeFrom(orig)); err != nil {
			return client.IgnoreNotFound(err)
		}
		a.Recorder.Eventf(member, nil, corev1.EventTypeNormal, "JobStopped", "Stop", "stopping Job %s (SIGTERM to its pod)", name)
	}
	pods := &corev1.PodList{}
	if err := a.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{batchv1.JobNameLabel: name}); err != nil {
		return err
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp != nil {
			continue
		}
		if err := client.IgnoreNotFound(a.Client.Delete(ctx, &pods.Items[i])); err != nil {
			return err
		}
	}
	return nil
}

// DeleteJob deletes a Job and its pods (SIGTERM lets the step delete what it created). The
// deletion is in the foreground: the Job stays, marked deleting, until its pods are gone, so
// whoever waits for the Job to disappear waits for the step's own cleanup too.
func (a *Applier) DeleteJob(ctx context.Context, member client.Object, namespace, name string) error {
	log.FromContext(ctx).Info("Deleting Job", "job", name)
	j := &batchv1.Job{}
	j.Namespace, j.Name = namespace, name
	err := a.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationForeground))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		a.Recorder.Eventf(member, nil, corev1.EventTypeNormal, "JobDeleted", "Delete", "deleted Job %s", name)
	}
	return err
}

// ConditionEvent records a condition transition as an Event (Warning when warn).
func ConditionEvent(ctx context.Context, r Recorder, obj runtime.Object, t condition.Transition, warn bool) {
	typ := corev1.EventTypeNormal
	if warn {
		typ = corev1.EventTypeWarning
	}
	// Logged too, with the log's sub-second time: events carry whole seconds in most views,
	// and the hops of the pause window are measured in milliseconds.
	log.FromContext(ctx).Info("Condition", "type", t.Type, "status", t.Status, "reason", t.Reason)
	r.Eventf(obj, nil, typ, t.Reason, t.Type, "%s=%s: %s", t.Type, t.Status, t.Message)
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// Run counts the leading actions of as whose group is the first one's, a group other than 0:
// actions of one group do not depend on one another, so a run of them is applied at once
// (each is an API round trip, and the runs sit on the way to a step's pod start or TiKV's).
func Run[A any](as []A, group func(A) int) int {
	if len(as) == 0 || group(as[0]) == 0 {
		return 0
	}
	n := 1
	for n < len(as) && group(as[n]) == group(as[0]) {
		n++
	}
	return n
}

// ByKind is a group function for Run: the kinds of each list form one group (1, 2, …, in the
// order given); any other kind is 0, applied alone.
func ByKind[A any, K comparable](kind func(A) K, groups ...[]K) func(A) int {
	index := map[K]int{}
	for i, g := range groups {
		for _, k := range g {
			index[k] = i + 1
		}
	}
	return func(a A) int { return index[kind(a)] }
}

// Concurrently applies each of as at once; the first error wins, the others still ran.
func Concurrently[A any](as []A, apply func(A) error) error {
	var g errgroup.Group
	for _, a := range as {
		g.Go(func() error { return apply(a) })
	}
	return g.Wait()
}

// OtherCluster says a member names a data plane other than this agent's (and records a
// Warning Event): the agent leaves it alone.
func OtherCluster(r Recorder, m runtime.Object, memberCluster, agentCluster string) bool {
	if memberCluster == agentCluster {
		return false
	}
	r.Eventf(m, nil, corev1.EventTypeWarning, "OtherCluster", "Ignore", "member is for data plane %q; this agent serves %q", memberCluster, agentCluster)
	return true
}
