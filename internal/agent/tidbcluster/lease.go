package tidbcluster

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The TiKV releases that serve Backup.PrepareSnapshotBackup, the admin-operation lease the
// pause holds (docs/compatibility.md): read at tikv/tikv's tags, the handler came with PR
// #15946 (first tagged v8.0.0) and its backports to release-6.5 (v6.5.8) and release-7.5
// (v7.5.1); 7.1's backport was never merged, and 7.6.0 was cut before it.

// semver is a release tag's version: v7.5.1, v7.5.1-20240101-abc (a hotfix build), 7.5.1.
var semver = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$`)

// ServesLease judges a TiKV release by its version or image tag (pingcap/tikv:v7.5.1):
// judged is false for what names no release (latest, nightly, a digest, an empty string), else
// ok says whether that release serves the lease.
func ServesLease(versionOrImage string) (ok, judged bool) {
	v := versionOrImage
	if i := strings.LastIndex(v, ":"); i >= 0 && !strings.Contains(v[i:], "/") {
		v = v[i+1:]
	}
	if strings.Contains(v, "@") {
		return false, false
	}
	m := semver.FindStringSubmatch(v)
	if m == nil {
		return false, false
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	patch, _ := strconv.Atoi(m[3])
	switch {
	case major >= 8:
		return true, true
	case major == 7 && minor == 5:
		return patch >= 1, true
	case major == 6 && minor == 5:
		return patch >= 8, true
	}
	return false, true
}

// LeaseFloor names the releases that serve the lease, for messages.
const LeaseFloor = "v6.5.8 and later 6.5, v7.5.1 and later 7.5, v8.0.0 and later"

// TiKVRelease is the TiKV release a TidbCluster runs, as an unstructured object says it: the
// image its TiKV status reports (what runs), else spec.tikv.image, else spec.tikv.version or
// spec.version (with tidb-operator's default image); "" when none is given.
func TiKVRelease(obj map[string]any) string {
	str := func(path ...string) string {
		cur := any(obj)
		for _, p := range path {
			m, ok := cur.(map[string]any)
			if !ok {
				return ""
			}
			cur = m[p]
		}
		s, _ := cur.(string)
		return s
	}
	for _, s := range []string{str("status", "tikv", "image"), str("spec", "tikv", "image"), str("spec", "tikv", "version"), str("spec", "version")} {
		if s != "" {
			return s
		}
	}
	return ""
}

// LeaseCheck is the preflight's word on a TiKV release: nil when it serves the lease or names
// no release (then the pause finds out), an error naming the floor when it does not.
func LeaseCheck(release string) error {
	ok, judged := ServesLease(release)
	if !judged || ok {
		return nil
	}
	return fmt.Errorf("TiKV %s does not serve PrepareSnapshotBackup, the lease every backup's pause holds (%s do): upgrade TiKV before a backup", release, LeaseFloor)
}
