package kubelet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// TestIRSA: a pod whose service account names a role gets what EKS's pod identity webhook adds
// (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE and a token for audience sts.amazonaws.com), the
// route to STS (HTTPS_PROXY, SSL_CERT_FILE) and not the node's credentials; its token is
// exchanged for the role's credentials at the AWS double's STS, through that route. A container
// eks.amazonaws.com/skip-containers names keeps the node's credentials and gets no role.
func TestIRSA(t *testing.T) {
	l := getLab(t)
	ctx := testCtx(t)
	ns := l.namespace(ctx, t)
	role := "arn:aws:iam::" + awsdouble.DefaultAccountID + ":role/irsa"
	if _, err := l.client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "irsa",
		Annotations: map[string]string{RoleARNAnnotation: role}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vars := []string{"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ACCESS_KEY_ID", "HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE"}
	probe := l.probe(append(append([]string{"report"}, vars...), "--", webIdentityMountPath+"/token")...)
	skipped := l.probe(append([]string{"report"}, vars...)...)
	skipped.Name = "skipped"
	for _, c := range []*corev1.Container{&probe, &skipped} {
		c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "irsa", Namespace: ns, Annotations: map[string]string{skipContainersAnnotation: "skipped"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: "irsa", Containers: []corev1.Container{probe, skipped},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	if _, err := l.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := l.waitPod(ctx, t, ns, "irsa", "succeeded", func(p *corev1.Pod) bool { return terminalPhase(p.Status.Phase) })
	out := l.logs(ctx, t, ns, "irsa")
	if got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod phase %s (%+v); log:\n%s", got.Status.Phase, got.Status.ContainerStatuses, out)
	}
	env := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	// The proxy is for STS only: the cluster's Service names are dialed directly (gRPC to PD by
	// name went to the proxy and was refused before NO_PROXY).
	if env["AWS_ROLE_ARN"] != role || env["AWS_ACCESS_KEY_ID"] != "" || env["HTTPS_PROXY"] != l.aws || env["NO_PROXY"] != ".svc,.local" ||
		!strings.HasSuffix(env["AWS_WEB_IDENTITY_TOKEN_FILE"], webIdentityMountPath+"/token") || env["SSL_CERT_FILE"] == "" {
		t.Fatalf("the role's container:\n%s", out)
	}
	token := env["file:"+webIdentityMountPath+"/token"]
	if strings.Count(token, ".") != 2 {
		t.Fatalf("no token at %s:\n%s", webIdentityMountPath, out)
	}
	b, err := l.client.CoreV1().Pods(ns).GetLogs("irsa", &corev1.PodLogOptions{Container: "skipped"}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "AWS_ROLE_ARN=\n") || !strings.Contains(s, "AWS_ACCESS_KEY_ID=node\n") {
		t.Fatalf("the skipped container:\n%s", s)
	}
	// The token, through the pod's route, is the role's.
	ca, err := os.ReadFile(env["SSL_CERT_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	proxy, _ := url.Parse(env["HTTPS_PROXY"])
	c := sts.New(sts.Options{Region: "us-west-2", Retryer: awssdk.NopRetryer{}, HTTPClient: &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(proxy), TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}})
	res, err := c.AssumeRoleWithWebIdentity(context.WithoutCancel(ctx), &sts.AssumeRoleWithWebIdentityInput{
		RoleArn: awssdk.String(role), RoleSessionName: awssdk.String("probe"), WebIdentityToken: awssdk.String(token)})
	if err != nil {
		t.Fatalf("the pod's token at STS: %v", err)
	}
	if !strings.HasSuffix(*res.AssumedRoleUser.Arn, ":assumed-role/irsa/probe") {
		t.Errorf("assumed %s", *res.AssumedRoleUser.Arn)
	}
}
