package kubelet

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedbr/fedbr/internal/lab/labdns"
)

// IRSA as EKS gives it (aws/amazon-eks-pod-identity-webhook): a pod whose service account
// carries eks.amazonaws.com/role-arn gets, in each container not named by the pod's
// eks.amazonaws.com/skip-containers, the variables AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE
// and the projected service-account token volume aws-iam-token (audience sts.amazonaws.com,
// 86400 s) mounted at /var/run/secrets/eks.amazonaws.com/serviceaccount. The webhook adds them at
// admission; the lab's node adds them as the pod starts, so they are not in the pod's spec.
const (
	// RoleARNAnnotation is the service account's IAM role (IRSA).
	RoleARNAnnotation = "eks.amazonaws.com/role-arn"
	// skipContainersAnnotation lists the containers (comma-separated) the webhook leaves alone.
	skipContainersAnnotation = "eks.amazonaws.com/skip-containers"
	webIdentityVolume        = "aws-iam-token"
	webIdentityMountPath     = "/var/run/secrets/eks.amazonaws.com/serviceaccount"
	webIdentityAudience      = "sts.amazonaws.com"
	webIdentityExpiration    = 86400
)

// WebIdentity makes the node stand in for EKS's pod identity webhook (above) and gives the pods
// it serves the lab's route to STS: the AWS double's STS at its real host name, through Proxy.
// Such pods get none of Options.Env's AWS credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN): their identity is the role's.
type WebIdentity struct {
	// Proxy is the HTTPS proxy (HTTPS_PROXY) through which the pods reach STS: the AWS double.
	Proxy string
	// CAFile is the CA of STS's certificate there (SSL_CERT_FILE).
	CAFile string
}

// webIdentityPod is what the webhook adds to one pod.
type webIdentityPod struct {
	role   string
	skip   []string
	volume corev1.Volume
}

// credentialEnv are the node's variables a pod with a role does not get.
var credentialEnv = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

// resolveWebIdentity reads the pod's service account and, when it names a role and the node
// serves IRSA, records what the webhook would add (r.irsa).
func (r *podRun) resolveWebIdentity(ctx context.Context) error {
	if r.p.o.WebIdentity == nil {
		return nil
	}
	name := r.spec.Spec.ServiceAccountName
	if name == "" {
		name = "default"
	}
	sa, err := r.p.o.Client.CoreV1().ServiceAccounts(r.spec.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("service account %s: %w", name, err)
	}
	role := sa.Annotations[RoleARNAnnotation]
	if role == "" {
		return nil
	}
	expiration := int64(webIdentityExpiration)
	var skip []string
	for c := range strings.SplitSeq(r.spec.Annotations[skipContainersAnnotation], ",") {
		if c = strings.TrimSpace(c); c != "" {
			skip = append(skip, c)
		}
	}
	r.irsa = &webIdentityPod{role: role, skip: skip, volume: corev1.Volume{Name: webIdentityVolume, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: webIdentityAudience, ExpirationSeconds: &expiration, Path: "token"}}}}}}}
	return nil
}

// podVolumes are the pod's volumes with the webhook's.
func (r *podRun) podVolumes() []corev1.Volume {
	if r.irsa == nil {
		return r.spec.Spec.Volumes
	}
	return append(slices.Clone(r.spec.Spec.Volumes), r.irsa.volume)
}

// withWebIdentity returns c's mounts and the base environment with what the webhook and the
// lab's route to STS add for a container of a pod with a role; root is the container's root.
func (r *podRun) withWebIdentity(c corev1.Container, base []corev1.EnvVar, root string) ([]corev1.VolumeMount, []corev1.EnvVar) {
	if r.irsa == nil || slices.Contains(r.irsa.skip, c.Name) {
		return c.VolumeMounts, base
	}
	mounts := append(slices.Clone(c.VolumeMounts), corev1.VolumeMount{Name: webIdentityVolume, MountPath: webIdentityMountPath, ReadOnly: true})
	env := slices.DeleteFunc(slices.Clone(base), func(e corev1.EnvVar) bool { return slices.Contains(credentialEnv, e.Name) })
	env = append(env,
		corev1.EnvVar{Name: "AWS_ROLE_ARN", Value: r.irsa.role},
		// The token's path as the process sees it (mounts without mount namespaces, doc.go).
		corev1.EnvVar{Name: "AWS_WEB_IDENTITY_TOKEN_FILE", Value: filepath.Join(root, webIdentityMountPath, "token")},
		corev1.EnvVar{Name: "HTTPS_PROXY", Value: r.p.o.WebIdentity.Proxy},
		// The proxy is for STS alone: the cluster's Services (PD by name) are dialed directly.
		corev1.EnvVar{Name: "NO_PROXY", Value: labdns.NoProxy},
		corev1.EnvVar{Name: "SSL_CERT_FILE", Value: r.p.o.WebIdentity.CAFile})
	return mounts, env
}
