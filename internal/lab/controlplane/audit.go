package controlplane

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// AuditedNamespace is the namespace whose service accounts' requests every lab API server
// records (where the charts install fedbr): the audit log shows what fedbr's components asked
// of each cluster, and what RBAC refused them.
const AuditedNamespace = "fedbr-system"

// AuditLog is a cluster's audit log, under its folder (AuditLogPath).
const AuditLog = "audit.log"

// auditPolicy records the metadata of every request a service account of AuditedNamespace
// makes (no bodies), and nothing else: when its response starts (a watch's, which completes only
// when the watch ends, and informers list by watching) and completes.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts:` + AuditedNamespace + `"]
  - level: None
`

// AuditLogPath is the audit log of the cluster whose folder is dir (Cluster.Dir).
func AuditLogPath(dir string) string { return filepath.Join(dir, "logs", AuditLog) }

// Request is one audited request: who asked for what, and the answer's code.
type Request struct {
	User        string
	UserAgent   string
	Verb        string
	APIGroup    string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	Code        int
}

// Rule is the RBAC rule shape a request needs: group, resource[/subresource], verb.
func (r Request) Rule() string {
	res := r.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	return r.APIGroup + " " + res + " " + r.Verb
}

// ReadAudit reads the requests of an audit log written with auditPolicy, each once (its first
// event past the request: a watch's start, another request's completion); user, when set,
// keeps only that user's. A request without an object (a discovery or health path) is skipped.
func ReadAudit(path, user string) ([]Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []Request
	seen := map[string]bool{} // auditIDs taken: a watch's start, another request's completion
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var ev struct {
			AuditID   string `json:"auditID"`
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
				APIGroup    string `json:"apiGroup"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if ev.ObjectRef == nil || (ev.Stage != "ResponseComplete" && ev.Stage != "ResponseStarted") || seen[ev.AuditID] ||
			(user != "" && ev.User.Username != user) {
			continue
		}
		seen[ev.AuditID] = true
		r := Request{User: ev.User.Username, UserAgent: ev.UserAgent, Verb: ev.Verb, APIGroup: ev.ObjectRef.APIGroup, Resource: ev.ObjectRef.Resource,
			Subresource: ev.ObjectRef.Subresource, Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name}
		if ev.ResponseStatus != nil {
			r.Code = ev.ResponseStatus.Code
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no audited request of %q", path, user)
	}
	slices.SortStableFunc(out, func(a, b Request) int { return strings.Compare(a.Rule(), b.Rule()) })
	return out, nil
}
