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

// Manifests reads the manifests a backup saved, sorted by OperatorKinds order (other kinds
// after them, by name), then namespace and name. The keys are the backupmeta's
// fedbr.manifests list when it has one (a listed manifest that is missing is an error); a
// storage without a backupmeta, or whose backupmeta lists none (a backup that failed before
// recording its snapshots, or upstream's), is listed under ManifestsPrefix instead.
// Every one is untrusted: more than MaxManifests, one larger than MaxManifestBytes, a key not
// shaped manifests/<namespace>/<Kind>/<name>.yaml, or a body that is not one Kubernetes
// object with that kind, name and namespace (cluster-scoped objects: "_cluster") is ErrInvalid.
func (s *Store) Manifests(ctx context.Context) ([]Manifest, error) {
	keys, _, err := s.ManifestKeys(ctx)
	if err != nil {
		return nil, err
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

// ManifestKeys returns the keys of the manifests a backup saved and whether they come from
// the backupmeta's fedbr.manifests (recorded true) or from listing ManifestsPrefix (see
// Manifests). A backupmeta that cannot be read (other than missing) is an error, not a
// reason to list.
func (s *Store) ManifestKeys(ctx context.Context) (keys []string, recorded bool, err error) {
	r, err := s.BackupMetaAsIs(ctx)
	switch {
	case err == nil && r.Fedbr != nil && len(r.Fedbr.Manifests) > 0:
		return r.Fedbr.Manifests, true, nil // validated as the record was read (ValidateIDs)
	case err != nil && !errors.Is(err, ErrNotFound):
		return nil, false, fmt.Errorf("read the manifests' keys: %w", err)
	}
	keys, err = s.blob.List(ctx, ManifestsPrefix)
	if err != nil {
		return nil, false, fmt.Errorf("list manifests: %w", err)
	}
	if len(keys) > MaxManifests {
		return nil, false, fmt.Errorf("%d manifests, at most %d are read: %w", len(keys), MaxManifests, ErrInvalid)
	}
	return keys, false, nil
}

// validateManifestKeys checks a record's fedbr.manifests: at most MaxManifests keys, each
// shaped manifests/<namespace>/<Kind>/<name>.yaml and listed once.
func validateManifestKeys(keys []string) []error {
	if len(keys) > MaxManifests {
		return []error{fmt.Errorf("fedbr.manifests: %d keys, at most %d", len(keys), MaxManifests)}
	}
	var errs []error
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		if _, _, _, err := parseManifestKey(k); err != nil {
			errs = append(errs, fmt.Errorf("fedbr.manifests[%d]: %w", i, err))
			continue
		}
		if seen[k] {
			errs = append(errs, fmt.Errorf("fedbr.manifests[%d] %q: listed twice", i, k))
		}
		seen[k] = true
	}
	return errs
}

// parseManifestKey splits manifests/<namespace>/<Kind>/<name>.yaml; no part may be empty, "."
// or "..", and the key is at most 1 KiB (S3's own limit).
func parseManifestKey(key string) (namespace, kind, name string, err error) {
	parts := strings.Split(strings.TrimPrefix(key, ManifestsPrefix), "/")
	ok := len(parts) == 3 && len(key) <= 1024 && strings.HasPrefix(key, ManifestsPrefix)
	if ok {
		name, ok = strings.CutSuffix(parts[2], ".yaml")
	}
	if !ok || slices.ContainsFunc(append(parts[:2:2], name), func(p string) bool { return p == "" || p == "." || p == ".." }) {
		return "", "", "", fmt.Errorf("manifest key %q: want %s<namespace>/<Kind>/<name>.yaml", key, ManifestsPrefix)
	}
	return parts[0], parts[1], name, nil
}

func kindRank(kind string) int {
	if i := slices.Index(OperatorKinds, kind); i >= 0 {
		return i
	}
	return len(OperatorKinds)
}

func (s *Store) manifest(ctx context.Context, key string) (Manifest, error) {
	ns, kind, name, err := parseManifestKey(key)
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	m := Manifest{Key: key, Namespace: ns, Kind: kind, Name: name}
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
	objNS := obj.Metadata.Namespace
	if objNS == "" {
		objNS = "_cluster"
	}
	if obj.APIVersion == "" || obj.Kind != m.Kind || obj.Metadata.Name != m.Name || objNS != m.Namespace {
		return Manifest{}, fmt.Errorf("manifest %s holds %s %s %s/%s, not the object its key names: %w", key, obj.APIVersion, obj.Kind, objNS, obj.Metadata.Name, ErrInvalid)
	}
	m.APIVersion, m.YAML = obj.APIVersion, b
	return m, nil
}
