// Package v1alpha1 holds the control-plane API of fedbr: VolumeBackup, VolumeRestore and
// VolumeBackupSchedule in group federation.pingcap.com.
//
// The kinds are field-compatible supersets of tidb-operator's BR Federation kinds: every upstream
// field keeps its name and meaning, so existing manifests apply unchanged. fedbr adds a status
// subresource, metav1.Condition conditions and admission validation (schema + CEL) so that bad
// input is refused when it is applied instead of failing deep inside an operation.
//
// +kubebuilder:object:generate=true
// +groupName=federation.pingcap.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the control-plane API.
	GroupVersion = schema.GroupVersion{Group: "federation.pingcap.com", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&VolumeBackup{}, &VolumeBackupList{},
		&VolumeRestore{}, &VolumeRestoreList{},
		&VolumeBackupSchedule{}, &VolumeBackupScheduleList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
