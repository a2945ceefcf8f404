package session

import (
	"fmt"

	"github.com/fedbr/fedbr/internal/meta"
)

// OwnerUsage is the help of --owner, the flag of the steps that create snapshots or volumes.
const OwnerUsage = "CLUSTER/NAMESPACE where the member this step runs for lives (the agent passes its cluster's kube-system namespace uid and the member's namespace): what the step creates is tagged %s=CLUSTER/NAMESPACE until it is recorded, so that cluster's agent may sweep it once its member is gone, and fedbr.io/namespace=NAMESPACE for good (what a per-namespace IAM policy conditions on)"

// ParseOwner reads --owner; nil when it is empty.
func ParseOwner(v string) (*meta.Owner, error) {
	if v == "" {
		return nil, nil
	}
	o, err := meta.ParseOwner(v)
	if err != nil {
		return nil, fmt.Errorf("--owner: %w", err)
	}
	return &o, nil
}
