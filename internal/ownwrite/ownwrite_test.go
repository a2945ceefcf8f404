package ownwrite

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func obj(uid types.UID, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: uid, ResourceVersion: rv}}
}

func TestTracker(t *testing.T) {
	var tr Tracker
	if tr.Stale(obj("a", "1")) {
		t.Fatal("an object never written is not stale")
	}
	tr.Wrote(obj("a", "2"), "1")
	tr.Wrote(obj("b", "7"), "7") // a write that changed nothing
	for _, tc := range []struct {
		name string
		o    *corev1.ConfigMap
		want bool
	}{
		{"the copy the write replaced", obj("a", "1"), true},
		{"still that copy", obj("a", "1"), true},
		{"another object", obj("b", "7"), false},
		{"the cache caught up", obj("a", "2"), false},
		{"the write is forgotten once caught up", obj("a", "1"), false},
	} {
		if got := tr.Stale(tc.o); got != tc.want {
			t.Errorf("%s: Stale = %v, want %v", tc.name, got, tc.want)
		}
	}
	tr.Wrote(obj("a", "5"), "4")
	if !tr.Stale(obj("a", "4")) || tr.Stale(obj("a", "9")) {
		t.Error("a later write is tracked the same way, and a newer copy (another writer's) is not stale")
	}
	// Two writes before the cache catches up (a finalizer, then the status): the copies before
	// either, and the first write's own, are all stale.
	tr.Wrote(obj("c", "11"), "10")
	tr.Wrote(obj("c", "13"), "12")
	for _, rv := range []string{"10", "11", "12"} {
		if !tr.Stale(obj("c", rv)) {
			t.Errorf("version %s predates the last write but is not stale", rv)
		}
	}
	if tr.Stale(obj("c", "13")) {
		t.Error("the last write's own version is not stale")
	}
}
