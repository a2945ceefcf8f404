package job

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
)

// ClusterTLSDir is where a step's pod mounts the TidbCluster's cluster client secret, and
// ClusterTLSVolume the volume's name.
const (
	ClusterTLSDir    = "/var/lib/fedbr/cluster-client-tls"
	ClusterTLSVolume = "cluster-client-tls"
)

// ClusterClientSecret is the Secret tidb-operator's users create for a TidbCluster with
// tlsCluster enabled: the client certificate of its components' CA (ca.crt, tls.crt, tls.key).
func ClusterClientSecret(tc string) string { return tc + "-cluster-client-secret" }

// DialsCluster says whether step dials PD or TiKV, and so takes --ca, --cert and --key.
func DialsCluster(step string) bool {
	switch step {
	case StepPause, StepLift, StepSnapshot, StepRestoreVolumes, StepRestoreData, StepVerify:
		return true
	}
	return false
}

// WithClusterTLS makes the Job of a step that dials PD or TiKV reach a TidbCluster whose
// spec.tlsCluster.enabled is true (DialsCluster(s.Step)): it mounts the cluster client secret read-only at
// ClusterTLSDir and appends --ca, --cert and --key pointing into it to the step's Args. A
// cluster without TLS (or tc nil) leaves s as it is. The secret is mounted, never read by the
// agent: a missing one keeps the pod from starting, and the Job's events say which.
func WithClusterTLS(s Spec, tc *pcv1alpha1.TidbCluster) Spec {
	if tc == nil || tc.Spec.TLSCluster == nil || !tc.Spec.TLSCluster.Enabled || !DialsCluster(s.Step) {
		return s
	}
	s.Pod.Volumes = append(append([]corev1.Volume{}, s.Pod.Volumes...), corev1.Volume{
		Name: ClusterTLSVolume,
		// The files stay world-readable (the default mode): the step runs as NonRootID, which
		// owns nothing, and the volume is this pod's alone.
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: ClusterClientSecret(tc.Name)}},
	})
	s.Pod.VolumeMounts = append(append([]corev1.VolumeMount{}, s.Pod.VolumeMounts...),
		corev1.VolumeMount{Name: ClusterTLSVolume, MountPath: ClusterTLSDir, ReadOnly: true})
	s.Args = append(append([]string{}, s.Args...),
		"--ca", InPod(path.Join(ClusterTLSDir, "ca.crt")),
		"--cert", InPod(path.Join(ClusterTLSDir, corev1.TLSCertKey)),
		"--key", InPod(path.Join(ClusterTLSDir, corev1.TLSPrivateKeyKey)))
	return s
}
