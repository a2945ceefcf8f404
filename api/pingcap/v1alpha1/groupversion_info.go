// Package v1alpha1 is the slice of tidb-operator's TidbCluster (pingcap.com/v1alpha1) that fedbr
// reads and writes, for tests and the lab.
//
// Only the fields fedbr uses have a schema; every other field is preserved, so the CRD accepts
// real TidbCluster manifests. fedbr never installs this CRD into a cluster that runs
// tidb-operator, which owns the real one, and it changes TidbClusters only with patches on the
// fields below, so fields this package does not know survive.
//
// +kubebuilder:object:generate=true
// +groupName=pingcap.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is tidb-operator's group and version.
	GroupVersion = schema.GroupVersion{Group: "pingcap.com", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&TidbCluster{}, &TidbClusterList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
