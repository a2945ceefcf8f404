package env

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/controlplane"
)

// touch creates the files (and their folders) under dir.
func touch(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPodLog(t *testing.T) {
	nodes := []string{t.TempDir(), t.TempDir()}
	touch(t, nodes[0], "logs/ns_one_u1/c/0.log", "logs/ns_two_u2/a/0.log", "logs/ns_two_u2/b/0.log",
		"logs/ns_sts-0_old/c/0.log", "logs/ns_sts-0_old/c/1.log")
	// The StatefulSet pod ran again, on the other node, later.
	later := time.Now().Add(time.Minute)
	touch(t, nodes[1], "logs/ns_sts-0_new/c/0.log", "logs/ns_sts-0_new/c/1.log", "logs/ns_sts-0_new/c/2.log")
	if err := os.Chtimes(filepath.Join(nodes[1], "logs/ns_sts-0_new"), later, later); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		pod, container string
		previous       bool
		want, wantErr  string
	}{
		{pod: "one", want: "logs/ns_one_u1/c/0.log"},
		{pod: "one", container: "c", want: "logs/ns_one_u1/c/0.log"},
		{pod: "two", container: "b", want: "logs/ns_two_u2/b/0.log"},
		{pod: "sts-0", want: "logs/ns_sts-0_new/c/2.log"},
		{pod: "sts-0", previous: true, want: "logs/ns_sts-0_new/c/1.log"},
		{pod: "two", wantErr: "has containers [a b]: name one"},
		{pod: "one", previous: true, wantErr: "has no previous run"},
		{pod: "one", container: "x", wantErr: "no log of container x"},
		{pod: "three", wantErr: "no log of pod ns/three on any node"},
	}
	for _, tt := range tests {
		got, err := PodLog(nodes, "ns", tt.pod, tt.container, tt.previous)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("PodLog(%s, %q, %v) = %q, %v; want error %q", tt.pod, tt.container, tt.previous, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !strings.HasSuffix(got, tt.want) {
			t.Errorf("PodLog(%s, %q, %v) = %q, %v; want …%s", tt.pod, tt.container, tt.previous, got, err, tt.want)
		}
	}
}

type logFileCase struct {
	target        []string
	previous      bool
	want, wantErr string
}

func TestLogFile(t *testing.T) {
	dir := t.TempDir()
	node := filepath.Join(dir, "dp1", "nodes", "dp1-node-0")
	touch(t, node, "logs/default_job-x_u/main/0.log")
	l := &Lab{Dir: dir, Contexts: []string{"control", "dp1"}, Control: "control",
		AWS: AWS{Process: procLog("/l/aws.log")}, EKSAuth: &EKSAuth{Cluster: "dp1", Process: procLog("/l/eksauth.log")},
		DataPlanes: []DataPlane{{Cluster: "dp1", Operator: procLog("/l/op.log"),
			Nodes: []Node{{Name: "dp1-node-0", Dir: node, Process: procLog("/l/node.log")}}}},
	}
	tests := []logFileCase{
		{target: []string{"aws"}, want: "/l/aws.log"},
		{target: []string{"operator", "dp1"}, want: "/l/op.log"},
		{target: []string{"eksauth", "dp1"}, want: "/l/eksauth.log"},
		{target: []string{"eksauth", "dp2"}, wantErr: `no EKS authenticator in cluster "dp2"`},
		{target: []string{"node", "dp1-node-0"}, want: "/l/node.log"},
		{target: []string{"kube-apiserver", "control"}, want: filepath.Join(dir, "control", "logs", "kube-apiserver.log")},
		{target: []string{"dp1/default/job-x"}, want: filepath.Join(node, "logs/default_job-x_u/main/0.log")},
		{target: []string{"operator", "control"}, wantErr: `no data-plane cluster "control" (have dp1)`},
		{target: []string{"node", "dp9-node-0"}, wantErr: `no node "dp9-node-0"`},
		{target: []string{"etcd", "dp9"}, wantErr: `no cluster "dp9"`},
		{target: []string{"control/default/x"}, wantErr: `no cluster "control" with nodes (pods run in the data planes dp1, and in control once fedbr is installed)`},
		{target: []string{"dp1/default"}, wantErr: "want CLUSTER/NAMESPACE/POD[/CONTAINER]"},
		{target: []string{"dp1//x"}, wantErr: "want CLUSTER/NAMESPACE/POD[/CONTAINER]"},
		{target: []string{"aws"}, previous: true, wantErr: "--previous applies to pod containers only"},
		{target: []string{"scheduler"}, wantErr: `unknown log "scheduler"`},
	}
	check := func(l *Lab, tests []logFileCase) {
		t.Helper()
		for _, tt := range tests {
			got, err := l.LogFile(tt.target, tt.previous)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("LogFile(%q) = %q, %v; want error %q", tt.target, got, err, tt.wantErr)
				}
				continue
			}
			if err != nil || got != tt.want {
				t.Errorf("LogFile(%q) = %q, %v; want %q", tt.target, got, err, tt.want)
			}
		}
	}
	check(l, tests)

	// Once installed, the control cluster's node runs the manager's pod.
	cnode := filepath.Join(dir, "control", "nodes", "control-node-0")
	touch(t, cnode, "logs/fedbr-system_fedbr-manager-x_u/manager/0.log")
	l.ControlNodes = []Node{{Name: "control-node-0", Dir: cnode, Process: procLog("/l/cnode.log")}}
	check(l, []logFileCase{
		{target: []string{"node", "control-node-0"}, want: "/l/cnode.log"},
		{target: []string{"control/fedbr-system/fedbr-manager-x"}, want: filepath.Join(cnode, "logs/fedbr-system_fedbr-manager-x_u/manager/0.log")},
		{target: []string{"dp9/default/x"}, wantErr: `no cluster "dp9" with nodes`},
	})
}

func procLog(path string) controlplane.Process { return controlplane.Process{Log: path} }
