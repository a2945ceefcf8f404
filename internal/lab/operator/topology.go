package operator

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
)

// Annotations on a TidbCluster that shape the initial region layout of a fresh cluster. They
// exist because the TiKV double does not balance regions onto stores that join later: a
// TiDB cluster spread over several lab clusters gets its peers in every lab cluster only if the
// layout names stores of all of them from the start.
const (
	// AnnotationInitialStores is a comma-separated list of at least three store ids, passed to
	// every TiKV of the TidbCluster as --initial-stores (the first one bootstraps). Give every
	// part of a federated cluster the same list. Default: the TidbCluster's own first three
	// stores when it runs its own PD and at least three TiKV, else none (the stores only join).
	AnnotationInitialStores = "lab.fedbr.io/initial-stores"
	// AnnotationSplitKeys is a comma-separated list of keys that pre-split a fresh cluster,
	// passed as --split-keys; give every part of a federated cluster the same list.
	AnnotationSplitKeys = "lab.fedbr.io/split-keys"
)

// hasLocalPD reports whether the TidbCluster runs a PD of its own; without one its TiKV join
// the PD named in spec.pdAddresses, else the PD of the TidbCluster spec.cluster references
// (another part of a federated TiDB cluster).
func hasLocalPD(tc *pcv1alpha1.TidbCluster) bool {
	return tc.Spec.PD != nil && tc.Spec.PD.Replicas > 0
}

// pdAddress is the host:port the TidbCluster's TiKV use to reach PD: its own member 0, the
// first of spec.pdAddresses, or the referenced cluster's PD Service as tidb-operator names it
// (tidbcluster.ClusterRefPD: a name the lab's cluster DNS resolves). validatePD has accepted
// the spec.
func pdAddress(a Addressing, tc *pcv1alpha1.TidbCluster) string {
	if hasLocalPD(tc) {
		return a.PD(0)
	}
	if len(tc.Spec.PDAddresses) > 0 {
		hostPort, _ := parsePDAddress(tc.Spec.PDAddresses[0])
		return hostPort
	}
	if ref := tidbcluster.ClusterRefPD(tc); ref != "" {
		hostPort, _ := parsePDAddress(ref)
		return hostPort
	}
	return ""
}

// parsePDAddress turns a PD client URL (http://host:port, as tidb-operator's pdAddresses
// hold) into host:port.
func parsePDAddress(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" || u.Hostname() == "" {
		return "", fmt.Errorf("spec.pdAddresses entry %q: want a PD client URL such as http://127.0.1.10:2379", s)
	}
	return net.JoinHostPort(u.Hostname(), u.Port()), nil
}

// validatePD checks where the TidbCluster's PD is: exactly one local member (the PD double
// serves one), or none and a PD to join: spec.pdAddresses, or spec.cluster (its name resolves
// through the lab's cluster DNS, which the operator needs then).
func validatePD(tc *pcv1alpha1.TidbCluster) error {
	switch {
	case hasLocalPD(tc) && tc.Spec.PD.Replicas != 1:
		return fmt.Errorf("%w: spec.pd.replicas must be 0 or 1 (the PD double serves one member)", ErrInvalidSpec)
	case hasLocalPD(tc) && len(tc.Spec.PDAddresses) > 0:
		return fmt.Errorf("%w: spec.pdAddresses with a PD of its own: the PD double cannot join another PD; set spec.pd.replicas to 0", ErrInvalidSpec)
	case !hasLocalPD(tc) && len(tc.Spec.PDAddresses) == 0 && tidbcluster.ClusterRefPD(tc) == "":
		return fmt.Errorf("%w: without a PD (spec.pd.replicas 0) spec.pdAddresses or spec.cluster must name the PD to join", ErrInvalidSpec)
	}
	for _, s := range tc.Spec.PDAddresses {
		if _, err := parsePDAddress(s); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidSpec, err)
		}
	}
	return nil
}

// layout is the initial region layout a TiKV of the TidbCluster is started with.
type layout struct {
	initialStores []uint64
	splitKeys     []string
}

// layoutFor reads the layout annotations, or picks the default (see AnnotationInitialStores).
func layoutFor(a Addressing, tc *pcv1alpha1.TidbCluster) (layout, error) {
	var l layout
	if v, ok := tc.Annotations[AnnotationInitialStores]; ok {
		for _, f := range strings.Split(v, ",") {
			id, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil || id == 0 {
				return l, fmt.Errorf("%w: annotation %s=%q: want store ids (positive integers) separated by commas", ErrInvalidSpec, AnnotationInitialStores, v)
			}
			l.initialStores = append(l.initialStores, id)
		}
		if len(l.initialStores) < 3 {
			return l, fmt.Errorf("%w: annotation %s=%q: want at least three stores", ErrInvalidSpec, AnnotationInitialStores, v)
		}
	} else if hasLocalPD(tc) && tc.Spec.TiKV != nil && tc.Spec.TiKV.Replicas >= 3 {
		l.initialStores = []uint64{a.StoreID(0), a.StoreID(1), a.StoreID(2)}
	}
	if v, ok := tc.Annotations[AnnotationSplitKeys]; ok && v != "" {
		l.splitKeys = strings.Split(v, ",")
	}
	return l, nil
}

// args are the TiKV flags for the layout.
func (l layout) args() []string {
	var out []string
	if len(l.initialStores) > 0 {
		ids := make([]string, len(l.initialStores))
		for i, id := range l.initialStores {
			ids[i] = strconv.FormatUint(id, 10)
		}
		out = append(out, "--initial-stores", strings.Join(ids, ","))
	}
	if len(l.splitKeys) > 0 {
		out = append(out, "--split-keys", strings.Join(l.splitKeys, ","))
	}
	return out
}
