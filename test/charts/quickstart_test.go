package charts

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/policy"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
	"github.com/fedbr/fedbr/internal/testenv"
)

// TestQuickstartHelmCommandsRender renders each `helm install` of docs/quickstart-eks.md with
// exactly its chart, namespace and --set arguments (a loop's $c as the first data plane), and
// checks what the quickstart relies on; it also parses the page's JSON (the IAM trust
// policies) and checks that each statement's conditions name its own OIDC issuer.
func TestQuickstartHelmCommandsRender(t *testing.T) {
	root := testenv.RepoRoot()
	doc := filepath.Join(root, "docs", "quickstart-eks.md")
	var installs [][]string
	for _, block := range testenv.CodeBlocks(t, doc, "sh") {
		for _, cmd := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
			words, err := shellWords(strings.ReplaceAll(cmd, "$c", "tidb-usw2a"))
			if err != nil {
				t.Fatalf("%s: %q: %v", doc, cmd, err)
			}
			if len(words) > 2 && words[0] == "helm" && words[1] == "install" {
				installs = append(installs, words[2:])
			}
		}
	}
	rendered := map[string]objects{}
	for _, w := range installs {
		release, chartPath := w[0], w[1]
		args := []string{"template", release, chartPath}
		for i := 2; i < len(w); i++ {
			switch w[i] {
			case "--create-namespace":
			case "--kube-context":
				i++
			case "--namespace", "--set":
				args = append(args, w[i], w[i+1])
				i++
			default:
				t.Fatalf("%s: helm install %s: an argument the test does not know: %q", doc, release, w[i])
			}
		}
		cmd := exec.CommandContext(t.Context(), helmBinary(t), args...)
		cmd.Dir = root
		home := t.TempDir()
		cmd.Env = append(cmd.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: helm %s: %v\n%s", doc, strings.Join(args, " "), err, out.String())
		}
		rendered[filepath.Base(chartPath)] = parse(t, out.String())
	}
	a, m := rendered["fedbr-agent"], rendered["fedbr-manager"]
	if a == nil || m == nil {
		t.Fatalf("%s installs %d charts, want the agent's and the manager's", doc, len(rendered))
	}
	if sa := a.get(t, "ServiceAccount", "fedbr-agent", nil); sa.GetAnnotations()["eks.amazonaws.com/role-arn"] != "arn:aws:iam::111122223333:role/fedbr-agent" {
		t.Errorf("agent service account annotations %v", sa.GetAnnotations())
	}
	checkStepServiceAccounts(t, a, "arn:aws:iam::111122223333:role/fedbr-br", "tidb", "tidb-restore")
	checkPreflightPods(t, a, []string{"br", "preflight", "--region=us-west-2", "--storage=s3://acme-tidb-backups/tidb"}, "tidb", "tidb-restore")
	checkTidbClusterPreflight(t, a, "fedbr-agent", "--tidbcluster=tidb/basic")
	// The manager's group is bound in the watched namespaces only, and the manager watches them.
	groupBound := map[string]bool{}
	for _, obj := range a.all("RoleBinding") {
		var b rbacv1.RoleBinding
		if as(t, obj, &b); b.RoleRef.Name == "fedbr-manager-dataplane" &&
			slices.Contains(b.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "fedbr-manager"}) {
			groupBound[b.Namespace] = true
		}
	}
	for _, obj := range a.all("ClusterRoleBinding") {
		if obj.GetName() == "fedbr-manager-dataplane" {
			t.Error("the agent chart binds fedbr-manager-dataplane cluster-wide despite watchNamespaces")
		}
	}
	if !groupBound["tidb"] || !groupBound["tidb-restore"] || len(groupBound) != 2 {
		t.Errorf("group fedbr-manager bound to fedbr-manager-dataplane in %v, want tidb and tidb-restore", groupBound)
	}
	var manager appsv1.Deployment
	m.get(t, "Deployment", "fedbr-manager", &manager)
	if !slices.Contains(manager.Spec.Template.Spec.Containers[0].Args, "--dataplane-namespaces=tidb,tidb-restore") {
		t.Errorf("the manager does not watch the agents' namespaces: %v", manager.Spec.Template.Spec.Containers[0].Args)
	}
	if sa := m.get(t, "ServiceAccount", "fedbr-manager", nil); sa.GetAnnotations()["eks.amazonaws.com/role-arn"] != "arn:aws:iam::111122223333:role/fedbr-manager" {
		t.Errorf("manager service account annotations %v", sa.GetAnnotations())
	}
	var agent appsv1.Deployment
	a.get(t, "Deployment", "fedbr-agent", &agent)
	checkQuickstartWithinPolicy(t, doc, agent.Spec.Template.Spec.Containers[0].Args)

	policies := testenv.CodeBlocks(t, doc, "json")
	for i, p := range policies {
		var policy struct {
			Statement []struct {
				Principal struct{ Federated string }
				Action    string
				Condition map[string]map[string]string
			}
		}
		if err := json.Unmarshal([]byte(p), &policy); err != nil {
			t.Fatalf("%s json block %d: %v", doc, i, err)
		}
		if len(policy.Statement) == 0 {
			t.Fatalf("%s json block %d: no statement", doc, i)
		}
		for _, s := range policy.Statement {
			_, issuer, ok := strings.Cut(s.Principal.Federated, ":oidc-provider/")
			if !ok || s.Action != "sts:AssumeRoleWithWebIdentity" {
				t.Errorf("%s json block %d: statement %+v is not a web-identity trust", doc, i, s)
				continue
			}
			cond := s.Condition["StringEquals"]
			if cond[issuer+":sub"] == "" || cond[issuer+":aud"] != "sts.amazonaws.com" {
				t.Errorf("%s json block %d: the conditions %v do not name the issuer %s", doc, i, cond, issuer)
			}
		}
	}
}

// checkQuickstartWithinPolicy judges the members the manager would create for every
// VolumeBackup, schedule and VolumeRestore of the page (a schedule's at some tick) with the
// policy of the agents as the page installs them (args, their rendered command line): the page
// must not walk a reader into a refusal (a restore of another namespace's prefix, an unmapped
// namespace).
func checkQuickstartWithinPolicy(t *testing.T, doc string, args []string) {
	t.Helper()
	c := policy.Config{AgentImage: "fedbr", StepServiceAccount: job.ServiceAccountName, SameNamespace: true}
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--allow-namespaces="); ok {
			c.Namespaces = append(c.Namespaces, v)
		}
		if v, ok := strings.CutPrefix(a, "--allowed-storage="); ok {
			c.Storage = append(c.Storage, strings.Split(v, ",")...)
		}
		if a == "--allow-same-namespace=false" {
			c.SameNamespace = false
		}
	}
	pol, err := policy.New(c)
	if err != nil {
		t.Fatalf("the quickstart's agent policy: %v", err)
	}
	// meta is a member's, in data-plane namespace ns, created for control-plane namespace owner.
	meta := func(owner, ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{dpv1alpha1.LabelOwnerNamespace: owner}}
	}
	judge := func(what, owner, ns string, m policy.Member) {
		if vs := pol.Check(m); len(vs) != 0 {
			t.Errorf("%s: %s of namespace %s, member in %s, is refused by the agents the page installs: %s", doc, what, owner, ns, policy.Message(vs))
		}
	}
	unmarshal := func(block string, into any) {
		if err := yaml.Unmarshal([]byte(block), into); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
	}
	n := 0
	backup := func(what, owner string, spec fedv1alpha1.VolumeBackupSpec) {
		for _, cl := range spec.Clusters {
			judge(what, owner, cl.TCNamespace, policy.ForBackup(&dpv1alpha1.VolumeBackupMember{ObjectMeta: meta(owner, cl.TCNamespace),
				Spec: dpv1alpha1.VolumeBackupMemberSpec{TCNamespace: cl.TCNamespace, Template: fedv1alpha1.VolumeBackupMemberSpec{
					StorageProvider: spec.Template.MemberStorage(cl.K8sClusterName)}}}))
			n++
		}
	}
	for _, block := range testenv.CodeBlocks(t, doc, "yaml") {
		var obj metav1.PartialObjectMetadata
		unmarshal(block, &obj)
		switch obj.Kind {
		case "VolumeBackup":
			var b fedv1alpha1.VolumeBackup
			unmarshal(block, &b)
			backup("VolumeBackup "+b.Name, b.Namespace, b.Spec)
		case "VolumeBackupSchedule":
			var s fedv1alpha1.VolumeBackupSchedule
			unmarshal(block, &s)
			backup("VolumeBackupSchedule "+s.Name, s.Namespace, volumebackupschedule.NewBackup(&s, time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)).Spec)
		case "VolumeRestore":
			var r fedv1alpha1.VolumeRestore
			unmarshal(block, &r)
			for _, cl := range r.Spec.Clusters {
				judge("VolumeRestore "+r.Name, r.Namespace, cl.TCNamespace, policy.ForRestore(&dpv1alpha1.VolumeRestoreMember{ObjectMeta: meta(r.Namespace, cl.TCNamespace),
					Spec: dpv1alpha1.VolumeRestoreMemberSpec{TCNamespace: cl.TCNamespace, Backup: cl.Backup, Template: r.Spec.Template}}, nil))
				n++
			}
		}
	}
	if n == 0 {
		t.Errorf("%s: no member judged", doc)
	}
}

// shellWords splits a shell command line into words as sh does for the quickstart's commands:
// blanks separate words, single and double quotes group, a backslash outside quotes escapes
// the next character; a comment ends the line.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	runes := []rune(line)
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '\\' && i+1 < len(runes):
			i++
			cur.WriteRune(runes[i])
			inWord = true
		case r == '#' && !inWord:
			i = len(runes)
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errUnclosedQuote
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

var errUnclosedQuote = errors.New("unclosed quote")

func TestShellWords(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`helm install a ./b --set x=1`, []string{"helm", "install", "a", "./b", "--set", "x=1"}},
		{`  --set 'p.q\.r=s t' --set "u=v w"  # comment`, []string{"--set", `p.q\.r=s t`, "--set", "u=v w"}},
		{`a\ b c`, []string{"a b", "c"}},
		{`x='' y`, []string{"x=", "y"}},
		{``, nil},
	} {
		got, err := shellWords(tc.line)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("shellWords(%q) = %q, %v; want %q", tc.line, got, err, tc.want)
		}
	}
	if _, err := shellWords(`a 'b`); !errors.Is(err, errUnclosedQuote) {
		t.Errorf("an unclosed quote: %v", err)
	}
}
