package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/meta"
)

// manifest is one Kubernetes object to keep next to the backup, so a restore can recreate the
// cluster's objects (TidbCluster, Services, ...) as they were.
type manifest struct {
	namespace, kind, name string
	yaml                  []byte
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// readManifests parses --manifest files (multi-document YAML allowed); objects without a
// namespace are stored under "_cluster".
func readManifests(paths []string) ([]manifest, error) {
	var out []manifest
	for _, p := range paths {
		data, err := os.ReadFile(p) //nolint:gosec // G304: a --manifest path the step's caller chose
		if err != nil {
			return nil, fmt.Errorf("--manifest: %w", err)
		}
		for i, doc := range docSeparator.Split(string(data), -1) {
			if len(bytes.TrimSpace([]byte(doc))) == 0 {
				continue
			}
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				return nil, fmt.Errorf("--manifest %s document %d: %w", p, i+1, err)
			}
			if obj.Kind == "" || obj.Metadata.Name == "" {
				return nil, fmt.Errorf("--manifest %s document %d: a Kubernetes object needs kind and metadata.name", p, i+1)
			}
			ns := obj.Metadata.Namespace
			if ns == "" {
				ns = "_cluster"
			}
			out = append(out, manifest{namespace: ns, kind: obj.Kind, name: obj.Metadata.Name, yaml: []byte(doc)})
		}
	}
	return out, nil
}

// putManifests stores the manifests under manifests/<ns>/<Kind>/<name>.yaml in the backup and
// returns their keys, each once, for the backupmeta's fedbr.manifests. More than
// meta.MaxManifests is refused here, as every reader would refuse the record.
func putManifests(ctx context.Context, store *meta.Store, ms []manifest) ([]string, error) {
	var keys []string
	for _, m := range ms {
		if key := meta.ManifestKey(m.namespace, m.kind, m.name); !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	if len(keys) > meta.MaxManifests {
		return nil, fmt.Errorf("--manifest: %d objects, at most %d are recorded", len(keys), meta.MaxManifests)
	}
	for _, m := range ms {
		if _, err := store.PutManifest(ctx, m.namespace, m.kind, m.name, m.yaml); err != nil {
			return nil, err
		}
	}
	return keys, nil
}
