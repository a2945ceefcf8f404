package condition

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSet(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := now.Add(-time.Minute)
	var conds []metav1.Condition
	Set(&conds, metav1.Condition{Type: "Initialized", Status: metav1.ConditionTrue, Reason: "PauseReady"}, 2, at, now)
	if c := conds[0]; !c.LastTransitionTime.Time.Equal(at) || c.ObservedGeneration != 2 {
		t.Errorf("first set %+v", c)
	}
	// Same status later: the transition time stays, the reason moves.
	Set(&conds, metav1.Condition{Type: "Initialized", Status: metav1.ConditionTrue, Reason: "Other"}, 3, time.Time{}, now.Add(time.Hour))
	if c := conds[0]; !c.LastTransitionTime.Time.Equal(at) || c.Reason != "Other" || c.ObservedGeneration != 3 {
		t.Errorf("same status %+v", c)
	}
	// A status change without a time takes now.
	before := append([]metav1.Condition(nil), conds...)
	Set(&conds, metav1.Condition{Type: "Initialized", Status: metav1.ConditionFalse, Reason: "Lost"}, 3, time.Time{}, now.Add(time.Hour))
	if c := conds[0]; !c.LastTransitionTime.Time.Equal(now.Add(time.Hour)) {
		t.Errorf("changed %+v", c)
	}
	if tr := Transitions(before, conds); len(tr) != 1 || tr[0].Reason != "Lost" {
		t.Errorf("transitions %+v", tr)
	}
	if tr := Transitions(conds, conds); len(tr) != 0 {
		t.Errorf("no change, transitions %+v", tr)
	}
}
