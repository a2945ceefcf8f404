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

	rbacv1 "k8s.io/api/rbac/v1"

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
	groupBound := false
	for _, obj := range a.all("ClusterRoleBinding") {
		var b rbacv1.ClusterRoleBinding
		if as(t, obj, &b); b.RoleRef.Name == "fedbr-manager-dataplane" {
			groupBound = groupBound || slices.Contains(b.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "fedbr-manager"})
		}
	}
	if !groupBound {
		t.Error("the agent chart does not bind group fedbr-manager to ClusterRole fedbr-manager-dataplane")
	}
	if sa := m.get(t, "ServiceAccount", "fedbr-manager", nil); sa.GetAnnotations()["eks.amazonaws.com/role-arn"] != "arn:aws:iam::111122223333:role/fedbr-manager" {
		t.Errorf("manager service account annotations %v", sa.GetAnnotations())
	}

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
