// Package podenv finds what a process running in a Kubernetes pod is given by its pod: the
// API server's address, the service-account token, its CA and the pod's namespace.
//
// It exists because fedbr's lab runs pods as local processes without mount namespaces: every
// volume of a container is a symlink under $FEDBR_LAB_ROOT (see docs/lab.md, "Nodes"), so the
// service-account files are at $FEDBR_LAB_ROOT/var/run/secrets/kubernetes.io/serviceaccount/…
// instead of at their absolute path. client-go's rest.InClusterConfig hard-codes that path and
// cannot work there; RESTConfig builds the same configuration from Path-resolved files, so the
// code that runs in a real pod runs unchanged in the lab. Outside the lab ($FEDBR_LAB_ROOT
// unset) every function behaves like its client-go counterpart.
package podenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
)

// LabRootEnv names the variable the lab node sets to a container's root folder.
const LabRootEnv = "FEDBR_LAB_ROOT"

// NamespaceEnv names the variable a pod spec may set (downward API, metadata.namespace) to give
// the pod's namespace without reading the service-account files.
const NamespaceEnv = "POD_NAMESPACE"

// ServiceAccountDir is where Kubernetes mounts a pod's service-account token, ca.crt and
// namespace.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// ErrNotInPod is returned by RESTConfig when the process does not run in a Kubernetes pod.
var ErrNotInPod = errors.New("not running in a Kubernetes pod")

// Path returns where the in-container absolute path p is for this process: under
// $FEDBR_LAB_ROOT in the lab, p itself otherwise. Relative paths are returned unchanged, since
// they do not name a mount.
func Path(p string) string {
	root := os.Getenv(LabRootEnv)
	if root == "" || !filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

// RESTConfig is rest.InClusterConfig with the service-account files found through Path. The
// token is given as a BearerTokenFile, so client-go re-reads it when the kubelet rotates it;
// it is also read once here, so that a pod without a token fails now rather than on its first
// request.
func RESTConfig() (*rest.Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("%w: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set", ErrNotInPod)
	}
	tokenFile := Path(ServiceAccountDir + "/token")
	token, err := os.ReadFile(tokenFile) //nolint:gosec // G304: the fixed service-account path (under the lab's root in the lab)
	if err != nil {
		return nil, fmt.Errorf("read the service-account token: %w", err)
	}
	if len(strings.TrimSpace(string(token))) == 0 {
		return nil, fmt.Errorf("the service-account token %s is empty", tokenFile)
	}
	caFile := Path(ServiceAccountDir + "/ca.crt")
	if _, err := os.Stat(caFile); err != nil {
		return nil, fmt.Errorf("the API server's CA: %w", err)
	}
	return &rest.Config{
		Host:            "https://" + net.JoinHostPort(host, port),
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile},
		BearerToken:     strings.TrimSpace(string(token)),
		BearerTokenFile: tokenFile,
	}, nil
}

// Namespace returns the pod's namespace: $POD_NAMESPACE when set, else the service-account
// namespace file.
func Namespace() (string, error) {
	if ns := os.Getenv(NamespaceEnv); ns != "" {
		return ns, nil
	}
	file := Path(ServiceAccountDir + "/namespace")
	b, err := os.ReadFile(file) //nolint:gosec // G304: the fixed service-account path (under the lab's root in the lab)
	if err != nil {
		return "", fmt.Errorf("the pod's namespace ($%s unset): %w", NamespaceEnv, err)
	}
	ns := strings.TrimSpace(string(b))
	if ns == "" {
		return "", fmt.Errorf("the pod's namespace: %s is empty", file)
	}
	return ns, nil
}
