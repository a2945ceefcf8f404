package session

import (
	"fmt"
	"strings"
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
// identity (the leak sweeper trusts them) and aws: keys are AWS's own.
func ValidateTags(tags map[string]string) error {
	for k := range tags {
		if k == "" || strings.HasPrefix(k, "fedbr.io/") || strings.HasPrefix(k, "aws:") {
			return fmt.Errorf("--tags %q: keys must be non-empty and must not start with the reserved prefixes aws: or fedbr.io/", k)
		}
	}
	return nil
}
