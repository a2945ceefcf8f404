package report

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// named is the one object a wait follows: how to list and watch it (both already restricted to
// its name by the options given), and what it says.
type named struct {
	name  string
	list  func(ctx context.Context, o metav1.ListOptions) (items []runtime.Object, resourceVersion string, err error)
	watch func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
	// value reads the awaited value off the object, if it has it.
	value func(runtime.Object) (string, bool)
	// listFailed says what to do with a failed list: a non-nil error ends the wait with it,
	// nil retries after a second.
	listFailed func(error) error
}

// errGone is a wait's end when its object does not exist (listed without it, or deleted).
var errGone = errors.New("not found")

// wait lists the object, then watches it from the listed version, until value gives a value,
// the object is gone (errGone) or ctx ends: the awaited write is seen within one watch event,
// and a watch that ends (expired version, API server restart) is picked up by listing again.
func (n named) wait(ctx context.Context) (string, error) {
	sel := fields.OneTermEqualSelector("metadata.name", n.name).String()
	for {
		items, rv, err := n.list(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			if stop := n.listFailed(err); stop != nil {
				return "", stop
			}
			if !sleepCtx(ctx, time.Second) {
				return "", ctx.Err()
			}
			continue
		}
		if len(items) == 0 {
			return "", errGone
		}
		for _, o := range items {
			if v, ok := n.value(o); ok {
				return v, nil
			}
		}
		w, err := n.watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: rv})
		if err != nil {
			continue // listed again above
		}
		v, found, err := n.events(ctx, w)
		w.Stop()
		if err != nil {
			return "", err
		}
		if found {
			return v, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
	}
}

// events reads w until an event gives the value, the object is deleted (errGone) or the
// watch ends.
func (n named) events(ctx context.Context, w watch.Interface) (string, bool, error) {
	for {
		select {
		case <-ctx.Done():
			return "", false, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "", false, nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if v, has := n.value(ev.Object); has {
					return v, true, nil
				}
			case watch.Deleted:
				return "", false, errGone
			}
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
