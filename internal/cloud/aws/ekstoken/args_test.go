package ekstoken_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fedbr/fedbr/internal/cloud/aws/ekstoken"
)

// TestParse: the exec forms the AWS tools write into kubeconfigs parse to their cluster,
// region and role; every other command is ErrNotEKS and every other argument ErrArgs, with an
// error that names what was refused.
func TestParse(t *testing.T) {
	good := []struct {
		name    string
		command string
		args    []string
		want    ekstoken.Request
	}{
		{"aws eks update-kubeconfig's form", "aws",
			[]string{"--region", "us-west-2", "eks", "get-token", "--cluster-name", "prod", "--output", "json"},
			ekstoken.Request{Cluster: "prod", Region: "us-west-2"}},
		{"aws, region after get-token, role", "aws",
			[]string{"eks", "get-token", "--cluster-name", "prod", "--region", "eu-central-1", "--role-arn", "arn:aws:iam::111122223333:role/eks-admin"},
			ekstoken.Request{Cluster: "prod", Region: "eu-central-1", RoleARN: "arn:aws:iam::111122223333:role/eks-admin"}},
		{"aws, no region, flag=value", "aws",
			[]string{"eks", "get-token", "--cluster-name=prod", "--role-arn=arn:aws:iam::111122223333:role/r", "--session-name=s1"},
			ekstoken.Request{Cluster: "prod", RoleARN: "arn:aws:iam::111122223333:role/r", SessionName: "s1"}},
		{"aws by path, Outposts cluster id", "/usr/local/bin/aws",
			[]string{"eks", "get-token", "--cluster-id", "0123abcd-0000-1111-2222-333344445555"},
			ekstoken.Request{Cluster: "0123abcd-0000-1111-2222-333344445555"}},
		{"aws-iam-authenticator, short flags", "aws-iam-authenticator",
			[]string{"token", "-i", "prod"},
			ekstoken.Request{Cluster: "prod"}},
		{"aws-iam-authenticator, role and region", "aws-iam-authenticator",
			[]string{"token", "-i", "prod", "-r", "arn:aws:iam::111122223333:role/eks", "--region", "us-east-1"},
			ekstoken.Request{Cluster: "prod", RoleARN: "arn:aws:iam::111122223333:role/eks", Region: "us-east-1"}},
		{"aws-iam-authenticator, long flags", "aws-iam-authenticator",
			[]string{"token", "--cluster-id=prod", "--role", "arn:aws:iam::111122223333:role/eks"},
			ekstoken.Request{Cluster: "prod", RoleARN: "arn:aws:iam::111122223333:role/eks"}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ekstoken.Parse(tc.command, tc.args)
			if err != nil {
				t.Fatalf("Parse(%q, %q) = %v", tc.command, tc.args, err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("Parse(%q, %q) (-want +got):\n%s", tc.command, tc.args, d)
			}
		})
	}

	bad := []struct {
		name    string
		command string
		args    []string
		is      error
		mention []string
	}{
		{"another plugin", "gke-gcloud-auth-plugin", nil, ekstoken.ErrNotEKS, []string{`"gke-gcloud-auth-plugin"`}},
		{"kubelogin", "kubelogin", []string{"get-token", "--server-id", "x"}, ekstoken.ErrNotEKS, []string{`"kubelogin"`}},
		{"a shell", "sh", []string{"-c", "aws eks get-token --cluster-name prod"}, ekstoken.ErrNotEKS, []string{`"sh"`}},
		{"aws, another subcommand", "aws", []string{"sts", "get-caller-identity"}, ekstoken.ErrArgs, []string{`["sts" "get-caller-identity"]`}},
		{"aws, extra word", "aws", []string{"eks", "get-token", "prod", "--cluster-name", "prod"}, ekstoken.ErrArgs, []string{`"prod"`}},
		{"aws, profile", "aws", []string{"eks", "get-token", "--cluster-name", "prod", "--profile", "admin"}, ekstoken.ErrArgs, []string{"--profile", "--cluster-name"}},
		{"aws, endpoint and debug", "aws", []string{"--endpoint-url=https://evil.example", "--debug", "eks", "get-token", "--cluster-name", "prod"}, ekstoken.ErrArgs, []string{"--endpoint-url", "--debug"}},
		{"aws, no cluster", "aws", []string{"eks", "get-token", "--region", "us-west-2"}, ekstoken.ErrArgs, []string{"no cluster", "--cluster-name"}},
		{"aws, name and id", "aws", []string{"eks", "get-token", "--cluster-name", "a", "--cluster-id", "b"}, ekstoken.ErrArgs, []string{"twice"}},
		{"aws, region twice", "aws", []string{"--region", "us-west-2", "eks", "get-token", "--cluster-name", "a", "--region", "us-east-1"}, ekstoken.ErrArgs, []string{"--region", "twice"}},
		{"aws, empty cluster", "aws", []string{"eks", "get-token", "--cluster-name="}, ekstoken.ErrArgs, []string{"--cluster-name", "empty"}},
		{"aws, dangling flag", "aws", []string{"eks", "get-token", "--cluster-name"}, ekstoken.ErrArgs, []string{"--cluster-name", "no value"}},
		{"aws, region not a region", "aws", []string{"eks", "get-token", "--cluster-name", "a", "--region", "evil.example/x"}, ekstoken.ErrArgs, []string{`"evil.example/x"`}},
		{"aws, role not an ARN", "aws", []string{"eks", "get-token", "--cluster-name", "a", "--role-arn", "admin"}, ekstoken.ErrArgs, []string{`"admin"`}},
		{"aws, yaml output", "aws", []string{"eks", "get-token", "--cluster-name", "a", "--output", "yaml"}, ekstoken.ErrArgs, []string{`"yaml"`}},
		{"aws, session without role", "aws", []string{"eks", "get-token", "--cluster-name", "a", "--session-name", "s"}, ekstoken.ErrArgs, []string{"--session-name"}},
		{"authenticator, verify", "aws-iam-authenticator", []string{"verify", "-i", "prod"}, ekstoken.ErrArgs, []string{`["verify"]`}},
		{"authenticator, no cluster", "aws-iam-authenticator", []string{"token"}, ekstoken.ErrArgs, []string{"-i or --cluster-id"}},
		{"authenticator, cache and external id", "aws-iam-authenticator", []string{"token", "-i", "prod", "--cache", "-e", "x"}, ekstoken.ErrArgs, []string{"--cache", "-e"}},
		{"authenticator, config file", "aws-iam-authenticator", []string{"token", "-i", "prod", "-c", "/tmp/c.yaml"}, ekstoken.ErrArgs, []string{"-c"}},
		{"authenticator, aws's flag", "aws-iam-authenticator", []string{"token", "--cluster-name", "prod"}, ekstoken.ErrArgs, []string{"--cluster-name"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ekstoken.Parse(tc.command, tc.args)
			if !errors.Is(err, tc.is) {
				t.Fatalf("Parse(%q, %q) = %+v, %v; want %v", tc.command, tc.args, got, err, tc.is)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %s", err, m)
				}
			}
		})
	}
}
