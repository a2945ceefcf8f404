package aws_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/meta"
)

// The per-namespace steps' policy (docs/iam/fedbr-steps-per-namespace.json) allows the same
// actions as the account-wide one (TestIAMPoliciesAllowExactlyWhatTheCodeCalls), each limited
// to what carries the principal's namespace in meta.TagNamespace: created with it
// (aws:RequestTag), or carrying it (aws:ResourceTag). These tests hold that policy to the code
// the way iam_test.go holds the others: every resource it conditions is the kind the code
// touches with that action, every condition key is one AWS documents for the action, the tags
// it lets the steps remove are the ones the code removes, and every resource the code creates
// is created with the namespace tag.

// principalNamespace is the policy variable for the caller's namespace: the session tag EKS Pod
// Identity sets on every pod's credentials (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html,
// "List of session tags added by EKS Pod Identity"), or the same tag on a per-namespace IAM
// role, which IAM also gives as aws:PrincipalTag
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/id_session-tags.html).
const principalNamespace = "${aws:PrincipalTag/kubernetes-namespace}"

// stringList is an IAM policy value: one string or a list of them.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = stringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*l = many
	return nil
}

type statement struct {
	Sid       string
	Effect    string
	Action    stringList
	Resource  stringList
	Condition map[string]map[string]stringList
}

func policyStatements(t *testing.T, path string) []statement {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Statement []statement }
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p.Statement
}

// Kinds of resource a per-namespace statement may grant an action on.
const (
	// created: a resource the call creates; the request must tag it with the namespace.
	created = "created with aws:RequestTag/" + meta.TagNamespace + " = the principal's namespace"
	// owned: an existing resource; it must carry the namespace tag.
	owned = "carrying aws:ResourceTag/" + meta.TagNamespace + " = the principal's namespace"
	// source: CreateSnapshots' instance and its attached volumes, which fedbr does not tag
	// (TiKV's volumes are the EBS CSI driver's or restore-volumes'); granted unconditioned, as
	// AWS's own AWSEC2VssSnapshotPolicy does (docs/security.md says what that leaves open).
	source = "unconditioned (the snapshots' source)"
)

// perNamespaceGrants is, for every EC2 and EBS action the steps call that takes a resource,
// the resource types the policy grants it on and how. A new action the code calls fails the
// test until it is given its place here and in the policy.
var perNamespaceGrants = map[string]map[string]string{
	"ec2:CreateSnapshots":              {"snapshot": created, "instance": source, "volume": source},
	"ec2:CreateVolume":                 {"volume": created, "snapshot": owned},
	"ec2:CreateTags":                   {"snapshot": created, "volume": created},
	"ec2:DeleteSnapshot":               {"snapshot": owned},
	"ec2:DeleteVolume":                 {"volume": owned},
	"ec2:DeleteTags":                   {"snapshot": owned, "volume": owned},
	"ec2:EnableFastSnapshotRestores":   {"snapshot": owned},
	"ec2:DisableFastSnapshotRestores":  {"snapshot": owned},
	"ebs:ListSnapshotBlocks":           {"snapshot": owned},
	"ebs:ListChangedBlocks":            {"snapshot": owned},
	"s3:GetObject":                     {"s3-object": owned},
	"s3:PutObject":                     {"s3-object": owned},
	"s3:DeleteObject":                  {"s3-object": owned},
	"s3:ListBucket":                    {"s3-bucket": owned},
	"ec2:DescribeInstances":            nil,
	"ec2:DescribeVolumes":              nil,
	"ec2:DescribeSnapshots":            nil,
	"ec2:DescribeFastSnapshotRestores": nil,
	"cloudwatch:GetMetricStatistics":   nil,
}

// conditionKeys are the condition keys AWS documents for each action the per-namespace policy
// conditions (prefix match for the tag keys), with where it says so. A key not listed for an
// action would make IAM's answer depend on a key the request never has: a statement that never
// matches (the step gets AccessDenied) or, in a Deny, never denies.
var conditionKeys = map[string][]string{
	// AWSEC2VssSnapshotPolicy (AWS managed) conditions CreateSnapshots on aws:RequestTag for
	// the snapshot resource.
	"ec2:CreateSnapshots": {"aws:RequestTag/"},
	// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/supported-iam-actions-tagging.html
	// (aws:RequestTag on the volume); the source snapshot is part of CreateVolume's resource
	// context since https://aws.amazon.com/blogs/storage/enhancing-resource-level-permission-for-creating-an-amazon-ebs-volume-from-a-snapshot
	// (aws:ResourceTag on the snapshot).
	"ec2:CreateVolume": {"aws:RequestTag/", "aws:ResourceTag/"},
	// Tags given at creation are authorised as CreateTags with ec2:CreateAction
	// (supported-iam-actions-tagging.html).
	"ec2:CreateTags": {"ec2:CreateAction", "aws:RequestTag/"},
	// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/control-access-with-tags.html
	"ec2:DeleteSnapshot":              {"aws:ResourceTag/"},
	"ec2:DeleteVolume":                {"aws:ResourceTag/"},
	"ec2:DeleteTags":                  {"aws:ResourceTag/", "aws:TagKeys"},
	"ec2:EnableFastSnapshotRestores":  {"aws:ResourceTag/"},
	"ec2:DisableFastSnapshotRestores": {"aws:ResourceTag/"},
	// https://docs.aws.amazon.com/ebs/latest/userguide/ebsapi-permissions.html
	"ebs:ListSnapshotBlocks": {"aws:ResourceTag/"},
	"ebs:ListChangedBlocks":  {"aws:ResourceTag/"},
	"s3:ListBucket":          {"s3:prefix"},
}

// resourceKind names what an ARN in a statement's Resource covers.
func resourceKind(t *testing.T, arn string) string {
	t.Helper()
	switch {
	case arn == "arn:aws:s3:::BUCKET":
		return "s3-bucket"
	case strings.HasPrefix(arn, "arn:aws:s3:::BUCKET/"):
		return "s3-object"
	case strings.HasPrefix(arn, "arn:aws:ec2:*:*:") && strings.HasSuffix(arn, "/*"):
		return strings.TrimSuffix(strings.TrimPrefix(arn, "arn:aws:ec2:*:*:"), "/*")
	}
	t.Fatalf("resource %q: want arn:aws:ec2:*:*:<type>/*, arn:aws:s3:::BUCKET or arn:aws:s3:::BUCKET/…", arn)
	return ""
}

// condition is a statement's value for one operator and key, if any.
func (s statement) condition(op, key string) (stringList, bool) {
	v, ok := s.Condition[op][key]
	return v, ok
}

// TestPerNamespacePolicyConditionsEveryResource: every statement of the per-namespace policy
// grants each action only on the resource kinds perNamespaceGrants gives it, each with its
// namespace condition; every kind listed is granted (a missing one is an AccessDenied only
// production would show); Describe* and CloudWatch, which take no resource, are the only
// actions on "*"; every condition key is one AWS documents for every action of its statement.
func TestPerNamespacePolicyConditionsEveryResource(t *testing.T) {
	steps := stepActions(t, scanPackage(t, "."))
	for _, a := range steps {
		if _, ok := perNamespaceGrants[a]; !ok {
			t.Errorf("the steps call %s, which perNamespaceGrants does not place: say on what it is granted in %s and here", a, stepsNSPolicy)
		}
	}
	granted := map[string]map[string]bool{}
	for _, s := range policyStatements(t, stepsNSPolicy) {
		for _, a := range s.Action {
			want, ok := perNamespaceGrants[a]
			if !ok {
				t.Errorf("statement %s: %s is not an action perNamespaceGrants knows", s.Sid, a)
				continue
			}
			if want == nil {
				if !slices.Equal(s.Resource, stringList{"*"}) || len(s.Condition) != 0 {
					t.Errorf("statement %s: %s takes no resource: want Resource \"*\" without a condition, have %v %v", s.Sid, a, s.Resource, s.Condition)
				}
				continue
			}
			for _, r := range s.Resource {
				kind := resourceKind(t, r)
				how, ok := want[kind]
				if !ok {
					t.Errorf("statement %s grants %s on %s, which the steps never touch with it", s.Sid, a, r)
					continue
				}
				if granted[a] == nil {
					granted[a] = map[string]bool{}
				}
				granted[a][kind] = true
				checkGrant(t, s, a, r, kind, how)
			}
			checkAction(t, s, a)
			for op, keys := range s.Condition {
				for key := range keys {
					if !documented(a, key) {
						t.Errorf("statement %s: condition %s %s is not a key AWS documents for %s (conditionKeys)", s.Sid, op, key, a)
					}
				}
			}
		}
	}
	for a, kinds := range perNamespaceGrants {
		for kind := range kinds {
			if !granted[a][kind] {
				t.Errorf("%s grants %s on no %s: the steps would be refused it", stepsNSPolicy, a, kind)
			}
		}
	}
}

func documented(action, key string) bool {
	for _, k := range conditionKeys[action] {
		if key == k || (strings.HasSuffix(k, "/") && strings.HasPrefix(key, k)) {
			return true
		}
	}
	return false
}

// checkGrant checks one statement's grant of action on resource r (of kind) against how the
// policy must grant it.
func checkGrant(t *testing.T, s statement, action, r, kind, how string) {
	t.Helper()
	switch {
	case kind == "s3-object":
		if want := "arn:aws:s3:::BUCKET/" + principalNamespace + "/*"; r != want {
			t.Errorf("statement %s: %s on %s, want only %s", s.Sid, action, r, want)
		}
	case kind == "s3-bucket":
		if v, ok := s.condition("StringLike", "s3:prefix"); !ok || !slices.Equal(v, stringList{principalNamespace + "/*"}) {
			t.Errorf("statement %s: %s on the bucket without StringLike s3:prefix = %s/*: %v", s.Sid, action, principalNamespace, s.Condition)
		}
	case how == created:
		if v, ok := s.condition("StringEquals", "aws:RequestTag/"+meta.TagNamespace); !ok || !slices.Equal(v, stringList{principalNamespace}) {
			t.Errorf("statement %s: %s on %s without StringEquals aws:RequestTag/%s = %s: %v", s.Sid, action, r, meta.TagNamespace, principalNamespace, s.Condition)
		}
	case how == owned:
		if v, ok := s.condition("StringEquals", "aws:ResourceTag/"+meta.TagNamespace); !ok || !slices.Equal(v, stringList{principalNamespace}) {
			t.Errorf("statement %s: %s on %s without StringEquals aws:ResourceTag/%s = %s: %v", s.Sid, action, r, meta.TagNamespace, principalNamespace, s.Condition)
		}
	case how == source:
		if len(s.Condition) != 0 {
			t.Errorf("statement %s: %s on %s has conditions %v that perNamespaceGrants does not know of", s.Sid, action, r, s.Condition)
		}
	}
}

// checkAction checks what one statement must say of action whatever the resource.
func checkAction(t *testing.T, s statement, action string) {
	t.Helper()
	switch action {
	case "ec2:CreateTags":
		// Only tags given at creation, by the calls that create.
		v, _ := s.condition("StringEquals", "ec2:CreateAction")
		if want := creatingOperations(t); !slices.Equal(slices.Sorted(slices.Values(v)), want) {
			t.Errorf("statement %s: CreateTags for ec2:CreateAction %v, want exactly the creating calls %v", s.Sid, v, want)
		}
	case "ec2:DeleteTags":
		// Only the keys the steps remove, and never an empty list (DeleteTags without keys
		// removes every tag, the namespace tag too).
		v, _ := s.condition("ForAllValues:StringEquals", "aws:TagKeys")
		if want := untaggedKeys(t); !slices.Equal(slices.Sorted(slices.Values(v)), want) {
			t.Errorf("statement %s: DeleteTags of keys %v, want exactly the keys the steps remove %v", s.Sid, v, want)
		}
		if v, ok := s.condition("Null", "aws:TagKeys"); !ok || !slices.Equal(v, stringList{"false"}) {
			t.Errorf("statement %s: DeleteTags without Null aws:TagKeys = false: a call naming no key removes every tag", s.Sid)
		}
	}
}

// creatingOperations are the EC2 operations that create a resource among what the steps call
// (every ec2:Create* action but CreateTags), by operation name as ec2:CreateAction gives it.
func creatingOperations(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, a := range stepActions(t, scanPackage(t, ".")) {
		if op, ok := strings.CutPrefix(a, "ec2:Create"); ok && a != "ec2:CreateTags" {
			out = append(out, "Create"+op)
		}
	}
	sort.Strings(out)
	return out
}

// untaggedKeys are the tag keys the steps pass to UntagSnapshots and UntagVolumes (read off
// internal/br: each is a meta constant, resolved through knownTagKeys).
func untaggedKeys(t *testing.T) []string {
	t.Helper()
	knownTagKeys := map[string]string{"TagBackupPending": meta.TagBackupPending, "TagRestorePending": meta.TagRestorePending,
		"TagBackup": meta.TagBackup, "TagRestore": meta.TagRestore, "TagNamespace": meta.TagNamespace}
	keys := map[string]bool{}
	walkGo(t, "../../br", func(path string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := c.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "UntagSnapshots" && sel.Sel.Name != "UntagVolumes") || len(c.Args) != 3 {
				return true
			}
			lit, ok := c.Args[2].(*ast.CompositeLit)
			if !ok {
				t.Errorf("%s: %s's keys are not a literal list of meta constants: add them to the per-namespace policy's DeleteTags by hand and read them here", path, sel.Sel.Name)
				return true
			}
			for _, e := range lit.Elts {
				k, ok := e.(*ast.SelectorExpr)
				if !ok || knownTagKeys[k.Sel.Name] == "" {
					t.Errorf("%s: %s removes a key this test cannot resolve (%T): add it to knownTagKeys", path, sel.Sel.Name, e)
					continue
				}
				keys[knownTagKeys[k.Sel.Name]] = true
			}
			return true
		})
	})
	if len(keys) == 0 {
		t.Fatal("no UntagSnapshots or UntagVolumes call found under internal/br")
	}
	out := make([]string, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// walkGo parses every non-test Go file under root.
func walkGo(t *testing.T, root string, fn func(path string, f *ast.File)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		fn(path, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// namespaceTagTests are, for each package of the steps that calls a provider method creating a
// snapshot or volume, the test proving every such request carries meta.TagNamespace with the
// member's namespace (the provider passes the request's tags as TagSpecifications, which the
// per-namespace policy's aws:RequestTag condition reads).
var namespaceTagTests = map[string]string{
	"../../br/snapshot":       "TestEverySnapshotCarriesItsNamespace",
	"../../br/restorevolumes": "TestEveryVolumeCarriesItsNamespace",
}

// TestEveryCreateCarriesTheNamespaceTag: every function of the provider that sends a creating
// EC2 call sends tags with it (TagSpecifications); every package of the steps that reaches such
// a function has a test, named in namespaceTagTests, that checks the namespace tag on each of
// its create requests; and no package is listed that creates nothing.
func TestEveryCreateCarriesTheNamespaceTag(t *testing.T) {
	ops := creatingOperations(t)
	if len(ops) == 0 {
		t.Fatal("the steps create nothing: this test has nothing to hold")
	}
	// The provider: each function naming a creating operation's input sets TagSpecifications.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, af)
	}
	direct := scanFiles(t, parsed)
	creates := map[string]bool{} // ec2:<op>
	for _, op := range ops {
		creates["ec2:"+op] = true
	}
	for name, fi := range direct {
		for a := range fi.actions {
			if creates[a] && !fi.actions["tags-on-create"] {
				t.Errorf("internal/cloud/aws %s sends %s without TagSpecifications: the per-namespace policy refuses a create without the namespace tag", name, a)
			}
		}
	}

	// The steps: which packages reach a creating method of the provider.
	awsFuncs := closure(direct)
	creatingMethods := map[string]bool{}
	for m, acts := range awsFuncs {
		for a := range acts {
			if creates[a] && ast.IsExported(m) {
				creatingMethods[m] = true
			}
		}
	}
	callers := map[string]bool{}
	for _, root := range []string{"../../br", "../../cmd/br"} {
		walkGo(t, root, func(path string, f *ast.File) {
			ast.Inspect(f, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok && creatingMethods[sel.Sel.Name] {
						callers[filepath.Dir(path)] = true
					}
				}
				return true
			})
		})
	}
	if len(callers) == 0 {
		t.Fatalf("no package of the steps calls %v", creatingMethods)
	}
	for dir := range callers {
		name, ok := namespaceTagTests[dir]
		if !ok {
			t.Errorf("%s creates snapshots or volumes: name its test of the namespace tag on every create in namespaceTagTests", dir)
			continue
		}
		if !hasTestUsing(t, dir, name, "TagNamespace") {
			t.Errorf("%s has no %s that checks meta.TagNamespace", dir, name)
		}
	}
	for dir := range namespaceTagTests {
		if !callers[dir] {
			t.Errorf("namespaceTagTests lists %s, which creates nothing through the provider", dir)
		}
	}
}

// hasTestUsing says whether a _test.go file of dir declares func name and names ident in it.
func hasTestUsing(t *testing.T, dir, name, ident string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Name.Name != name || fd.Body == nil {
				continue
			}
			found := false
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == ident {
					found = true
				}
				return !found
			})
			return found
		}
	}
	return false
}
