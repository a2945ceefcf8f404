// Package policy is the agent's operator-owned policy over what a member may make the agent
// run: which control-plane namespaces may act on which data-plane namespaces, under which S3
// prefixes their backups and restores may keep or read metadata, which images the step and
// warm-up pods may run, and whether they may use hostPath volumes, foreign service accounts,
// credential-choosing environment variables or privilege.
//
// Everything a member's template says reaches pods in the data plane, and whoever may create a
// VolumeBackup or VolumeRestore in the control plane writes that template. The policy comes from
// the agent's flags (Config), never from a member, and its defaults are safe: a member acts
// only in the data-plane namespace named like its owner's control-plane namespace, stores only
// under the S3 prefix of that name (a restore of another tenant's prefix fails), runs only
// the agent's own image as the steps' own service account, and gets no hostPath, no credential
// overrides and no privileged pod.
//
// The package is pure: Check judges a member (Member, built by ForBackup or ForRestore) and
// CheckPod a pod about to be built into a Job; each returns every rule broken, as Violations whose Rule is one of the
// Failed reasons in api/dataplane/v1alpha1 (NamespaceNotAllowedReason, …). The agent's
// planners take Check's verdict as an observed input and fail a refused member before any pod
// exists; CheckPod refuses each pod again when its Job is built (job.BuildGuarded).
//
// What the namespace and storage rules are worth: a member records its owner's namespace in
// its label dataplane.fedbr.io/owner-namespace, set by the manager. Anyone who may write members
// in the data plane can write that label too, so the rules hold only as long as members are
// writable by the manager's data-plane identity and the agent alone (docs/security.md).
package policy

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Config is the policy as the agent's flags give it.
type Config struct {
	// AgentImage is the agent's own image (--image): always allowed.
	AgentImage string
	// StepServiceAccount is the steps' own service account, which the agent creates with only
	// the rights a step needs: always allowed.
	StepServiceAccount string
	// SameNamespace lets a control-plane namespace act on the data-plane namespace of the same
	// name (--allow-same-namespace, on by default).
	SameNamespace bool
	// Namespaces are further mappings "CP=DP[,DP…]" (--allow-namespaces): the control-plane
	// namespaces matching the glob CP may act on the data-plane namespaces matching a DP glob.
	Namespaces []string
	// Images are glob patterns of further allowed images (--allowed-images).
	Images []string
	// HostPath allows hostPath volumes (--allow-host-path).
	HostPath bool
	// ServiceAccounts are glob patterns of further allowed service accounts, NAME (in any
	// namespace) or NAMESPACE/NAME (--allowed-service-accounts).
	ServiceAccounts []string
	// PrivilegedWarmup allows warm-ups that read block devices, in privileged containers
	// (--allow-privileged-warmup).
	PrivilegedWarmup bool
	// Env are glob patterns of further variables a template may set (--allowed-env), beyond
	// DefaultEnv. A sensitive variable (SensitiveEnv: AWS_*, HOME, proxies, CA files, GODEBUG,
	// LD_*, …) is allowed only by its exact name, never by a pattern.
	Env []string
	// VolumeTypes are further volume types (the field of a volume source: downwardAPI,
	// projected, csi, …) a template's volumes may have (--allowed-volume-types), beyond
	// DefaultVolumeTypes. hostPath is HostPath's.
	VolumeTypes []string
	// Storage are the S3 roots s3://BUCKET_GLOB/PREFIX a member's S3 storage must lie under
	// (--allowed-storage); {namespace}, a whole segment of PREFIX, stands for the member's
	// control-plane namespace. None: DefaultStorage.
	Storage []string
	// UpstreamBackups lets a restore read a backupmeta without fedbr's identity, as upstream
	// BR writes it (--allow-upstream-backups): its snapshots can be checked only for their
	// owner and source volume, so whoever may write into a storage prefix could name the
	// account's snapshots of any volume whose id they know.
	UpstreamBackups bool
}

// UpstreamBackups says whether restores may read backups without fedbr's identity.
func (p *Policy) UpstreamBackups() bool { return p.c.UpstreamBackups }

// Policy is a validated Config.
type Policy struct {
	c          Config
	namespaces []mapping
	// storage are the storage roots in force: Config.Storage, or DefaultStorage.
	storage []root
}

// NamespaceSegment, a whole segment of a storage root's prefix, stands for the member's
// control-plane namespace.
const NamespaceSegment = "{namespace}"

// DefaultStorage are the storage roots when --allowed-storage names none: any bucket, under the
// prefix named like the member's control-plane namespace. Which buckets the steps may reach at
// all is their identity's (IAM) business; which prefix of a bucket belongs to whom is the
// policy's, since every tenant's backups may share a bucket and one identity.
var DefaultStorage = []string{"s3://*/" + NamespaceSegment}

// root is one storage root: a bucket glob, and the prefix's segments ({namespace} as is).
type root struct {
	raw, bucket string
	prefix      []string
}

// parseRoot reads s3://BUCKET_GLOB[/PREFIX]. The prefix is literal (S3 keys are), its
// segments neither empty nor "." or "..", {namespace} a whole segment.
func parseRoot(r string) (root, error) {
	if strings.TrimSpace(r) == "" {
		return root{}, errors.New("--allowed-storage: an empty pattern")
	}
	rest, ok := strings.CutPrefix(r, "s3://")
	if !ok {
		return root{}, fmt.Errorf("--allowed-storage %q: want s3://BUCKET_GLOB[/PREFIX] (%s, a whole segment of PREFIX, stands for the member's control-plane namespace)", r, NamespaceSegment)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	out := root{raw: r, bucket: bucket}
	switch {
	case bucket == "":
		return root{}, fmt.Errorf("--allowed-storage %q: the bucket pattern is empty (* is any bucket)", r)
	case strings.Contains(bucket, NamespaceSegment):
		return root{}, fmt.Errorf("--allowed-storage %q: %s stands only for a whole segment of the prefix", r, NamespaceSegment)
	}
	if _, err := path.Match(bucket, ""); err != nil {
		return root{}, fmt.Errorf("--allowed-storage %q: bucket pattern %q is not a glob pattern (path.Match syntax: *, ?, [a-z], \\ escapes): %w", r, bucket, err)
	}
	if prefix == "" {
		return out, nil
	}
	segs, ok := segments(prefix)
	if !ok {
		return root{}, fmt.Errorf(`--allowed-storage %q: the prefix has an empty, "." or ".." segment (or a leading or trailing "/")`, r)
	}
	for _, s := range segs {
		switch {
		case s != NamespaceSegment && strings.Contains(s, NamespaceSegment):
			return root{}, fmt.Errorf("--allowed-storage %q: %s stands only for a whole segment of the prefix", r, NamespaceSegment)
		case strings.ContainsAny(s, "*?["):
			return root{}, fmt.Errorf("--allowed-storage %q: the prefix is literal (S3 keys are), not a glob; only the bucket is a pattern", r)
		}
	}
	out.prefix = segs
	return out, nil
}

// segments splits an S3 prefix at "/"; false when a segment is empty (a leading, trailing or
// doubled "/"), "." or "..": such a prefix names its location in more than one way (the steps
// clean a storage path, S3 does not), and a policy must not be fooled by a look-alike.
func segments(prefix string) ([]string, bool) {
	if prefix == "" {
		return nil, true
	}
	segs := strings.Split(prefix, "/")
	return segs, !slices.ContainsFunc(segs, func(s string) bool { return s == "" || s == "." || s == ".." })
}

func mustRoots(rs []string) []root {
	out := make([]root, 0, len(rs))
	for _, r := range rs {
		rt, err := parseRoot(r)
		if err != nil {
			panic(err)
		}
		out = append(out, rt)
	}
	return out
}

// mapping is one --allow-namespaces entry.
type mapping struct {
	cp string
	dp []string
}

// New validates c: every glob must be well formed, every mapping CP=DP[,DP…].
func New(c Config) (*Policy, error) {
	var errs []error
	if c.AgentImage == "" {
		errs = append(errs, errors.New("the agent's own image is empty"))
	}
	if c.StepServiceAccount == "" {
		errs = append(errs, errors.New("the steps' service account is empty"))
	}
	p := &Policy{c: c}
	for _, m := range c.Namespaces {
		cp, dps, ok := strings.Cut(m, "=")
		mp := mapping{cp: strings.TrimSpace(cp)}
		for _, dp := range strings.Split(dps, ",") {
			if dp = strings.TrimSpace(dp); dp != "" {
				mp.dp = append(mp.dp, dp)
			}
		}
		if !ok || mp.cp == "" || len(mp.dp) == 0 {
			errs = append(errs, fmt.Errorf("--allow-namespaces %q: want CONTROL_NAMESPACE=DATA_NAMESPACE[,DATA_NAMESPACE…] (globs allowed)", m))
			continue
		}
		errs = append(errs, globs("--allow-namespaces", append([]string{mp.cp}, mp.dp...))...)
		p.namespaces = append(p.namespaces, mp)
	}
	errs = append(errs, globs("--allowed-images", c.Images)...)
	errs = append(errs, globs("--allowed-service-accounts", c.ServiceAccounts)...)
	for _, sa := range c.ServiceAccounts {
		if strings.Count(sa, "/") > 1 {
			errs = append(errs, fmt.Errorf("--allowed-service-accounts %q: want NAME or NAMESPACE/NAME", sa))
		}
	}
	errs = append(errs, globs("--allowed-env", c.Env)...)
	for _, t := range c.VolumeTypes {
		switch {
		case t == "hostPath":
			errs = append(errs, errors.New("--allowed-volume-types hostPath: hostPath volumes are --allow-host-path's"))
		case !slices.Contains(volumeTypes, t):
			errs = append(errs, fmt.Errorf("--allowed-volume-types %q: not a volume type (one of %s)", t, strings.Join(volumeTypes, ", ")))
		}
	}
	if len(c.Storage) == 0 {
		p.storage = mustRoots(DefaultStorage)
	}
	for _, r := range c.Storage {
		rt, err := parseRoot(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.storage = append(p.storage, rt)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// globs checks patterns: path.Match syntax, not empty.
func globs(flag string, patterns []string) []error {
	var errs []error
	for _, g := range patterns {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, fmt.Errorf("%s: an empty pattern", flag))
			continue
		}
		if _, err := path.Match(g, ""); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: not a glob pattern (path.Match syntax: *, ?, [a-z], \\ escapes): %w", flag, g, err))
		}
	}
	return errs
}

// Default is the safe policy: the agent's own image and the steps' own service account, each
// control-plane namespace acting on its namesake only and storing under its own name's prefix
// (DefaultStorage), nothing else allowed.
func Default(agentImage, stepServiceAccount string) *Policy {
	return &Policy{c: Config{AgentImage: agentImage, StepServiceAccount: stepServiceAccount, SameNamespace: true}, storage: mustRoots(DefaultStorage)}
}

// Violation is one rule a member or a pod breaks.
type Violation struct {
	// Rule is the rule's name, a Failed reason of api/dataplane/v1alpha1.
	Rule string
	// Field is where the value is (spec.template.toolImage, spec.containers[0].image, …);
	// Value the value itself.
	Field, Value string
	// Why says what the rule refuses and how the operator allows it, if at all.
	Why string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %q: %s (%s)", v.Field, v.Value, v.Why, v.Rule)
}

// Reason is the condition reason of a refusal: the first rule broken.
func Reason(vs []Violation) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0].Rule
}

// Message is the condition message of a refusal: every violation, with its field and value.
func Message(vs []Violation) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return "refused by the agent's policy: " + strings.Join(parts, "; ")
}

// String summarises the policy for the agent's --dry-run.
func (p *Policy) String() string {
	var ns []string
	if p.c.SameNamespace {
		ns = append(ns, "same name")
	}
	for _, m := range p.c.Namespaces {
		ns = append(ns, "["+m+"]")
	}
	list := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return strings.Join(l, ", ")
	}
	return fmt.Sprintf("namespaces: %s; images: %s; service accounts: %s; hostPath %s; privileged warm-up %s; env: %s; volume types: %s; storage: %s; upstream backups %s",
		list(ns), list(append([]string{p.c.AgentImage}, p.c.Images...)), list(append([]string{p.c.StepServiceAccount}, p.c.ServiceAccounts...)),
		onOff(p.c.HostPath), onOff(p.c.PrivilegedWarmup), list(append(slices.Clone(DefaultEnv), p.c.Env...)),
		list(append(slices.Clone(DefaultVolumeTypes), p.c.VolumeTypes...)), list(p.storageRoots("")), onOff(p.c.UpstreamBackups))
}

func onOff(b bool) string {
	if b {
		return "allowed"
	}
	return "refused"
}

// namespaceAllowed says whether control-plane namespace cp may act on data-plane namespace dp.
func (p *Policy) namespaceAllowed(cp, dp string) bool {
	if p.c.SameNamespace && cp == dp {
		return true
	}
	for _, m := range p.namespaces {
		if match(m.cp, cp) && slices.ContainsFunc(m.dp, func(g string) bool { return match(g, dp) }) {
			return true
		}
	}
	return false
}

// imageAllowed says whether a pod may run image.
func (p *Policy) imageAllowed(image string) bool {
	return image == p.c.AgentImage || matchAny(p.c.Images, image)
}

// serviceAccountAllowed says whether a pod in namespace may run as name.
func (p *Policy) serviceAccountAllowed(namespace, name string) bool {
	return name == p.c.StepServiceAccount || matchAny(p.c.ServiceAccounts, name) || matchAny(p.c.ServiceAccounts, namespace+"/"+name)
}

func match(pattern, s string) bool {
	ok, err := path.Match(pattern, s)
	return ok && err == nil
}

func matchAny(patterns []string, s string) bool {
	return slices.ContainsFunc(patterns, func(g string) bool { return match(g, s) })
}

// storageRoots are the storage roots in force as written, with {namespace} replaced by owner
// unless owner is "".
func (p *Policy) storageRoots(owner string) []string {
	out := make([]string, len(p.storage))
	for i, r := range p.storage {
		out[i] = r.raw
		if owner != "" {
			out[i] = "s3://" + r.bucket
			if len(r.prefix) > 0 {
				out[i] += "/" + strings.Join(r.expand(owner), "/")
			}
		}
	}
	return out
}

// expand is the root's prefix for control-plane namespace owner.
func (r root) expand(owner string) []string {
	out := slices.Clone(r.prefix)
	for i, s := range out {
		if s == NamespaceSegment {
			out[i] = owner
		}
	}
	return out
}

// storageAllowed says whether control-plane namespace owner may use the S3 location bucket
// with the prefix segments prefix: a root's bucket glob matches and its prefix is prefix's
// first segments ("tenant-a" is not under "tenant").
func (p *Policy) storageAllowed(owner, bucket string, prefix []string) bool {
	return slices.ContainsFunc(p.storage, func(r root) bool {
		rp := r.expand(owner)
		return match(r.bucket, bucket) && len(prefix) >= len(rp) && slices.Equal(prefix[:len(rp)], rp)
	})
}
