package apply

import (
	"context"
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// TestCreateJobAdoptsNothing: a create that finds a Job of the step's name is success only when
// the member controls that Job (the cache had not seen the agent's own create yet); a Job of
// that name without the member as its controller is ErrForeignJob, naming it.
func TestCreateJobAdoptsNothing(t *testing.T) {
	member := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Namespace: "tidb", Name: "fed-b1", UID: "u1"}}
	ours := []metav1.OwnerReference{{APIVersion: "dataplane.fedbr.io/v1alpha1", Kind: "VolumeBackupMember", Name: "fed-b1", UID: "u1", Controller: ptr.To(true)}}
	for _, tc := range []struct {
		name    string
		owners  []metav1.OwnerReference
		wantErr error
	}{
		{"the member's own Job", ours, nil},
		{"a Job without an owner", nil, ErrForeignJob},
		{"another member's Job", []metav1.OwnerReference{{APIVersion: "dataplane.fedbr.io/v1alpha1", Kind: "VolumeBackupMember", Name: "fed-b1", UID: "u2", Controller: ptr.To(true)}}, ErrForeignJob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			have := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "tidb", Name: "fed-b1-pause", OwnerReferences: tc.owners}}
			a := &Applier{Client: fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(have).Build()}
			want := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "tidb", Name: "fed-b1-pause", OwnerReferences: ours}}
			err := a.CreateJob(context.Background(), member, want)
			if !errors.Is(err, tc.wantErr) || (err != nil && !strings.Contains(err.Error(), "tidb/fed-b1-pause")) {
				t.Errorf("CreateJob = %v, want %v naming the Job", err, tc.wantErr)
			}
		})
	}
}
