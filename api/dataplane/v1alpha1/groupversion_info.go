// Package v1alpha1 holds the data-plane API of fedbr: VolumeBackupMember and
// VolumeRestoreMember in group dataplane.fedbr.io.
//
// The manager creates one member per data plane and drives it through the phase protocol by
// writing spec.phase; the agent in that data plane runs the steps and reports in status. The
// group is fedbr's own: pingcap.com belongs to tidb-operator, which already runs in every data
// plane and owns Backup and Restore.
//
// +kubebuilder:object:generate=true
// +groupName=dataplane.fedbr.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the data-plane API.
	GroupVersion = schema.GroupVersion{Group: "dataplane.fedbr.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&VolumeBackupMember{}, &VolumeBackupMemberList{},
		&VolumeRestoreMember{}, &VolumeRestoreMemberList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
