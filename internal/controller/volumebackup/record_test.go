package volumebackup

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// TestRecordFirst: the decisions others act on are stored before any action runs: the
// initializer chosen with its first member, the pause asked for, and the completion (ahead
// of the members' teardown); nothing else waits, a failure's teardown least (it lifts the pause).
func TestRecordFirst(t *testing.T) {
	chosen := fedv1alpha1.VolumeBackupStatus{Initializer: "az1"}
	with := func(t string) fedv1alpha1.VolumeBackupStatus {
		return fedv1alpha1.VolumeBackupStatus{Initializer: "az1", Conditions: []metav1.Condition{{Type: t, Status: metav1.ConditionTrue}}}
	}
	complete, failed := with(fedv1alpha1.VolumeBackupCompleteCondition), with(fedv1alpha1.VolumeBackupFailedCondition)
	teardown := []Action{{Kind: SetPhase, Cluster: "az1"}, {Kind: SetPhase, Cluster: "az2"}}
	for _, tc := range []struct {
		name   string
		before fedv1alpha1.VolumeBackupStatus
		res    Result
		want   bool
	}{
		{"initializer chosen with its member", fedv1alpha1.VolumeBackupStatus{},
			Result{Status: chosen, Actions: []Action{{Kind: CreateMember, Cluster: "az1"}}}, true},
		{"initializer chosen while waiting (nothing to act on)", fedv1alpha1.VolumeBackupStatus{}, Result{Status: chosen}, false},
		{"initializer already stored", chosen, Result{Status: chosen, Actions: []Action{{Kind: CreateMember, Cluster: "az2"}}}, false},
		{"pause asked for", chosen, Result{Status: chosen, Actions: []Action{{Kind: StartPause, Cluster: "az1"}}}, true},
		{"backup ts sent", chosen, Result{Status: chosen, Actions: []Action{{Kind: SetPhase, Cluster: "az2"}}}, false},
		{"completion with its teardown", chosen, Result{Status: complete, Actions: teardown}, true},
		{"completion stored, teardown repeated", complete, Result{Status: complete, Actions: teardown}, false},
		{"failure with its teardown", chosen, Result{Status: failed, Actions: teardown}, false},
	} {
		if got := RecordFirst(tc.before, tc.res); got != tc.want {
			t.Errorf("%s: RecordFirst = %v, want %v", tc.name, got, tc.want)
		}
	}
}
