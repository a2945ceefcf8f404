package checkout

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHolding(t *testing.T) {
	tmp := t.TempDir()
	write := func(dir, gomod string) string {
		d := filepath.Join(tmp, dir)
		if err := os.MkdirAll(filepath.Join(d, "test", "lab"), 0o755); err != nil {
			t.Fatal(err)
		}
		if gomod != "" {
			if err := os.WriteFile(filepath.Join(d, "go.mod"), []byte(gomod), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	fedbr := write("fedbr", "module "+ModulePath+"\n\ngo 1.26\n")
	image := write("fedbr/hack/image", "module "+ModulePath+"/hack/image\n")
	other := write("other", "module example.com/other\n")
	none := write("none", "")
	for _, tc := range []struct{ name, dir, want string }{
		{"a package folder finds the checkout above it", filepath.Join(fedbr, "test", "lab"), fedbr},
		{"the checkout itself", fedbr, fedbr},
		{"a nested module of fedbr's is passed over", filepath.Join(image, "test", "lab"), fedbr},
		{"another module is no checkout: the folder itself", filepath.Join(other, "test", "lab"), filepath.Join(other, "test", "lab")},
		{"no go.mod anywhere: the folder itself", filepath.Join(none, "test"), filepath.Join(none, "test")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holding(tc.dir); got != tc.want {
				t.Errorf("holding(%s) = %s, want %s", tc.dir, got, tc.want)
			}
		})
	}
}

// TestRoot: this test binary, built with or without -trimpath, finds the checkout it runs in.
func TestRoot(t *testing.T) {
	if _, err := os.Stat(filepath.Join(Root(), "internal", "lab", "checkout", "checkout.go")); err != nil {
		t.Fatalf("Root() = %s, which is not this checkout: %v", Root(), err)
	}
}
