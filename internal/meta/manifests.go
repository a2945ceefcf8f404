package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/cloud/blob"
)

// MaxManifests bounds how many manifests a backup's prefix may hold for a reader: a TiDB
// cluster's tidb-operator objects are a handful.
const MaxManifests = 256

// OperatorKinds are the tidb-operator kinds whose objects of a TiDB cluster a backup saves
// (ManifestKey), in the order they are printed: the TidbCluster, then the objects that
// reference it.
var OperatorKinds = []string{"TidbCluster", "TidbMonitor", "TidbDashboard", "TidbInitializer", "TidbNGMonitoring"}

// Manifest is one Kubernetes object saved next to a backup.
type Manifest struct {
	Key                   string
	Namespace, Kind, Name string
	APIVersion            string
	YAML                  []byte
}

// Manifests reads every manifest saved under ManifestsPrefix, sorted by OperatorKinds order
// (other kinds after them, by name), then namespace and name. Every one is untrusted: more than
// MaxManifests, one larger than MaxManifestBytes, a key not shaped
// manifests/<namespace>/<Kind>/<name>.yaml, or a body that is not one Kubernetes object with
// that kind, name and namespace (cluster-scoped objects: "_cluster") is ErrInvalid.
func (s *Store) Manifests(ctx context.Context) ([]Manifest, error) {
	keys, err := s.blob.List(ctx, ManifestsPrefix)
	if err != nil {
		return nil, fmt.Errorf("list manifests: %w", err)
	}
	if len(keys) > MaxManifests {
		return nil, fmt.Errorf("%d manifests, at most %d are read: %w", len(keys), MaxManifests, ErrInvalid)
	}
	out := make([]Manifest, 0, len(keys))
	for _, key := range keys {
		m, err := s.manifest(ctx, key)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Manifest) int {
		if c := kindRank(a.Kind) - kindRank(b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out, nil
}

func kindRank(kind string) int {
	if i := slices.Index(OperatorKinds, kind); i >= 0 {
		return i
	}
	return len(OperatorKinds)
}

func (s *Store) manifest(ctx context.Context, key string) (Manifest, error) {
	parts := strings.Split(strings.TrimPrefix(key, ManifestsPrefix), "/")
	name, ok := "", len(parts) == 3
	if ok {
		name, ok = strings.CutSuffix(parts[2], ".yaml")
	}
	if !ok || !strings.HasPrefix(key, ManifestsPrefix) || slices.ContainsFunc(append(parts[:2:2], name), func(p string) bool { return p == "" || p == "." || p == ".." }) {
		return Manifest{}, fmt.Errorf("manifest key %q: want %s<namespace>/<Kind>/<name>.yaml: %w", key, ManifestsPrefix, ErrInvalid)
	}
	m := Manifest{Key: key, Namespace: parts[0], Kind: parts[1], Name: name}
	b, err := s.blob.Get(ctx, key, MaxManifestBytes)
	switch {
	case errors.Is(err, blob.ErrTooLarge):
		return Manifest{}, fmt.Errorf("manifest %s: larger than %d bytes: %w: %w", key, MaxManifestBytes, ErrInvalid, err)
	case err != nil:
		return Manifest{}, fmt.Errorf("read manifest %s: %w", key, err)
	}
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return Manifest{}, fmt.Errorf("manifest %s: not one Kubernetes object: %w: %w", key, ErrInvalid, err)
	}
	ns := obj.Metadata.Namespace
	if ns == "" {
		ns = "_cluster"
	}
	if obj.APIVersion == "" || obj.Kind != m.Kind || obj.Metadata.Name != m.Name || ns != m.Namespace {
		return Manifest{}, fmt.Errorf("manifest %s holds %s %s %s/%s, not the object its key names: %w", key, obj.APIVersion, obj.Kind, ns, obj.Metadata.Name, ErrInvalid)
	}
	m.APIVersion, m.YAML = obj.APIVersion, b
	return m, nil
}
