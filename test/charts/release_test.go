package charts

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/testenv"
)

// TestReleaseVersions holds what `make release` keeps together (hack/release.sh): both charts
// have one version, their appVersion is it with a v, CHANGELOG.md has an entry for it, and
// every install command in the docs says which image it installs, by that version; no page
// names another tag of fedbr's image.
func TestReleaseVersions(t *testing.T) {
	root := testenv.RepoRoot()
	var version string
	for _, c := range []string{"fedbr-manager", "fedbr-agent"} {
		var meta struct {
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		}
		data, err := os.ReadFile(filepath.Join(root, "charts", c, "Chart.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.AppVersion != "v"+meta.Version {
			t.Errorf("%s: appVersion %q, version %q: want appVersion v<version>", c, meta.AppVersion, meta.Version)
		}
		if version == "" {
			version = meta.AppVersion
		} else if meta.AppVersion != version {
			t.Errorf("%s: appVersion %s, fedbr-manager's %s: both charts are released together", c, meta.AppVersion, version)
		}
	}
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^## ` + regexp.QuoteMeta(version) + `( |$)`).Match(changelog) {
		t.Errorf("CHANGELOG.md has no entry ## %s", version)
	}
	image := "ghcr.io/fedbr/fedbr:" + version
	tagged := regexp.MustCompile(`ghcr\.io/fedbr/fedbr:v[0-9][0-9A-Za-z.+-]*`)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	installs := 0
	for _, page := range append(pages, filepath.Join(root, "README.md")) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range tagged.FindAllString(string(data), -1) {
			if tag != image {
				t.Errorf("%s names %s; the charts install %s", filepath.Base(page), tag, image)
			}
		}
		if !strings.Contains(string(data), "```sh") {
			continue
		}
		for _, block := range testenv.CodeBlocks(t, page, "sh") {
			if !regexp.MustCompile(`(?m)^\s*helm install `).MatchString(block) {
				continue
			}
			installs++
			if !strings.Contains(block, image) {
				t.Errorf("%s: an install command does not say it installs %s:\n%s", filepath.Base(page), image, block)
			}
		}
	}
	if installs < 3 {
		t.Fatalf("found %d helm install commands in the docs; want the install guide's and the quickstart's", installs)
	}
}

// TestReleaseRefusesWhatItCannotRelease: hack/release.sh stops before it changes or builds
// anything for a version that is not semver and for one CHANGELOG.md has no entry for.
func TestReleaseRefusesWhatItCannotRelease(t *testing.T) {
	root := testenv.RepoRoot()
	for _, tc := range []struct{ version, want string }{
		{"0.2.0", "want vMAJOR.MINOR.PATCH[-PRERELEASE]"},
		{"v1.2", "want vMAJOR.MINOR.PATCH[-PRERELEASE]"},
		{"v01.2.3", "want vMAJOR.MINOR.PATCH[-PRERELEASE]"},
		{"v1.2.3;rm", "want vMAJOR.MINOR.PATCH[-PRERELEASE]"},
		{"v99.0.0", `CHANGELOG.md has no entry "## v99.0.0"`},
	} {
		cmd := exec.Command("bash", filepath.Join(root, "hack", "release.sh"), tc.version)
		cmd.Env = append(os.Environ(), "HELM=/nonexistent/helm")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("release.sh %s: %v\n%s\nwant exit 2 saying %q", tc.version, err, out, tc.want)
		}
	}
}
