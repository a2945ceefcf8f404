// Package ownwrite tells a controller that its informer cache has not yet caught up with the
// controller's own last write to an object.
//
// A controller that writes an object's status is re-queued by events of other objects before
// the watch event of its own write reaches its cache. Planning from that older copy plans the
// same transition again: the same status written twice (Events and finished-object metrics
// counted twice) and actions already applied applied again. Comparing resourceVersions for
// equality only (they are opaque) is enough to tell that copy apart.
package ownwrite

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Retry bounds the wait for the cache; the write's own watch event re-queues the object sooner.
const Retry = time.Second

// Tracker remembers, per object, the resourceVersions that its writes since the cache last
// caught up left behind. The zero value is ready; it is safe for concurrent use.
type Tracker struct {
	mu      sync.Mutex
	objects map[types.UID]*writes
}

// writes are one object's: every version a write replaced or a later write superseded, and
// the version of the last one.
type writes struct {
	behind map[string]bool
	last   string
}

// Wrote records that a write changed o's resourceVersion from before to o's current one.
func (t *Tracker) Wrote(o client.Object, before string) {
	if before == o.GetResourceVersion() {
		return // nothing was written
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.objects == nil {
		t.objects = map[types.UID]*writes{}
	}
	w := t.objects[o.GetUID()]
	if w == nil {
		w = &writes{behind: map[string]bool{}}
		t.objects[o.GetUID()] = w
	}
	w.behind[before] = true
	if w.last != "" {
		w.behind[w.last] = true
	}
	w.last = o.GetResourceVersion()
}

// Stale says whether o, as read from the cache, predates the last recorded write. Once any
// other copy is seen (the last write's, or a newer one) the writes are forgotten.
func (t *Tracker) Stale(o client.Object) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.objects[o.GetUID()]
	if !ok {
		return false
	}
	if w.behind[o.GetResourceVersion()] {
		return true
	}
	delete(t.objects, o.GetUID())
	return false
}
