package session

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/fedbr/fedbr/internal/cloud"
)

// PDHTTPAddrs makes PD addresses given as host:port usable by PD's HTTP client, which needs a
// scheme.
func PDHTTPAddrs(addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		if !strings.Contains(a, "://") {
			a = "http://" + a
		}
		out[i] = a
	}
	return out
}

// ValidateTags checks user tags for the resources fedbr creates: fedbr.io/ keys carry fedbr's
// identity (the leak sweeper trusts them), and each tag must be one EC2 takes (cloud.CheckTag:
// lengths, AWS's aws: prefix in any case), so a bad tag fails here, before any AWS call.
func ValidateTags(tags map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if strings.HasPrefix(k, "fedbr.io/") {
			return fmt.Errorf("--tags %q: keys must not start with the reserved prefix fedbr.io/", k)
		}
		if err := cloud.CheckTag(k, tags[k]); err != nil {
			return fmt.Errorf("--tags: %w", err)
		}
	}
	return nil
}
