package env

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNewPlan(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want Plan
	}{
		{
			name: "defaults: control first, zones a b c, 127.0.11-13, store bases 1000-3000",
			o:    Options{Clusters: DefaultClusters, Nodes: 2},
			want: Plan{Control: "control", Region: "us-west-2", DataPlanes: []DataPlanePlan{
				{Cluster: "dp1", Zone: "us-west-2a", Nodes: []string{"dp1-node-0", "dp1-node-1"}, IPPrefix: "127.0.11", StoreIDBase: 1000},
				{Cluster: "dp2", Zone: "us-west-2b", Nodes: []string{"dp2-node-0", "dp2-node-1"}, IPPrefix: "127.0.12", StoreIDBase: 2000},
				{Cluster: "dp3", Zone: "us-west-2c", Nodes: []string{"dp3-node-0", "dp3-node-1"}, IPPrefix: "127.0.13", StoreIDBase: 3000},
			}, EKSAuth: "dp1"},
		},
		{
			name: "control in the middle, zone override, other region, ip base and store step",
			o: Options{Clusters: []string{"east", "hub", "west"}, Control: "hub", Nodes: 1, Region: "eu-central-1",
				Zones: map[string]string{"west": "eu-central-1c"}, IPBase: 40, StoreIDStep: 100},
			want: Plan{Control: "hub", Region: "eu-central-1", DataPlanes: []DataPlanePlan{
				{Cluster: "east", Zone: "eu-central-1a", Nodes: []string{"east-node-0"}, IPPrefix: "127.0.41", StoreIDBase: 100},
				{Cluster: "west", Zone: "eu-central-1c", Nodes: []string{"west-node-0"}, IPPrefix: "127.0.42", StoreIDBase: 200},
			}, EKSAuth: "east"},
		},
		{
			name: "the EKS authenticator on another data plane",
			o:    Options{Clusters: []string{"c", "d", "e"}, Nodes: 1, EKSAuth: "e"},
			want: Plan{Control: "c", Region: "us-west-2", DataPlanes: []DataPlanePlan{
				{Cluster: "d", Zone: "us-west-2a", Nodes: []string{"d-node-0"}, IPPrefix: "127.0.11", StoreIDBase: 1000},
				{Cluster: "e", Zone: "us-west-2b", Nodes: []string{"e-node-0"}, IPPrefix: "127.0.12", StoreIDBase: 2000},
			}, EKSAuth: "e"},
		},
		{
			name: "no EKS authenticator",
			o:    Options{Clusters: []string{"c", "d"}, Nodes: 1, EKSAuth: NoEKSAuth},
			want: Plan{Control: "c", Region: "us-west-2", DataPlanes: []DataPlanePlan{
				{Cluster: "d", Zone: "us-west-2a", Nodes: []string{"d-node-0"}, IPPrefix: "127.0.11", StoreIDBase: 1000},
			}},
		},
		{
			name: "zero node count means the default",
			o:    Options{Clusters: []string{"c", "d"}},
			want: Plan{Control: "c", Region: "us-west-2", DataPlanes: []DataPlanePlan{
				{Cluster: "d", Zone: "us-west-2a", Nodes: []string{"d-node-0", "d-node-1", "d-node-2"}, IPPrefix: "127.0.11", StoreIDBase: 1000},
			}, EKSAuth: "d"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewPlan(tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewPlanInvalid(t *testing.T) {
	tests := []struct {
		name    string
		o       Options
		wantErr string
	}{
		{"no clusters", Options{}, "--clusters must name at least one cluster"},
		{"bad name", Options{Clusters: []string{"control", "DP1"}}, `cluster name "DP1" must be a DNS label`},
		{"duplicate", Options{Clusters: []string{"a", "b", "a"}}, `cluster name "a" appears twice`},
		{"only a control cluster", Options{Clusters: []string{"control"}}, "want a data-plane cluster"},
		{"unknown control", Options{Clusters: []string{"a", "b"}, Control: "c"}, `--control "c" is not one of --clusters`},
		{"negative nodes", Options{Clusters: []string{"a", "b"}, Nodes: -1}, "--nodes -1: want 1..50"},
		{"too many nodes", Options{Clusters: []string{"a", "b"}, Nodes: 51}, "--nodes 51"},
		{"bad region", Options{Clusters: []string{"a", "b"}, Region: "mars"}, `--region "mars"`},
		{"ip base too high", Options{Clusters: []string{"a", "b", "c"}, IPBase: 253}, "--ip-base 253: want 1..252"},
		{"zone of an unknown cluster", Options{Clusters: []string{"a", "b"}, Zones: map[string]string{"x": "us-west-2a"}}, `"x" is not one of --clusters`},
		{"zone of the control cluster", Options{Clusters: []string{"a", "b"}, Zones: map[string]string{"a": "us-west-2a"}}, "the control cluster has no nodes"},
		{"zone of another region", Options{Clusters: []string{"a", "b"}, Zones: map[string]string{"b": "us-east-1a"}}, "want a zone of region us-west-2"},
		{"EKS authenticator on the control cluster", Options{Clusters: []string{"a", "b"}, EKSAuth: "a"}, `--eks-auth "a": want a data-plane cluster`},
		{"EKS authenticator on an unknown cluster", Options{Clusters: []string{"a", "b"}, EKSAuth: "x"}, `--eks-auth "x": want a data-plane cluster`},
		{"zone without letter", Options{Clusters: []string{"a", "b"}, Zones: map[string]string{"b": "us-west-2"}}, "want a zone of region us-west-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPlan(tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewPlan() = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseZones(t *testing.T) {
	got, err := ParseZones([]string{"dp1=us-west-2c", "dp2=us-west-2a"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"dp1": "us-west-2c", "dp2": "us-west-2a"}, got); diff != "" {
		t.Errorf("zones (-want +got):\n%s", diff)
	}
	for _, bad := range [][]string{{"dp1"}, {"=us-west-2a"}, {"dp1="}, {"dp1=us-west-2a", "dp1=us-west-2b"}} {
		if _, err := ParseZones(bad); err == nil {
			t.Errorf("ParseZones(%q): want an error", bad)
		}
	}
}
