package v1alpha1_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestCRDAsTidbOperators holds the lab's TidbCluster CRD (generated from these types into
// test/fixtures/crd) to tidb-operator v1.6's (manifests/crd/v1/pingcap.com_tidbclusters.yaml at
// v1.6.6) in every fact fedbr or the lab touches: no subresources, so the status is written
// through the resource itself (a Status().Update gets NotFound, as against the real CRD), and
// the keys the real schema requires in the objects the lab operator writes and the agent reads.
// Every leaf of the stand-in's schema has the real schema's type (compared once against v1.6.6;
// docs/testing.md).
func TestCRDAsTidbOperators(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "test", "fixtures", "crd", "pingcap.com_tidbclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != "v1alpha1" {
		t.Fatalf("versions %+v, want v1alpha1 alone", crd.Spec.Versions)
	}
	v := crd.Spec.Versions[0]
	if v.Subresources != nil && (v.Subresources.Status != nil || v.Subresources.Scale != nil) {
		t.Errorf("subresources %+v: tidb-operator's TidbCluster has none", v.Subresources)
	}
	root := *v.Schema.OpenAPIV3Schema
	for _, f := range []struct {
		path     string
		required []string
	}{
		{"", []string{"spec"}},
		{".spec.tikv.storageVolumes[]", []string{"name", "storageSize"}},
		{".spec.pd.storageVolumes[]", []string{"name", "storageSize"}},
		{".status.pd.members{}", []string{"clientURL", "health", "id", "name"}},
		{".status.tikv.stores{}", []string{"id", "ip", "leaderCount", "podName", "state"}},
	} {
		s, ok := at(root, f.path)
		if !ok {
			t.Errorf("%s: not in the schema", f.path)
			continue
		}
		got := slices.Sorted(slices.Values(s.Required))
		if !slices.Equal(got, f.required) {
			t.Errorf("%s: required %v, want %v (tidb-operator v1.6)", f.path, got, f.required)
		}
	}
}

// at walks path (.property, [] for array items, {} for map values) from s.
func at(s apiextensionsv1.JSONSchemaProps, path string) (apiextensionsv1.JSONSchemaProps, bool) {
	for path != "" {
		switch {
		case strings.HasPrefix(path, "[]"):
			if s.Items == nil || s.Items.Schema == nil {
				return s, false
			}
			s, path = *s.Items.Schema, path[2:]
		case strings.HasPrefix(path, "{}"):
			if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
				return s, false
			}
			s, path = *s.AdditionalProperties.Schema, path[2:]
		default:
			name := strings.TrimPrefix(path, ".")
			if i := strings.IndexAny(name, ".[{"); i >= 0 {
				name, path = name[:i], name[i:]
			} else {
				path = ""
			}
			p, ok := s.Properties[name]
			if !ok {
				return s, false
			}
			s = p
		}
	}
	return s, true
}
