// Package federation is what the manager's VolumeBackup and VolumeRestore controllers share: the
// reconcile loop (Driver: finalizer, observe and plan, apply, status, Events) and what they know
// about the member objects they drive in the data planes — the labels that tie a member to its
// owner (a member lives in another cluster, so no owner reference can), the start time of its
// current step, and the patches that move it.
package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// Labels are the owner labels of a member of owner.
func Labels(owner client.Object) map[string]string {
	return map[string]string{
		dpv1alpha1.LabelOwnerName:      owner.GetName(),
		dpv1alpha1.LabelOwnerNamespace: owner.GetNamespace(),
		dpv1alpha1.LabelOwnerUID:       string(owner.GetUID()),
	}
}

// OwnerRequest maps a member's labels to its owner's reconcile request.
func OwnerRequest(m client.Object) []reconcile.Request {
	l := m.GetLabels()
	name, ns := l[dpv1alpha1.LabelOwnerName], l[dpv1alpha1.LabelOwnerNamespace]
	if name == "" || ns == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// CheckOwner refuses a member that another owner created under the same name: adopting it would
// drive someone else's backup or restore. The error is terminal: retrying cannot fix it.
func CheckOwner(m client.Object, owner client.Object, plane string) error {
	if uid := m.GetLabels()[dpv1alpha1.LabelOwnerUID]; uid != string(owner.GetUID()) {
		return reconcile.TerminalError(fmt.Errorf("member %s/%s in %s belongs to another owner (uid %q, not %s); use another name",
			m.GetNamespace(), m.GetName(), plane, uid, owner.GetUID()))
	}
	return nil
}

// PhaseSince is when the member's current step started (zero when unknown).
func PhaseSince(m client.Object) time.Time {
	t, err := time.Parse(time.RFC3339, m.GetAnnotations()[dpv1alpha1.AnnotationPhaseSince])
	if err != nil {
		return time.Time{}
	}
	return t
}

// NewMeta is the metadata of a new member of owner, whose first step starts now: the owner's
// labels and annotations (dpv1alpha1.CarriedLabels, CarriedAnnotations; the agent carries those
// its --pod-labels and --pod-annotations allow on to every step's pod), then the owner labels and the step clock, which no copied key can
// replace. They are copied once, at creation: a label added to the owner later reaches Jobs only
// of members created after it.
func NewMeta(owner client.Object, name, namespace string, now time.Time) metav1.ObjectMeta {
	labels := dpv1alpha1.CarriedLabels(owner.GetLabels())
	for k, v := range Labels(owner) {
		labels[k] = v
	}
	annotations := dpv1alpha1.CarriedAnnotations(owner.GetAnnotations())
	annotations[dpv1alpha1.AnnotationPhaseSince] = now.UTC().Format(time.RFC3339)
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, Annotations: annotations}
}

// Create creates a member and says whether it did; one that already exists (an earlier plan
// from a stale cache) is success without creating.
func Create(ctx context.Context, c client.Client, m client.Object) (created bool, err error) {
	err = c.Create(ctx, m)
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

// SetSpec merge-patches spec fields of the member obj (name and namespace set) that only ever
// turn on (startPause, resumeGC, dataMember): patching one again is a no-op.
func SetSpec(ctx context.Context, c client.Client, obj client.Object, spec map[string]any) error {
	raw, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, raw))
}

// MovePhase moves the member obj (name and namespace set) from the spec phase from to the next
// step: one JSON patch that tests that spec.phase is still from, sets the spec fields and
// restarts the step clock at now. The test is on the phase alone, not on the member's
// resourceVersion: the steps and the agent write the member's status all along (inside the GC
// pause window too), and a lock on the version would make every move that races them a conflict,
// a read and a second patch. A move planned from a copy whose phase is no longer the stored one
// (a cache behind, or a pass repeated after a crash) is refused by the API server, and the member
// is read again: when done (reading obj as stored) says it is already there or further, the move
// is done and the clock keeps its time; otherwise it is made from the stored phase. So a
// member's phase moves once, never backwards (the member's CEL rules refuse that too), and its
// step clock starts once per step.
func MovePhase(ctx context.Context, c client.Client, r client.Reader, obj client.Object, from string, spec map[string]any, now time.Time, done func() bool) error {
	annotations := true // every member is created with its step clock (NewMeta)
	for range 3 {
		raw, err := movePatch(from, spec, now, annotations)
		if err != nil {
			return err
		}
		err = c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, raw))
		if err == nil || !apierrors.IsInvalid(err) && !apierrors.IsConflict(err) {
			return err
		}
		if gerr := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); gerr != nil {
			return errors.Join(err, gerr)
		}
		if done() {
			return nil
		}
		stored, _, ferr := unstructuredPhase(obj)
		if ferr != nil {
			return errors.Join(err, ferr)
		}
		if stored == from && obj.GetAnnotations() != nil {
			return err // refused for another reason than a moved phase: the rules said no
		}
		from, annotations = stored, obj.GetAnnotations() != nil
	}
	return fmt.Errorf("member %s/%s kept changing while its phase was moved", obj.GetNamespace(), obj.GetName())
}

// movePatch is MovePhase's JSON patch: test spec.phase, set the spec fields and the step clock
// (creating the annotations first on a member that has none).
func movePatch(from string, spec map[string]any, now time.Time, annotations bool) ([]byte, error) {
	ops := []map[string]any{{"op": "test", "path": "/spec/phase", "value": from}}
	for _, k := range slices.Sorted(maps.Keys(spec)) {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/" + jsonPointerEscape(k), "value": spec[k]})
	}
	if !annotations {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{}})
	}
	ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/" + jsonPointerEscape(dpv1alpha1.AnnotationPhaseSince),
		"value": now.UTC().Format(time.RFC3339)})
	return json.Marshal(ops)
}

// jsonPointerEscape escapes one JSON pointer reference token (RFC 6901).
func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// unstructuredPhase reads spec.phase of a member of either kind.
func unstructuredPhase(obj client.Object) (string, bool, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return "", false, err
	}
	return unstructured.NestedString(u, "spec", "phase")
}

// Delete deletes a member; one already gone is success.
func Delete(ctx context.Context, c client.Client, obj client.Object) error {
	return client.IgnoreNotFound(c.Delete(ctx, obj))
}

// Message is what a status says now, for a phase-change Event: the failed condition's message
// when it is True, else the ready condition's, else fallback.
func Message(cs []metav1.Condition, failed, ready, fallback string) string {
	if c := apimeta.FindStatusCondition(cs, failed); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	if c := apimeta.FindStatusCondition(cs, ready); c != nil {
		return c.Message
	}
	return fallback
}

// MaxConditionMessage is the API's limit on a condition's message (metav1.Condition's
// maxLength): a longer one makes the whole status update fail.
const MaxConditionMessage = 32768

// CutMessage is msg within MaxConditionMessage bytes, cut at a rune boundary with "…" at the
// end. A member's own message may already be that long, and the controllers prefix it with
// the plane and reason; without the cut the VolumeBackup or VolumeRestore could never be
// marked failed.
func CutMessage(msg string) string {
	if len(msg) <= MaxConditionMessage {
		return msg
	}
	const ellipsis = "…"
	cut := MaxConditionMessage - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + ellipsis
}

// NotWatched says why a member of plane in namespace ns cannot be made where the manager watches
// only namespaces (its --dataplane-namespaces; nil: every one), or "" when it can.
func NotWatched(namespaces []string, plane, ns string) string {
	if len(namespaces) == 0 || slices.Contains(namespaces, ns) {
		return ""
	}
	return fmt.Sprintf("%s: namespace %q is not among the data-plane namespaces the manager watches (%s): add it to the manager's dataPlanes.namespaces and to the agent chart's watchNamespaces there",
		plane, ns, strings.Join(namespaces, ", "))
}
