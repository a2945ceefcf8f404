package ekstoken

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// ErrNotEKS is returned by Parse for a command that is not one of the two EKS token commands
// fedbr serves in-process.
var ErrNotEKS = errors.New("not an EKS token command (fedbr serves only \"aws eks get-token\" and \"aws-iam-authenticator token\")")

// ErrArgs is returned by Parse for one of the two commands with arguments fedbr does not take:
// an unknown flag, a missing cluster, a repeated or empty flag.
var ErrArgs = errors.New("EKS token command arguments")

// Request is what an EKS token command asks for.
type Request struct {
	// Cluster is the EKS cluster's name (or, for a local cluster on Outposts, its id): the value
	// of the signed x-k8s-aws-id header, which the cluster's authenticator checks.
	Cluster string
	// Region is the region of the STS endpoint the token is signed for; empty means the
	// manager's environment's (AWS_REGION).
	Region string
	// RoleARN, when set, is assumed (sts:AssumeRole) with the manager's credentials, and the
	// token is signed with the role's.
	RoleARN string
	// SessionName is the assumed role's session name; empty means DefaultSessionName.
	SessionName string
}

// DefaultSessionName names the role session when a RoleARN is given without a session name;
// it shows in CloudTrail and in the assumed-role ARN the cluster maps.
const DefaultSessionName = "fedbr-manager"

// flagSpec is one accepted flag of a command form.
type flagSpec struct {
	names []string // every spelling, such as "-r" and "--role"
	set   func(r *Request, v string) error
}

// form is one command fedbr serves: the words after the command, then its flags.
type form struct {
	words []string
	flags []flagSpec
	// clusterFlags names the flags that give the cluster, for the error when none does.
	clusterFlags string
}

func setCluster(r *Request, v string) error {
	if r.Cluster != "" {
		return errors.New("the cluster is given twice")
	}
	r.Cluster = v
	return nil
}

func setRegion(r *Request, v string) error {
	if !regionRE.MatchString(v) {
		return fmt.Errorf("region %q is not a region name", v)
	}
	r.Region = v
	return nil
}

func setRole(r *Request, v string) error {
	if !strings.HasPrefix(v, "arn:") {
		return fmt.Errorf("role %q is not an ARN", v)
	}
	r.RoleARN = v
	return nil
}

// regionRE is a region's syntax (it becomes part of a host name).
var regionRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// forms are the commands fedbr serves, by the command's base name. The flags are those the
// tools' own kubeconfig writers produce (aws eks update-kubeconfig, eksctl, the EKS docs'
// aws-iam-authenticator entries) that change nothing but the cluster, region and role; a
// profile, a credential cache, an external id or a config file would need the shared AWS
// configuration the manager does not read, and are refused.
var forms = map[string]form{
	"aws": {
		words:        []string{"eks", "get-token"},
		clusterFlags: "--cluster-name or --cluster-id",
		flags: []flagSpec{
			{names: []string{"--cluster-name"}, set: setCluster},
			{names: []string{"--cluster-id"}, set: setCluster},
			{names: []string{"--region"}, set: setRegion},
			{names: []string{"--role-arn"}, set: setRole},
			{names: []string{"--session-name"}, set: func(r *Request, v string) error { r.SessionName = v; return nil }},
			{names: []string{"--output"}, set: func(_ *Request, v string) error {
				if v != "json" {
					return fmt.Errorf("--output %q: only json is an ExecCredential", v)
				}
				return nil
			}},
		},
	},
	"aws-iam-authenticator": {
		words:        []string{"token"},
		clusterFlags: "-i or --cluster-id",
		flags: []flagSpec{
			{names: []string{"-i", "--cluster-id"}, set: setCluster},
			{names: []string{"-r", "--role"}, set: setRole},
			{names: []string{"--region"}, set: setRegion},
		},
	},
}

// Parse reads an exec plugin's command and arguments as one of the two EKS token commands:
//
//	aws [--region R] eks get-token --cluster-name NAME [--region R] [--role-arn ARN] [--session-name S] [--output json]
//	aws-iam-authenticator token -i NAME [-r ARN] [--region R]
//
// (--cluster-id instead of --cluster-name, --cluster-id and --role for -i and -r; a flag's
// value may follow it or an "="). The command is matched by its base name, since fedbr runs
// nothing: /usr/local/bin/aws is aws. Any other command is ErrNotEKS; an unknown, repeated or
// empty flag, a missing cluster, or other words are ErrArgs, naming them.
func Parse(command string, args []string) (Request, error) {
	name := path.Base(command)
	f, ok := forms[name]
	if !ok {
		return Request{}, fmt.Errorf("command %q: %w", command, ErrNotEKS)
	}
	var (
		r       Request
		words   []string
		unknown []string
		seen    = map[string]bool{}
	)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			words = append(words, a)
			continue
		}
		flag, value, hasValue := strings.Cut(a, "=")
		spec, ok := lookup(f, flag)
		if !ok {
			unknown = append(unknown, flag)
			if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && !slices.Contains(f.words, args[i+1]) {
				i++ // its value, most likely: not a word of the form
			}
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return Request{}, fmt.Errorf("%s: flag %s has no value: %w", name, flag, ErrArgs)
			}
			i++
			value = args[i]
		}
		if value == "" {
			return Request{}, fmt.Errorf("%s: flag %s is empty: %w", name, flag, ErrArgs)
		}
		key := spec.names[len(spec.names)-1]
		if seen[key] {
			return Request{}, fmt.Errorf("%s: flag %s is given twice: %w", name, flag, ErrArgs)
		}
		seen[key] = true
		if err := spec.set(&r, value); err != nil {
			return Request{}, fmt.Errorf("%s: %w: %w", name, err, ErrArgs)
		}
	}
	if len(unknown) > 0 {
		return Request{}, fmt.Errorf("%s: unknown flags %s (fedbr takes only %s): %w", name,
			strings.Join(unknown, ", "), strings.Join(flagNames(f), ", "), ErrArgs)
	}
	if !slices.Equal(words, f.words) {
		return Request{}, fmt.Errorf("%s: arguments %q, want %q and flags: %w", name, words, f.words, ErrArgs)
	}
	if r.Cluster == "" {
		return Request{}, fmt.Errorf("%s: no cluster (%s): %w", name, f.clusterFlags, ErrArgs)
	}
	if r.SessionName != "" && r.RoleARN == "" {
		return Request{}, fmt.Errorf("%s: --session-name without --role-arn: %w", name, ErrArgs)
	}
	return r, nil
}

func lookup(f form, flag string) (flagSpec, bool) {
	for _, s := range f.flags {
		if slices.Contains(s.names, flag) {
			return s, true
		}
	}
	return flagSpec{}, false
}

func flagNames(f form) []string {
	var names []string
	for _, s := range f.flags {
		names = append(names, s.names...)
	}
	return names
}
