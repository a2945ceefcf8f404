package job

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/policy"
)

// TestWithClusterTLS: against a TidbCluster with spec.tlsCluster.enabled, the Job of every step
// that dials PD or TiKV mounts <tc>-cluster-client-secret read-only and passes --ca, --cert and
// --key into it (relative to the pod's "/", as every path argument), and the agent's default
// policy builds it (a secret volume is not a hostPath); the Jobs of the other steps, and every
// Job of a cluster without TLS, are unchanged.
func TestWithClusterTLS(t *testing.T) {
	tls := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "tidb"},
		Spec: pcv1alpha1.TidbClusterSpec{TLSCluster: &pcv1alpha1.TLSCluster{Enabled: true}}}
	plain := tls.DeepCopy()
	plain.Spec.TLSCluster.Enabled = false
	strict := policy.Default("fedbr:v1", ServiceAccountName)
	base := func(step string) Spec {
		return Spec{Member: "fed-b1", Namespace: "tidb", Step: step, Image: "fedbr:v1", Args: []string{"br", step, "--pd", "basic-pd.tidb:2379"},
			Pod: PodTemplate{ServiceAccount: ServiceAccountName,
				Volumes:      []corev1.Volume{{Name: "extra", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "extra", MountPath: "/extra"}}}}
	}
	for _, step := range []string{StepPause, StepLift, StepSnapshot, StepRestoreVolumes, StepRestoreData} {
		j, vs := BuildGuarded(WithClusterTLS(base(step), tls), strict.CheckPod)
		if j == nil {
			t.Fatalf("%s: the policy refused the Job with the client secret: %v", step, vs)
		}
		ps := j.Spec.Template.Spec
		c := ps.Containers[0]
		i := slices.IndexFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == ClusterTLSVolume })
		if i < 0 || ps.Volumes[i].Secret == nil || ps.Volumes[i].Secret.SecretName != "basic-cluster-client-secret" ||
			!slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == "extra" }) {
			t.Errorf("%s: volumes %+v, want extra and the secret basic-cluster-client-secret", step, ps.Volumes)
		}
		m := slices.IndexFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool { return v.Name == ClusterTLSVolume })
		if m < 0 || !c.VolumeMounts[m].ReadOnly || c.VolumeMounts[m].MountPath != ClusterTLSDir ||
			!slices.ContainsFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool { return v.Name == "extra" }) {
			t.Errorf("%s: mounts %+v, want extra and the secret read-only at %s", step, c.VolumeMounts, ClusterTLSDir)
		}
		want := "br " + step + " --pd basic-pd.tidb:2379 --ca var/lib/fedbr/cluster-client-tls/ca.crt" +
			" --cert var/lib/fedbr/cluster-client-tls/tls.crt --key var/lib/fedbr/cluster-client-tls/tls.key"
		if got := strings.Join(c.Args, " "); got != want {
			t.Errorf("%s: args %q, want %q", step, got, want)
		}
		if b := base(step); len(b.Args) != 4 || len(b.Pod.Volumes) != 1 {
			t.Errorf("%s: WithClusterTLS changed its input", step)
		}
		for _, tc := range []*pcv1alpha1.TidbCluster{plain, nil, {}} {
			if got := WithClusterTLS(base(step), tc); len(got.Args) != 4 || len(got.Pod.Volumes) != 1 || len(got.Pod.VolumeMounts) != 1 {
				t.Errorf("%s without TLS: %+v", step, got)
			}
		}
	}
	for _, step := range []string{StepClean, StepSize, StepWarmup} {
		if got := WithClusterTLS(base(step), tls); len(got.Args) != 4 || len(got.Pod.Volumes) != 1 {
			t.Errorf("%s dials neither PD nor TiKV, yet got the secret: %+v", step, got)
		}
	}
}
