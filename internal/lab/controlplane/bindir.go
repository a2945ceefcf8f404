package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Pinned versions of the cached binaries; hack/k8s-bin.sh keys its folder with the same values.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.6.16"
)

// DefaultBinDir finds the folder with the Kubernetes binaries: $KUBEBUILDER_ASSETS, else the
// cache hack/k8s-bin.sh fills ($FEDBR_BIN_CACHE, else .cache/k8s-bin under repoRoot).
func DefaultBinDir(repoRoot string) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	cache := os.Getenv("FEDBR_BIN_CACHE")
	if cache == "" {
		cache = filepath.Join(repoRoot, ".cache", "k8s-bin")
	}
	dir := filepath.Join(cache, fmt.Sprintf("k8s-%s-etcd-%s-%s-%s", KubernetesVersion, EtcdVersion, runtime.GOOS, runtime.GOARCH))
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		return "", fmt.Errorf("no Kubernetes binaries at %s: run `make k8s-bin` (or set KUBEBUILDER_ASSETS or --bin-dir)", dir)
	}
	return dir, nil
}

// DefaultCRDDirs are the folders of CRD manifests a lab or test API server gets from the
// checkout at repoRoot: fedbr's own (config/crd/bases, what the charts install) and the
// TidbCluster stand-in for tidb-operator's CRD (test/fixtures/crd, never installed by fedbr).
func DefaultCRDDirs(repoRoot string) []string {
	return []string{filepath.Join(repoRoot, "config", "crd", "bases"), filepath.Join(repoRoot, "test", "fixtures", "crd")}
}
