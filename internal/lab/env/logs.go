package env

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fedbr/fedbr/internal/lab/controlplane"
)

// LogFile finds the log file that target names:
//
//	aws                                  the AWS double
//	operator CLUSTER                     a data plane's stand-in tidb-operator
//	eksauth CLUSTER                      the EKS authenticator of a data plane (Lab.EKSAuth)
//	node NODE                            a lab node (the process, not its pods)
//	COMPONENT CLUSTER                    etcd, kube-apiserver, kube-controller-manager, kube-scheduler
//	CLUSTER/NAMESPACE/POD[/CONTAINER]    a pod's container, as its node keeps it (current run,
//	                                     or the one before with previous)
//
// A pod's log is found in the node folders, so it is there also after the pod, or the lab, is
// gone. When the pod ran several times under the same name (a recreated StatefulSet pod), the
// latest incarnation's log is taken.
func (l *Lab) LogFile(target []string, previous bool) (string, error) {
	if len(target) == 1 && strings.Contains(target[0], "/") {
		return l.podLogFile(target[0], previous)
	}
	if previous {
		return "", errors.New("--previous applies to pod containers only")
	}
	switch {
	case len(target) == 1 && target[0] == ComponentAWS:
		return l.AWS.Process.Log, nil
	case len(target) == 2 && target[0] == ComponentOperator:
		d, ok := l.DataPlane(target[1])
		if !ok {
			return "", fmt.Errorf("no data-plane cluster %q (have %s)", target[1], strings.Join(l.dataPlaneNames(), ", "))
		}
		return d.Operator.Log, nil
	case len(target) == 2 && target[0] == ComponentEKSAuth:
		if l.EKSAuth == nil || l.EKSAuth.Cluster != target[1] {
			return "", fmt.Errorf("no EKS authenticator in cluster %q", target[1])
		}
		return l.EKSAuth.Process.Log, nil
	case len(target) == 2 && target[0] == ComponentNode:
		for _, n := range l.ControlNodes {
			if n.Name == target[1] {
				return n.Process.Log, nil
			}
		}
		for _, d := range l.DataPlanes {
			for _, n := range d.Nodes {
				if n.Name == target[1] {
					return n.Process.Log, nil
				}
			}
		}
		return "", fmt.Errorf("no node %q in the lab", target[1])
	case len(target) == 2 && slices.Contains(controlPlaneComponents, target[0]):
		if !slices.Contains(l.Contexts, target[1]) {
			return "", fmt.Errorf("no cluster %q (have %s)", target[1], strings.Join(l.Contexts, ", "))
		}
		return filepath.Join(l.Dir, target[1], "logs", target[0]+".log"), nil
	}
	return "", fmt.Errorf("unknown log %q: want aws, operator CLUSTER, eksauth CLUSTER, node NODE, COMPONENT CLUSTER (%s) or CLUSTER/NAMESPACE/POD[/CONTAINER]",
		strings.Join(target, " "), strings.Join(controlPlaneComponents, ", "))
}

var controlPlaneComponents = []string{controlplane.Etcd, controlplane.APIServer, controlplane.ControllerManager, controlplane.Scheduler}

func (l *Lab) dataPlaneNames() []string {
	var out []string
	for _, d := range l.DataPlanes {
		out = append(out, d.Cluster)
	}
	return out
}

func (l *Lab) podLogFile(ref string, previous bool) (string, error) {
	parts := strings.Split(ref, "/")
	if len(parts) < 3 || len(parts) > 4 || slices.Contains(parts, "") {
		return "", fmt.Errorf("pod %q: want CLUSTER/NAMESPACE/POD[/CONTAINER]", ref)
	}
	nodes := l.ControlNodes
	if d, ok := l.DataPlane(parts[0]); ok {
		nodes = d.Nodes
	} else if parts[0] != l.Control || len(nodes) == 0 {
		return "", fmt.Errorf("pod %s: no cluster %q with nodes (pods run in the data planes %s, and in %s once fedbr is installed)",
			ref, parts[0], strings.Join(l.dataPlaneNames(), ", "), l.Control)
	}
	var nodeDirs []string
	for _, n := range nodes {
		nodeDirs = append(nodeDirs, n.Dir)
	}
	container := ""
	if len(parts) == 4 {
		container = parts[3]
	}
	return PodLog(nodeDirs, parts[1], parts[2], container, previous)
}

// PodLog finds a pod container's log in the folders of the nodes that may have run it (see
// kubelet.LogPath for the layout). Without container, the pod must have exactly one.
func PodLog(nodeDirs []string, namespace, pod, container string, previous bool) (string, error) {
	var runs []string
	for _, nd := range nodeDirs {
		m, err := filepath.Glob(filepath.Join(nd, "logs", namespace+"_"+pod+"_*"))
		if err != nil {
			return "", err
		}
		runs = append(runs, m...)
	}
	if len(runs) == 0 {
		return "", fmt.Errorf("no log of pod %s/%s on any node", namespace, pod)
	}
	// The latest incarnation of the pod name: its folder was made last.
	sort.Slice(runs, func(i, j int) bool { return modTime(runs[i]) < modTime(runs[j]) })
	podDir := runs[len(runs)-1]
	if container == "" {
		entries, err := os.ReadDir(podDir)
		if err != nil {
			return "", err
		}
		var names []string
		for _, e := range entries {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
		if len(names) != 1 {
			return "", fmt.Errorf("pod %s/%s has containers %v: name one (CLUSTER/NAMESPACE/POD/CONTAINER)", namespace, pod, names)
		}
		container = names[0]
	}
	files, err := filepath.Glob(filepath.Join(podDir, container, "*.log"))
	if err != nil {
		return "", err
	}
	var restarts []int
	for _, f := range files {
		if n, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".log")); err == nil {
			restarts = append(restarts, n)
		}
	}
	if len(restarts) == 0 {
		return "", fmt.Errorf("no log of container %s in pod %s/%s", container, namespace, pod)
	}
	slices.Sort(restarts)
	i := len(restarts) - 1
	if previous {
		i--
		if i < 0 {
			return "", fmt.Errorf("container %s of pod %s/%s has no previous run", container, namespace, pod)
		}
	}
	return filepath.Join(podDir, container, strconv.Itoa(restarts[i])+".log"), nil
}

func modTime(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.ModTime().UnixNano()
}
