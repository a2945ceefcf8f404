package volumebackup

import (
	"testing"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// TestRecordFirst: the decisions others act on are stored before any action runs: the
// initializer chosen with its first member, and the pause asked for; nothing else waits.
func TestRecordFirst(t *testing.T) {
	chosen := fedv1alpha1.VolumeBackupStatus{Initializer: "az1"}
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
	} {
		if got := RecordFirst(tc.before, tc.res); got != tc.want {
			t.Errorf("%s: RecordFirst = %v, want %v", tc.name, got, tc.want)
		}
	}
}
