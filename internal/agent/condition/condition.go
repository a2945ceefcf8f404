// Package condition sets member conditions the way the manager reads them and lists what
// changed between two condition sets, so every transition becomes a Kubernetes Event.
package condition

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Set sets c in conds. at is the transition time to record if the status changes (the manager
// measures the GC pause window from the times the agent records, so they are the times things
// happened, not when the agent noticed); a zero at means now. A condition already in that
// status keeps its transition time; its reason and message are updated.
func Set(conds *[]metav1.Condition, c metav1.Condition, generation int64, at, now time.Time) {
	if at.IsZero() {
		at = now
	}
	c.ObservedGeneration = generation
	// SetStatusCondition keeps the stored time when the status is unchanged and takes this
	// one when it changes.
	c.LastTransitionTime = metav1.NewTime(at.UTC().Truncate(time.Second))
	apimeta.SetStatusCondition(conds, c)
}

// IsTrue says the condition of type t is True.
func IsTrue(conds []metav1.Condition, t string) bool {
	return apimeta.IsStatusConditionTrue(conds, t)
}

// Transition is one condition that is new or changed its status.
type Transition struct {
	Type    string
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// Transitions lists the conditions of after that are absent from before or whose status or
// reason differs, in after's order.
func Transitions(before, after []metav1.Condition) []Transition {
	var out []Transition
	for _, c := range after {
		old := apimeta.FindStatusCondition(before, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			continue
		}
		out = append(out, Transition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	return out
}
