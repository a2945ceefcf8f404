package meta

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPVVolumeID(t *testing.T) {
	pv := func(src corev1.PersistentVolumeSource) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: src}}
	}
	for _, tc := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want string
	}{
		{"EBS CSI", pv(corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"}}), "vol-1"},
		{"another CSI driver: its handle, which matches no EBS volume", pv(corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "x", VolumeHandle: "h"}}), "h"},
		{"in-tree with zone", pv(corev1.PersistentVolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-west-2a/vol-2"}}), "vol-2"},
		{"in-tree bare", pv(corev1.PersistentVolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-3"}}), "vol-3"},
		{"neither", pv(corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}), ""},
	} {
		if got := PVVolumeID(tc.pv); got != tc.want {
			t.Errorf("%s: PVVolumeID = %q, want %q", tc.name, got, tc.want)
		}
	}
}
