package charts

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/testenv"
)

// helmBinary is $FEDBR_HELM (make test and make unit set it; then it must exist), else the
// helm that `make helm` builds into .cache/bin at the version hack/tools/helm pins. Without
// either the test is skipped: the charts are rendered by the real helm CLI, which fedbr's own
// module does not build.
func helmBinary(t *testing.T) string {
	t.Helper()
	return toolBinary(t, "FEDBR_HELM", "helm", "helm.sh/helm/v3")
}

// promtoolBinary is $FEDBR_PROMTOOL, else the promtool `make promtool` builds, as helmBinary.
func promtoolBinary(t *testing.T) string {
	t.Helper()
	return toolBinary(t, "FEDBR_PROMTOOL", "promtool", "github.com/prometheus/prometheus")
}

// toolBinary is the tool hack/tools/<name> pins: $env if set (then it must exist), else
// .cache/bin/<name>-<the version of module its go.mod requires>; the test is skipped without it.
func toolBinary(t *testing.T, env, name, module string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v (run `make %s`)", env, p, err, name)
		}
		return p
	}
	root := testenv.RepoRoot()
	f, err := os.Open(filepath.Join(root, "hack", "tools", name, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	version := ""
	for s := bufio.NewScanner(f); s.Scan(); {
		if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == module {
			version = fields[1]
		}
	}
	if version == "" {
		t.Fatalf("hack/tools/%s/go.mod requires no %s", name, module)
	}
	p := filepath.Join(root, ".cache", "bin", name+"-"+version)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no %s %s at %s: run `make %s` (make test and make unit build it), or set %s", name, version, p, name, env)
	}
	return p
}

// chart is one chart of charts/ as the tests install it.
type chart struct {
	name, release, namespace string
}

// helm runs helm with args on c and values; it fails the test with helm's output on an error.
func (c chart) helm(t *testing.T, values map[string]any, args ...string) string {
	t.Helper()
	out, err := c.run(t, values, args...)
	if err != nil {
		t.Fatalf("helm %s %s: %v\n%s", strings.Join(args, " "), c.name, err, out)
	}
	return out
}

func (c chart) run(t *testing.T, values map[string]any, args ...string) (string, error) {
	t.Helper()
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	args = append(args, "--namespace", c.namespace, "--values", file)
	cmd := exec.CommandContext(t.Context(), helmBinary(t), args...)
	cmd.Dir = filepath.Join(testenv.RepoRoot(), "charts")
	// No user configuration or cache of helm's outside the test.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}

// template renders c with values, CRDs included, and parses every document.
func (c chart) template(t *testing.T, values map[string]any) objects {
	t.Helper()
	return parse(t, c.helm(t, values, "template", c.release, c.name, "--include-crds"))
}

// lint runs `helm lint --strict` on c with values.
func (c chart) lint(t *testing.T, values map[string]any) {
	t.Helper()
	c.helm(t, values, "lint", "--strict", c.name)
}

// objects are rendered manifests.
type objects []*unstructured.Unstructured

var separator = regexp.MustCompile(`(?m)^---\s*$`)

// parse splits a multi-document YAML stream and parses each document as a Kubernetes object,
// which must have an apiVersion, a kind and a name.
func parse(t *testing.T, stream string) objects {
	t.Helper()
	var objs objects
	for _, doc := range separator.Split(stream, -1) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("document does not parse: %v\n%s", err, doc)
		}
		if len(obj.Object) == 0 {
			continue // comments only
		}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" || obj.GetName() == "" {
			t.Fatalf("document is not a Kubernetes object (apiVersion, kind, metadata.name):\n%s", doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

// all are the objects of kind.
func (o objects) all(kind string) objects {
	var out objects
	for _, obj := range o {
		if obj.GetKind() == kind {
			out = append(out, obj)
		}
	}
	return out
}

// get is the object of kind and name, which must exist; into, when not nil, receives it typed.
func (o objects) get(t *testing.T, kind, name string, into any) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range o.all(kind) {
		if obj.GetName() == name {
			if into != nil {
				as(t, obj, into)
			}
			return obj
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// as converts obj into a typed object.
func as(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// readObjects parses every document of the files matching pattern, under the repository root.
func readObjects(t *testing.T, pattern string) objects {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("no files %s: %v", pattern, err)
	}
	var objs objects
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, parse(t, string(data))...)
	}
	return objs
}
