package env

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fedbr/fedbr/internal/cloud/aws/ekstoken"
)

// TestEKSAuthPlaneKubeconfig: the manager's context for the EKS-auth plane has the plane's API
// server and CA and no credentials but the exec user EKS's kubeconfigs have, which the
// manager's ekstoken takes as a token request for that plane in the lab's region.
func TestEKSAuthPlaneKubeconfig(t *testing.T) {
	dir := t.TempDir()
	admin := clientcmdapi.NewConfig()
	admin.Clusters["dp1"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443", CertificateAuthorityData: []byte("CA")}
	admin.AuthInfos["dp1-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("crt"), ClientKeyData: []byte("key")}
	admin.Contexts["dp1"] = &clientcmdapi.Context{Cluster: "dp1", AuthInfo: "dp1-admin"}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*admin, kubeconfig); err != nil {
		t.Fatal(err)
	}
	l := &Lab{Dir: dir, Kubeconfig: kubeconfig, AWS: AWS{Region: "eu-west-1"}, DataPlanes: []DataPlane{{Cluster: "dp1"}},
		EKSAuth: &EKSAuth{Cluster: "dp1", User: EKSAuthUser}}
	in := &installer{l: l, o: InstallOptions{Timeout: time.Second}, log: t.Logf}
	data, err := in.dataPlaneKubeconfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	c := out.Contexts["dp1"]
	if c == nil || out.Clusters[c.Cluster].Server != "https://127.0.0.1:6443" || string(out.Clusters[c.Cluster].CertificateAuthorityData) != "CA" {
		t.Fatalf("context dp1 %+v, clusters %+v; want the plane's server and CA", c, out.Clusters)
	}
	u := out.AuthInfos[c.AuthInfo]
	if u == nil || u.Exec == nil || u.Token != "" || len(u.ClientCertificateData) > 0 {
		t.Fatalf("user %+v; want only an exec user", u)
	}
	req, err := ekstoken.Parse(u.Exec.Command, u.Exec.Args)
	if err != nil {
		t.Fatalf("the manager refuses the exec user %s %q: %v", u.Exec.Command, u.Exec.Args, err)
	}
	if d := cmp.Diff(ekstoken.Request{Cluster: "dp1", Region: "eu-west-1"}, req); d != "" {
		t.Errorf("token request (-want +got):\n%s", d)
	}
}
