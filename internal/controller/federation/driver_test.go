package federation

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/events"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

type testAction struct{ kind, cluster string }

func (a testAction) Describe() (string, string) { return a.kind, a.cluster }

// TestApplyAllRunsPlanesAtOnce: one plane's actions keep their order, different planes do not
// wait for each other (dp1's first action can only finish once dp2's has started), and a
// failing plane neither stops the others nor goes unreported.
func TestApplyAllRunsPlanesAtOnce(t *testing.T) {
	dp2Started := make(chan struct{})
	var mu sync.Mutex
	var applied []testAction
	d := &Driver[*fedv1alpha1.VolumeBackup, testAction]{
		Recorder: events.NewFakeRecorder(10),
		Apply: func(_ context.Context, _ *fedv1alpha1.VolumeBackup, a testAction, _ time.Time) error {
			switch {
			case a.cluster == "dp2" && a.kind == "first":
				close(dp2Started)
			case a.cluster == "dp1" && a.kind == "first":
				select {
				case <-dp2Started:
				case <-time.After(5 * time.Second):
					return errors.New("dp2 did not start while dp1 was applying: the planes ran one after another")
				}
			case a.cluster == "dp3":
				return errors.New("dp3 is down")
			}
			mu.Lock()
			applied = append(applied, a)
			mu.Unlock()
			return nil
		},
	}
	actions := []testAction{{"first", "dp1"}, {"second", "dp1"}, {"first", "dp2"}, {"first", "dp3"}, {"second", "dp2"}}
	err := d.applyAll(context.Background(), &fedv1alpha1.VolumeBackup{}, actions, time.Now())
	if err == nil || err.Error() != "first in dp3: dp3 is down" {
		t.Errorf("err = %v, want dp3's failure", err)
	}
	for _, cluster := range []string{"dp1", "dp2"} {
		var kinds []string
		for _, a := range applied {
			if a.cluster == cluster {
				kinds = append(kinds, a.kind)
			}
		}
		if !slices.Equal(kinds, []string{"first", "second"}) {
			t.Errorf("%s applied %v, want first then second", cluster, kinds)
		}
	}
}
