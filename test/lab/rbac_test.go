package lab

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/testenv"
)

// notRequests are the RBAC rules no request uses, by the reason: verbs the API server checks
// without a request of that verb.
var notRequests = map[string]string{
	"dataplane.fedbr.io volumebackupmembers/status confirm":  "the members' status guard asks the authorizer for it (test/admission TestMemberStatusGuard)",
	"dataplane.fedbr.io volumerestoremembers/status confirm": "the members' status guard asks the authorizer for it (test/admission TestMemberStatusGuard)",
	"rbac.authorization.k8s.io roles bind":                   "checked when the agent creates the steps' RoleBinding with their Role (TestInstall's backup)",
	// The steps' Role (fedbr-br-step) grants them; RBAC refuses to let the agent create a Role
	// that grants more than the agent holds (its escalation check), so the agent holds them.
	"dataplane.fedbr.io volumebackupmembers get":  "the steps' Role grants it (RBAC's escalation check on the agent's Role create)",
	"dataplane.fedbr.io volumerestoremembers get": "the steps' Role grants it (RBAC's escalation check on the agent's Role create)",
}

// exercisedElsewhere are the rules the install journey's backup, restore and schedule do not
// reach, with the path that uses them and the test that runs it: a rule in neither the audit
// log nor these tables fails testRBACUsed, so a rule the code stopped using is found.
var exercisedElsewhere = map[string]string{
	" persistentvolumes delete":                        "a failed restore deletes the PVs it made (internal/agent/restoremember TestFailedRestoreCleansVolumes)",
	" persistentvolumeclaims delete":                   "a failed restore deletes the claims it made (internal/agent/restoremember TestFailedRestoreCleansVolumes)",
	" persistentvolumes patch":                         "a scratch restore's deletion sets its TidbCluster's retained PVs to reclaim Delete (internal/agent/restoremember TestScratchRestoreMakesAndRemovesItsTidbCluster)",
	"pingcap.com tidbclusters create":                  "a scratch restore creates its TidbCluster (internal/agent/restoremember TestScratchRestoreMakesAndRemovesItsTidbCluster)",
	"pingcap.com tidbclusters delete":                  "a scratch restore's deletion deletes its TidbCluster (internal/agent/restoremember TestScratchRestoreMakesAndRemovesItsTidbCluster)",
	" persistentvolumeclaims get":                      "backup discovery reads a TiKV pod's claim that its label does not list (internal/agent/backupmember discovery)",
	" pods get":                                        "the orphan sweeper reads the agent's own pod to record its Events on (internal/agent/sweeper TestSweepDeletesOrphansAfterGrace; first sweep 10 min after start)",
	"batch jobs delete":                                "a backup or restore deleted mid-run stops its snapshot or restore Job (test/daytwo, deleted with CreateSnapshots in flight)",
	"batch jobs patch":                                 "a member the agent failed while its pause holds has the pause Job stopped (internal/agent/backupmember TestFailedMemberStopsItsPause); the manager's asks reach the pause through the spec",
	"rbac.authorization.k8s.io roles update":           "a steps' Role that exists with other rules is updated (internal/agent/apply EnsureServiceAccount)",
	" events patch":                                    "an event recorded again is patched (its count or series)",
	"authentication.k8s.io tokenreviews create":        "--metrics-secure: the lab installs with metrics off (test/security TestMetricsNeedAuthorization)",
	"authorization.k8s.io subjectaccessreviews create": "--metrics-secure: the lab installs with metrics off (test/security TestMetricsNeedAuthorization)",
	"dataplane.fedbr.io volumebackupmembers get":       "the manager reads a member again when a phase move conflicts (internal/controller/federation MovePhase)",
	"dataplane.fedbr.io volumerestoremembers get":      "the manager reads a member again when a phase move conflicts (internal/controller/federation MovePhase)",
	"dataplane.fedbr.io volumebackupmembers delete":    "a deleted VolumeBackup's members are deleted (test/daytwo, deleted with CreateSnapshots in flight)",
	"dataplane.fedbr.io volumerestoremembers delete":   "a deleted VolumeRestore's members are deleted (internal/controller/volumerestore)",
	"federation.pingcap.com volumerestores create":     "a schedule with verify creates its drills (test/daytwo, a schedule that drills its backups)",
	"federation.pingcap.com volumerestores delete":     "a schedule with verify deletes its judged drills (test/daytwo, a schedule that drills its backups)",
	"federation.pingcap.com volumebackups delete":      "a schedule's retention deletes its oldest backups (test/daytwo, the schedule over three minutes)",
}

// informerList is the rule of a list verb that an informer's watch stands for: on this lab's
// API servers (1.37) informers start with a watch that sends the initial objects (WatchList),
// on those without it with a list, so a kind watched needs both.
func informerList(rule string, used map[string]int) bool {
	watch, ok := strings.CutSuffix(rule, " list")
	return ok && used[watch+" watch"] > 0
}

// testRBACUsed holds the charts' roles to what fedbr asked of the lab's API servers during
// TestInstall (their audit logs of fedbr-system's service accounts): no request was refused
// (a missing rule), and every rule of the agent's, the manager's data-plane and the manager's
// roles was used by a request, or is one the API server checks on its own (notRequests), or is
// listed with the test that uses it (exercisedElsewhere).
func testRBACUsed(t *testing.T, l *env.Lab) {
	st, err := controlplane.Load(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{}
	for _, c := range st.Clusters {
		dirs[c.Name] = c.Dir
	}
	sa := func(name string) string { return "system:serviceaccount:" + controlplane.AuditedNamespace + ":" + name }
	type part struct {
		user     string
		clusters []string
		roles    map[string][]string // file: role names
	}
	var planes, withManager []string
	for _, d := range l.DataPlanes {
		planes = append(planes, d.Cluster)
		if l.EKSAuth == nil || l.EKSAuth.Cluster != d.Cluster {
			withManager = append(withManager, d.Cluster) // the EKS-auth plane's manager is an IAM user
		}
	}
	for _, p := range []part{
		{user: sa("fedbr-agent"), clusters: planes, roles: map[string][]string{"agent_role.yaml": {"fedbr-agent", "fedbr-agent-namespaced", "fedbr-agent-self"},
			"leader_election_role.yaml": {"fedbr-leader-election"}}},
		{user: sa("fedbr-manager-remote"), clusters: withManager, roles: map[string][]string{"manager_dataplane_role.yaml": {"fedbr-manager-dataplane"}}},
		{user: sa("fedbr-manager"), clusters: []string{l.Control}, roles: map[string][]string{"manager_role.yaml": {"fedbr-manager"},
			"leader_election_role.yaml": {"fedbr-leader-election"}}},
	} {
		used, refused := map[string]int{}, map[string]int{}
		for _, c := range p.clusters {
			reqs, err := controlplane.ReadAudit(controlplane.AuditLogPath(dirs[c]), p.user)
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			for _, r := range reqs {
				if tool(r.UserAgent) {
					continue
				}
				if r.Code == 403 {
					refused[c+": "+r.Rule()+" in "+r.Namespace]++
					continue
				}
				used[r.Rule()]++
			}
		}
		if len(refused) > 0 {
			t.Errorf("%s was refused by RBAC (a rule missing from its roles): %v", p.user, slices.Sorted(maps.Keys(refused)))
		}
		if len(used) < 5 {
			t.Fatalf("%s: only %d rules used in the audit logs of %v: too little to judge", p.user, len(used), p.clusters)
		}
		for file, names := range p.roles {
			for _, rule := range roleRules(t, file, names...) {
				_, u := used[rule]
				u = u || informerList(rule, used)
				_, n := notRequests[rule]
				_, e := exercisedElsewhere[rule]
				if !u && !n && !e {
					t.Errorf("%s: rule %q of %s (%v) was not used by %s in TestInstall: drop it if the code no longer calls it, else list the test that does in exercisedElsewhere",
						strings.Join(p.clusters, ","), rule, file, names, p.user)
				}
			}
		}
		t.Logf("%s: %d rules used (%d requests in %v)", p.user, len(used), sum(used), p.clusters)
	}
}

// tool says whether a request came from one of fedbr's commands an SRE runs with the manager's
// data-plane kubeconfig (fedbr-describe/…, fedbr-preflight/…, fedbr-restore-create/…; restconfig
// names them so), not from the component the roles are for. Other clients of a component, such
// as client-go's leader election, carry client-go's default user agent and count.
func tool(userAgent string) bool {
	for _, c := range []string{"describe", "preflight", "restore-create"} {
		if strings.HasPrefix(userAgent, "fedbr-"+c+"/") {
			return true
		}
	}
	return false
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// roleRules are the rules of the roles names in config/rbac/file, one "group resource verb" per
// combination (resourceNames do not count).
func roleRules(t *testing.T, file string, names ...string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	found := 0
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		var r rbacv1.ClusterRole // a Role has the same shape
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !slices.Contains(names, r.Name) {
			continue
		}
		found++
		for _, rule := range r.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						out = append(out, g+" "+res+" "+v)
					}
				}
			}
		}
	}
	if found != len(names) {
		t.Fatalf("%s holds %d of the roles %v", file, found, names)
	}
	return out
}
