package env

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Defaults of Options.
const (
	DefaultRegion       = "us-west-2"
	DefaultNodes        = 3
	DefaultIPBase       = 10
	DefaultStoreIDStep  = 1000
	DefaultStorageClass = "gp3"
	// DefaultSnapshotTime is the fixed part of a snapshot's completion in the lab's AWS double.
	// EBS takes minutes; a snapshot that completed in the moment it started would put the
	// completion's work (steps exiting, size Jobs starting) inside the GC pause window, which
	// a production backup never has there.
	DefaultSnapshotTime = 5 * time.Second
)

// DefaultClusters are the clusters of a lab: one control plane cluster and three data planes.
var DefaultClusters = []string{"control", "dp1", "dp2", "dp3"}

// Plan is where every part of a lab goes, decided from the options alone.
type Plan struct {
	Control    string
	Region     string
	DataPlanes []DataPlanePlan
	// EKSAuth is the data plane whose API server authenticates bearer tokens as EKS does
	// (package eksauth), "" for none.
	EKSAuth string
}

// NoEKSAuth as Options.EKSAuth leaves every data plane without the EKS authenticator.
const NoEKSAuth = "none"

// DataPlanePlan is one data-plane cluster: its zone, its nodes, and the operator's address block
// and store-id base.
type DataPlanePlan struct {
	Cluster string
	Zone    string
	Nodes   []string
	// IPPrefix is 127.0.N: every PD and TiKV member of the cluster gets 127.0.N.x with the real
	// ports, distinct from every other data plane's.
	IPPrefix string
	// StoreIDBase makes store ids distinct across data planes of one federated TiDB cluster.
	StoreIDBase uint64
}

var (
	clusterNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	regionRE      = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
)

// NewPlan validates the layout options and assigns zones, node names, address blocks and
// store-id bases. It is pure.
//
//   - The control cluster (default the first) gets no nodes and no operator.
//   - Data plane i (0-based, in --clusters order) gets zone Region+('a'+i) unless Zones names
//     one, IP prefix 127.0.(IPBase+i+1), store-id base StoreIDStep*(i+1) and nodes
//     <cluster>-node-0 … <cluster>-node-(Nodes-1).
//   - The EKS authenticator is Options.EKSAuth's data plane, default the first; NoEKSAuth none.
func NewPlan(o Options) (Plan, error) {
	if err := validateClusters(o.Clusters); err != nil {
		return Plan{}, err
	}
	control := o.Control
	if control == "" {
		control = o.Clusters[0]
	}
	isCluster := map[string]bool{}
	for _, c := range o.Clusters {
		isCluster[c] = true
	}
	if !isCluster[control] {
		return Plan{}, fmt.Errorf("--control %q is not one of --clusters %v", control, o.Clusters)
	}
	region := o.Region
	if region == "" {
		region = DefaultRegion
	}
	if !regionRE.MatchString(region) {
		return Plan{}, fmt.Errorf("--region %q: want an AWS region such as us-west-2", region)
	}
	nodes := o.Nodes
	if nodes == 0 {
		nodes = DefaultNodes
	}
	if nodes < 1 || nodes > 50 {
		return Plan{}, fmt.Errorf("--nodes %d: want 1..50 nodes per data-plane cluster", o.Nodes)
	}
	ipBase := o.IPBase
	if ipBase == 0 {
		ipBase = DefaultIPBase
	}
	step := o.StoreIDStep
	if step == 0 {
		step = DefaultStoreIDStep
	}
	dataPlanes := len(o.Clusters) - 1
	if dataPlanes < 1 {
		return Plan{}, fmt.Errorf("--clusters %v: want a data-plane cluster besides the control cluster %q", o.Clusters, control)
	}
	if ipBase < 1 || ipBase+dataPlanes > 254 {
		return Plan{}, fmt.Errorf("--ip-base %d: want 1..%d so that 127.0.(base+%d) is an address", o.IPBase, 254-dataPlanes, dataPlanes)
	}
	if dataPlanes > 26 {
		return Plan{}, fmt.Errorf("--clusters: at most 26 data-plane clusters (one zone letter each), got %d", dataPlanes)
	}
	if err := validateZones(o.Zones, isCluster, control, region); err != nil {
		return Plan{}, err
	}
	p := Plan{Control: control, Region: region}
	i := 0
	for _, c := range o.Clusters {
		if c == control {
			continue
		}
		dp := DataPlanePlan{
			Cluster:     c,
			Zone:        region + string(rune('a'+i)),
			IPPrefix:    "127.0." + strconv.Itoa(ipBase+i+1),
			StoreIDBase: step * uint64(i+1),
		}
		if z, ok := o.Zones[c]; ok {
			dp.Zone = z
		}
		for n := range nodes {
			dp.Nodes = append(dp.Nodes, c+"-node-"+strconv.Itoa(n))
		}
		p.DataPlanes = append(p.DataPlanes, dp)
		i++
	}
	switch p.EKSAuth = o.EKSAuth; p.EKSAuth {
	case "":
		p.EKSAuth = p.DataPlanes[0].Cluster
	case NoEKSAuth:
		p.EKSAuth = ""
	default:
		if !isCluster[p.EKSAuth] || p.EKSAuth == control {
			return Plan{}, fmt.Errorf("--eks-auth %q: want a data-plane cluster (or %q)", o.EKSAuth, NoEKSAuth)
		}
	}
	return p, nil
}

func validateClusters(clusters []string) error {
	if len(clusters) == 0 {
		return errors.New("--clusters must name at least one cluster")
	}
	seen := map[string]bool{}
	for _, c := range clusters {
		if !clusterNameRE.MatchString(c) {
			return fmt.Errorf("cluster name %q must be a DNS label (lowercase letters, digits and '-')", c)
		}
		if seen[c] {
			return fmt.Errorf("cluster name %q appears twice", c)
		}
		seen[c] = true
	}
	return nil
}

func validateZones(zones map[string]string, isCluster map[string]bool, control, region string) error {
	for c, z := range zones {
		switch {
		case !isCluster[c]:
			return fmt.Errorf("--zones %s=%s: %q is not one of --clusters", c, z, c)
		case c == control:
			return fmt.Errorf("--zones %s=%s: the control cluster has no nodes, so no zone", c, z)
		case len(z) != len(region)+1 || !strings.HasPrefix(z, region) || z[len(z)-1] < 'a' || z[len(z)-1] > 'z':
			return fmt.Errorf("--zones %s=%s: want a zone of region %s, such as %sa", c, z, region, region)
		}
	}
	return nil
}

// ParseZones parses CLUSTER=ZONE pairs, as --zones takes them.
func ParseZones(pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range pairs {
		c, z, ok := strings.Cut(p, "=")
		if !ok || c == "" || z == "" {
			return nil, fmt.Errorf("--zones %q: want CLUSTER=ZONE, such as dp1=us-west-2a", p)
		}
		if _, dup := out[c]; dup {
			return nil, fmt.Errorf("--zones names cluster %q twice", c)
		}
		out[c] = z
	}
	return out, nil
}
