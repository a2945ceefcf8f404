package describe

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"
)

// Watch is `describe --watch`: it reads the view again and again and draws it whenever it
// changed, until the operation reaches a final phase, is deleted, or ctx ends.
type Watch struct {
	// Gather reads the view (Source.Backup, …).
	Gather func(context.Context) (*View, error)
	// Draw shows a view read at now.
	Draw func(v *View, now time.Time) error
	// Note tells the user something between the views: a read that failed, the end.
	Note func(string)
	// Next waits until the next read is due; false when the watch is to end (ctx done).
	Next func(context.Context) bool
	// Now is the clock.
	Now func() time.Time
	// Observer keeps the progress observations (zero value: defaults).
	Observer Observer
}

// Run watches. The first read's error is returned (a name that does not exist); later read
// errors are noted once each and the watch goes on, except that the operation being gone ends
// it without error.
func (w *Watch) Run(ctx context.Context) error {
	var prev *View
	lastErr := ""
	for {
		v, err := w.Gather(ctx)
		now := w.Now()
		switch {
		case err != nil && prev == nil:
			return err
		case errors.Is(err, ErrNotFound):
			w.Note(fmt.Sprintf("%s %s/%s is gone (deleted).", prev.Kind, prev.Namespace, prev.Name))
			return nil
		case err != nil:
			if err.Error() != lastErr {
				w.Note(fmt.Sprintf("reading again failed (retrying): %v", err))
				lastErr = err.Error()
			}
		default:
			lastErr = ""
			w.Observer.Observe(v, now)
			if prev == nil || !sameView(prev, v) {
				if err := w.Draw(v, now); err != nil {
					return err
				}
			}
			prev = v
			if v.Final {
				w.Note(fmt.Sprintf("%s %s/%s reached %s.", v.Kind, v.Namespace, v.Name, v.Phase))
				return nil
			}
		}
		if !w.Next(ctx) {
			return nil
		}
	}
}

// sameView says two reads show the same objects: equal but for the progress observations,
// which grow with every read.
func sameView(a, b *View) bool {
	strip := func(v *View) View {
		c := *v
		c.Members = make([]Member, len(v.Members))
		for i, m := range v.Members {
			m.Observed = nil
			c.Members[i] = m
		}
		return c
	}
	return reflect.DeepEqual(strip(a), strip(b))
}
