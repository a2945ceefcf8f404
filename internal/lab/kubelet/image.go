package kubelet

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// ImageRule maps container images to a local executable, the image's entrypoint.
type ImageRule struct {
	// Pattern matches an image reference; '*' matches any run of characters (including '/'
	// and ':'). A pattern without a tag or digest also matches every tag and digest of the
	// repository: "fedbr" matches "fedbr", "fedbr:v1" and "fedbr@sha256:…".
	Pattern string
	// Entrypoint is the absolute path of the executable that stands for the image.
	Entrypoint string
}

// ParseImageRule parses "PATTERN=PATH", the --image flag's format.
func ParseImageRule(s string) (ImageRule, error) {
	pattern, path, ok := strings.Cut(s, "=")
	if !ok || pattern == "" || path == "" {
		return ImageRule{}, fmt.Errorf("image mapping %q: want PATTERN=PATH", s)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return ImageRule{}, fmt.Errorf("image mapping %q: %w", s, err)
	}
	return ImageRule{Pattern: pattern, Entrypoint: abs}, nil
}

// String is the rule in --image format.
func (r ImageRule) String() string { return r.Pattern + "=" + r.Entrypoint }

func (r ImageRule) matches(image string) bool {
	re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(r.Pattern), `\*`, ".*") + "$")
	return re.MatchString(image) || re.MatchString(repository(image))
}

// repository strips the tag and digest from an image reference.
func repository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	return image
}

// ErrImageNotMapped means no image rule matches a container's image; the pod fails with
// reason ErrImagePull, because no retry can make the image appear.
var ErrImageNotMapped = errors.New("image has no lab mapping")

// Images is an ordered list of image rules; the first match wins.
type Images []ImageRule

// Entrypoint returns the executable standing for image.
func (im Images) Entrypoint(image string) (string, error) {
	for _, r := range im {
		if r.matches(image) {
			return r.Entrypoint, nil
		}
	}
	return "", fmt.Errorf("image %q: %w (map it with --image PATTERN=PATH)", image, ErrImageNotMapped)
}

// argv resolves a container's command line as a runtime would: without a command the
// image's entrypoint runs with the container's args; with a command, its first word names
// the entrypoint when its base name is the entrypoint's, and a host executable otherwise
// (an absolute path, or a name looked up in the node's PATH).
func argv(entrypoint string, command, args []string) ([]string, error) {
	if len(command) == 0 {
		return append([]string{entrypoint}, args...), nil
	}
	first := command[0]
	switch {
	case filepath.Base(first) == filepath.Base(entrypoint):
		first = entrypoint
	default:
		p, err := exec.LookPath(first)
		if err != nil {
			return nil, fmt.Errorf("command %q: not the image's entrypoint %s and not a host executable: %w", first, filepath.Base(entrypoint), err)
		}
		first = p
	}
	out := append([]string{first}, command[1:]...)
	return append(out, args...), nil
}
