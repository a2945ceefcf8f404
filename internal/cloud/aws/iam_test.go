package aws_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/agent/backupmember"
	"github.com/fedbr/fedbr/internal/agent/restoremember"
	"github.com/fedbr/fedbr/internal/agent/sweeper"
)

// The IAM policies in docs/iam are checked against the code, both ways: every AWS action the
// code can call is allowed (a missing one is an AccessDenied in production that no lab shows,
// since the AWS double does not evaluate IAM), and every allowed action is called (least
// privilege). The actions are read off the source: every AWS SDK operation is called with its
// <Operation>Input (a paginator or waiter takes one too), so the functions that name an input
// type, and the functions of the same package that call them, are the ones that call it.

const (
	stepsPolicy = "../../../docs/iam/fedbr-steps.json"
	// stepsNSPolicy is the steps' policy for one identity per namespace (EKS Pod Identity's
	// session tags, or per-namespace roles tagged kubernetes-namespace): the same actions,
	// each limited to what carries the principal's namespace (per_namespace_test.go).
	stepsNSPolicy = "../../../docs/iam/fedbr-steps-per-namespace.json"
	agentPolicy   = "../../../docs/iam/fedbr-agent.json"
	kmsPolicy     = "../../../docs/iam/fedbr-kms.json"
	awsDoc        = "../../../docs/aws.md"
)

// s3Actions maps the S3 operations fedbr calls to their IAM actions, which S3 names otherwise.
var s3Actions = map[string]string{
	"GetObject":     "s3:GetObject",
	"HeadObject":    "s3:GetObject",
	"PutObject":     "s3:PutObject",
	"DeleteObject":  "s3:DeleteObject",
	"ListObjectsV2": "s3:ListBucket",
}

// implied are actions IAM requires beyond the operation's own name.
var implied = map[string][]string{
	// Tags given at creation (TagSpecifications) need ec2:CreateTags on the new resource.
	"tags-on-create": {"ec2:CreateTags"},
	// Without s3:ListBucket on the bucket, S3 answers a GET of a missing key with 403
	// AccessDenied instead of 404 NoSuchKey, and "no such metadata yet" becomes an error.
	"s3:GetObject": {"s3:ListBucket"},
}

// funcInfo is what one function or method of a package names: SDK actions and the other
// functions of its package it calls (by name, methods and functions alike: an
// over-approximation, so it can only over-report).
type funcInfo struct {
	actions map[string]bool
	calls   map[string]bool
}

// scanPackage reads the non-test Go files of dir and returns, per function or method name, the
// IAM actions it may call, directly or through the package's other functions.
func scanPackage(t *testing.T, dir string) map[string]map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var parsed []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, af)
	}
	if len(parsed) == 0 {
		t.Fatalf("no Go source in %s", dir)
	}
	return closure(scanFiles(t, parsed))
}

var (
	sdkService = regexp.MustCompile(`^github\.com/aws/aws-sdk-go-v2/service/([a-z0-9]+)$`)
	paginator  = regexp.MustCompile(`^New(\w+)Paginator$`)
)

func scanFiles(t *testing.T, files []*ast.File) map[string]*funcInfo {
	t.Helper()
	funcs := map[string]*funcInfo{}
	for _, f := range files {
		services := map[string]string{} // local import name → service
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			m := sdkService.FindStringSubmatch(path)
			if m == nil {
				continue
			}
			name := m[1]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			services[name] = m[1]
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			fi := funcs[fd.Name.Name]
			if fi == nil {
				fi = &funcInfo{actions: map[string]bool{}, calls: map[string]bool{}}
				funcs[fd.Name.Name] = fi
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok {
						if svc, ok := services[x.Name]; ok {
							if op, ok := operation(n.Sel.Name); ok {
								fi.actions[iamAction(t, svc, op)] = true
							}
						}
					}
					if n.Sel.Name == "TagSpecifications" {
						fi.actions["tags-on-create"] = true
					}
				case *ast.CallExpr:
					switch fn := n.Fun.(type) {
					case *ast.Ident:
						fi.calls[fn.Name] = true
					case *ast.SelectorExpr:
						fi.calls[fn.Sel.Name] = true
					}
				}
				return true
			})
		}
	}
	return funcs
}

// operation is the SDK operation a service package's identifier names, if any.
func operation(name string) (string, bool) {
	if m := paginator.FindStringSubmatch(name); m != nil {
		return m[1], true
	}
	if op, ok := strings.CutSuffix(name, "Input"); ok && op != "" {
		return op, true
	}
	return "", false
}

func iamAction(t *testing.T, svc, op string) string {
	t.Helper()
	if svc != "s3" {
		return svc + ":" + op
	}
	a, ok := s3Actions[op]
	if !ok {
		t.Fatalf("the code calls S3 %s: add its IAM action to s3Actions (and to the policies)", op)
	}
	return a
}

// closure resolves every function's actions through the calls it makes, then expands implied
// actions.
func closure(funcs map[string]*funcInfo) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for name := range funcs {
		acts := map[string]bool{}
		seen := map[string]bool{}
		var visit func(string)
		visit = func(n string) {
			fi, ok := funcs[n]
			if !ok || seen[n] {
				return
			}
			seen[n] = true
			for a := range fi.actions {
				acts[a] = true
			}
			for c := range fi.calls {
				visit(c)
			}
		}
		visit(name)
		for a := range acts {
			for _, extra := range implied[a] {
				acts[extra] = true
			}
		}
		delete(acts, "tags-on-create")
		out[name] = acts
	}
	return out
}

func union(sets ...map[string]bool) []string {
	u := map[string]bool{}
	for _, s := range sets {
		for a := range s {
			u[a] = true
		}
	}
	out := make([]string, 0, len(u))
	for a := range u {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// policyActions reads the actions an IAM policy allows.
func policyActions(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Version   string
		Statement []struct {
			Effect   string
			Action   []string
			Resource any
		}
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if p.Version != "2012-10-17" {
		t.Errorf("%s: Version %q, want 2012-10-17", path, p.Version)
	}
	var out []string
	for _, s := range p.Statement {
		if s.Effect != "Allow" {
			t.Errorf("%s: a statement with Effect %q", path, s.Effect)
		}
		out = append(out, s.Action...)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func diff(want, have []string) (missing, extra []string) {
	for _, a := range want {
		if !slices.Contains(have, a) {
			missing = append(missing, a)
		}
	}
	for _, a := range have {
		if !slices.Contains(want, a) {
			extra = append(extra, a)
		}
	}
	return missing, extra
}

// calledMethods lists the exported functions of funcs that the non-test Go code under dirs
// calls (by name).
func calledMethods(t *testing.T, funcs map[string]map[string]bool, dirs ...string) []string {
	t.Helper()
	called := map[string]bool{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok && ast.IsExported(sel.Sel.Name) {
						if _, ok := funcs[sel.Sel.Name]; ok {
							called[sel.Sel.Name] = true
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(called) == 0 {
		t.Fatalf("no call of the provider found under %v", dirs)
	}
	out := make([]string, 0, len(called))
	for m := range called {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func setOf(as []string) map[string]bool {
	m := map[string]bool{}
	for _, a := range as {
		m[a] = true
	}
	return m
}

// methodsOf lists the methods of an interface type.
func methodsOf(iface any) []string {
	tp := reflect.TypeOf(iface).Elem()
	out := make([]string, tp.NumMethod())
	for i := range out {
		out[i] = tp.Method(i).Name
	}
	return out
}

func TestIAMPoliciesAllowExactlyWhatTheCodeCalls(t *testing.T) {
	awsFuncs := scanPackage(t, ".")
	steps := stepActions(t, awsFuncs)

	// The agent calls the provider only through these interfaces, and reads no storage (the
	// restore-volumes step reports what the agent needs of a backup): no agent package imports
	// the blob stores, the one route to S3.
	agentReadsNoStorage(t)
	var agentSets []map[string]bool
	for _, m := range slices.Concat(methodsOf((*sweeper.Cloud)(nil)), methodsOf((*restoremember.CloudVolumes)(nil)), methodsOf((*backupmember.Snapshots)(nil))) {
		acts, ok := awsFuncs[m]
		if !ok {
			t.Fatalf("the agent calls %s, which internal/cloud/aws does not define", m)
		}
		agentSets = append(agentSets, acts)
	}
	agent := union(agentSets...)

	for _, c := range []struct {
		policy string
		want   []string
	}{{stepsPolicy, steps}, {stepsNSPolicy, steps}, {agentPolicy, agent}} {
		missing, extra := diff(c.want, policyActions(t, c.policy))
		if len(missing) > 0 {
			t.Errorf("%s lacks %v, which the code calls", c.policy, missing)
		}
		if len(extra) > 0 {
			t.Errorf("%s allows %v, which the code never calls", c.policy, extra)
		}
	}

	// The KMS add-on grants KMS and nothing else.
	for _, a := range policyActions(t, kmsPolicy) {
		if !strings.HasPrefix(a, "kms:") {
			t.Errorf("%s allows %s: the KMS add-on must hold KMS actions only", kmsPolicy, a)
		}
	}

	// docs/aws.md explains every allowed action.
	doc, err := os.ReadFile(awsDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range union(map[string]bool{}, setOf(steps), setOf(agent)) {
		if !strings.Contains(string(doc), "`"+a+"`") {
			t.Errorf("docs/aws.md does not explain %s", a)
		}
	}
}

// stepActions are the IAM actions the steps call: the provider's methods they name, and the
// S3 store's every method (the metadata store writes, reads, lists and deletes).
func stepActions(t *testing.T, awsFuncs map[string]map[string]bool) []string {
	t.Helper()
	blobFuncs := scanPackage(t, "../blob")
	var stepSets []map[string]bool
	for _, m := range calledMethods(t, awsFuncs, "../../br", "../../cmd/br") {
		stepSets = append(stepSets, awsFuncs[m])
	}
	for _, m := range []string{"Put", "Get", "List", "Delete"} {
		acts, ok := blobFuncs[m]
		if !ok {
			t.Fatalf("internal/cloud/blob has no %s", m)
		}
		stepSets = append(stepSets, acts)
	}
	return union(stepSets...)
}

// blobPackage is the blob stores' import path: the only code that reaches S3.
const blobPackage = "github.com/fedbr/fedbr/internal/cloud/blob"

// agentReadsNoStorage fails when a package of the agent (internal/agent/..., its command)
// imports the blob stores: the agent's IAM policy has no S3 action.
func agentReadsNoStorage(t *testing.T) {
	t.Helper()
	for _, root := range []string{"../../agent", "../../cmd/agent"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, im := range f.Imports {
				if p, _ := strconv.Unquote(im.Path.Value); p == blobPackage {
					t.Errorf("%s imports %s: the agent reads no storage, and its IAM policy allows no S3 action", path, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The scanner itself: an action named only through a helper, a paginator, tags on create and an
// S3 operation are all found, and a function that reaches none has none.
func TestIAMScanFindsEveryRoute(t *testing.T) {
	const src = `package p
import (
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	s3x "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)
func (p *P) Public() { p.helper() }
func (p *P) helper() { _ = &ec2.DeleteSnapshotInput{} }
func (p *P) Paged() { _ = ec2.NewDescribeVolumesPaginator(nil, nil) }
func (p *P) Create() { in := &ec2.CreateVolumeInput{}; in.TagSpecifications = []types.TagSpecification{} }
func (p *P) Read() { _ = &s3x.GetObjectInput{} }
func (p *P) Nothing() { _ = types.VolumeTypeGp3 }
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := closure(scanFiles(t, []*ast.File{f}))
	for fn, want := range map[string][]string{
		"Public":  {"ec2:DeleteSnapshot"},
		"Paged":   {"ec2:DescribeVolumes"},
		"Create":  {"ec2:CreateTags", "ec2:CreateVolume"},
		"Read":    {"s3:GetObject", "s3:ListBucket"},
		"Nothing": nil,
	} {
		if have := union(got[fn]); !slices.Equal(have, want) && (len(have) != 0 || len(want) != 0) {
			t.Errorf("%s: %v, want %v", fn, have, want)
		}
	}
}
