// Package version tells which fedbr build is running. The agent stamps Jobs with it so that a
// data plane never runs BR steps from a different build than its own.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time by the Makefile (-ldflags -X); the defaults describe a plain `go build`.
var (
	version = "v0.0.0-dev"
	commit  = ""
)

// Info describes the running build.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the running build's Info. Without a link-time commit it falls back to the VCS
// revision the Go toolchain embedded, if any.
func Get() Info {
	c := commit
	if c == "" {
		c = "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					c = s.Value
				}
			}
		}
	}
	return Info{
		Version:   version,
		Commit:    c,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String is the one-line form printed by `fedbr version`.
func (i Info) String() string {
	return fmt.Sprintf("fedbr %s (commit %s, %s, %s)", i.Version, i.Commit, i.GoVersion, i.Platform)
}
