package demo

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// Writers of a backup member, as memberWrites tells them apart by what a write changed: each
// fact of the member has one writer (docs/federation.md), so what changed names who wrote.
const (
	writerManager  = "manager"  // the spec: the go signals and phases
	writerAgent    = "agent"    // the status outside status.steps
	writerMetadata = "metadata" // finalizers, labels, annotations, deletion
	// a step's writes are named after the step (its entry in status.steps)
)

// memberWrite is one write of a backup member the demo saw through its watch.
type memberWrite struct {
	plane, name string
	at          time.Time // when the demo saw it
	writers     []string
	member      *dpv1alpha1.VolumeBackupMember // as it was after the write
}

// memberWrites records every write of the backup members in the source namespace of every data
// plane, seen through one watch per plane from before the backup is created: the instrument
// for how many writers meet on a member inside the GC pause window (Report.WindowWrites). A
// write between two that the watch lost (it reconnects after an error) counts as one with the
// next.
type memberWrites struct {
	mu     sync.Mutex
	last   map[string]*dpv1alpha1.VolumeBackupMember // by plane/name
	writes []memberWrite
}

// watchBackupMembers starts the watches that record the backup members' writes in d.writes.
func (d *Harness) watchBackupMembers(ctx context.Context) {
	d.writes = &memberWrites{last: map[string]*dpv1alpha1.VolumeBackupMember{}}
	for _, dp := range d.lab.DataPlanes {
		w, ok := d.kube[dp.Cluster].(client.WithWatch)
		if !ok {
			continue
		}
		go watchAlways(ctx, w, &dpv1alpha1.VolumeBackupMemberList{}, func(o client.Object) {
			if m, ok := o.(*dpv1alpha1.VolumeBackupMember); ok {
				d.writes.saw(dp.Cluster, m, time.Now())
			}
		}, client.InNamespace(d.o.Namespace))
	}
}

// saw records m as seen at at, unless it is the version last seen.
func (w *memberWrites) saw(plane string, m *dpv1alpha1.VolumeBackupMember, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := plane + "/" + m.Name
	prev := w.last[key]
	if prev != nil && prev.ResourceVersion == m.ResourceVersion {
		return
	}
	w.last[key] = m.DeepCopy()
	w.writes = append(w.writes, memberWrite{plane: plane, name: m.Name, at: at, writers: writersOf(prev, m), member: w.last[key]})
}

// same compares two parts of a member as the API server means them (empty and absent alike).
func same(a, b any) bool { return equality.Semantic.DeepEqual(a, b) }

// writersOf names who changed prev into m (nil prev: the manager created it).
func writersOf(prev, m *dpv1alpha1.VolumeBackupMember) []string {
	if prev == nil {
		return []string{writerManager}
	}
	var ws []string
	if !same(prev.Spec, m.Spec) {
		ws = append(ws, writerManager)
	}
	steps := map[string]bool{}
	for _, s := range append(slices.Clone(prev.Status.Steps), m.Status.Steps...) {
		steps[s.Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(steps)) {
		a, _ := dpv1alpha1.Step(prev.Status.Steps, name)
		b, _ := dpv1alpha1.Step(m.Status.Steps, name)
		if !same(a, b) {
			ws = append(ws, name)
		}
	}
	a, b := prev.Status.DeepCopy(), m.Status.DeepCopy()
	a.Steps, b.Steps = nil, nil
	if !same(a, b) {
		ws = append(ws, writerAgent)
	}
	if !same(prev.Finalizers, m.Finalizers) || !same(prev.Labels, m.Labels) || !same(prev.Annotations, m.Annotations) ||
		!same(prev.DeletionTimestamp, m.DeletionTimestamp) {
		ws = append(ws, writerMetadata)
	}
	return ws
}

// within counts the writes of member name seen in [from, to], by plane and by writer.
func (w *memberWrites) within(name string, from, to time.Time) WindowWrites {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := WindowWrites{}
	for _, x := range w.writes {
		if x.name != name || x.at.Before(from) || x.at.After(to) {
			continue
		}
		if out[x.plane] == nil {
			out[x.plane] = map[string]int{}
		}
		for _, who := range x.writers {
			out[x.plane][who]++
		}
		out[x.plane][""]++ // the plane's total of writes (one write may change two writers' parts)
	}
	return out
}

// firstSeen is when the demo first saw member name hold fact, by plane (a plane where it never
// held is absent).
func (w *memberWrites) firstSeen(name string, fact func(*dpv1alpha1.VolumeBackupMember) bool) map[string]time.Time {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]time.Time{}
	for _, x := range w.writes {
		if _, done := out[x.plane]; !done && x.name == name && fact(x.member) {
			out[x.plane] = x.at
		}
	}
	return out
}

// log lists the writes of member name in plane seen in [from, to]: each one's time after from
// and its writers.
func (w *memberWrites) log(plane, name string, from, to time.Time) []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, x := range w.writes {
		if x.plane == plane && x.name == name && !x.at.Before(from) && !x.at.After(to) {
			out = append(out, fmt.Sprintf("+%dms %s", x.at.Sub(from).Milliseconds(), strings.Join(x.writers, "+")))
		}
	}
	return out
}

// WindowWrites are the writes of the backup's members seen inside the GC pause window, by data
// plane, each by writer ("manager", "agent", "metadata" or a step's name) and in total ("").
type WindowWrites map[string]map[string]int

// Total is the writes of plane ("" for every plane).
func (w WindowWrites) Total(plane string) int {
	n := 0
	for p, by := range w {
		if plane == "" || p == plane {
			n += by[""]
		}
	}
	return n
}

func (w WindowWrites) String() string {
	var planes []string
	for _, p := range slices.Sorted(maps.Keys(w)) {
		var parts []string
		for _, who := range slices.Sorted(maps.Keys(w[p])) {
			if who != "" {
				parts = append(parts, fmt.Sprintf("%s %d", who, w[p][who]))
			}
		}
		planes = append(planes, fmt.Sprintf("%s %d (%s)", p, w[p][""], strings.Join(parts, ", ")))
	}
	return strings.Join(planes, "; ")
}
