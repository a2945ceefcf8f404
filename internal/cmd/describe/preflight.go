package describe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agentlease"
	"github.com/fedbr/fedbr/internal/checklist"
	"github.com/fedbr/fedbr/internal/crd"
	"github.com/fedbr/fedbr/internal/plane"
)

// ManagerDataPlaneRules are what the manager's identity does in every data plane: the rules of
// the ClusterRole fedbr-manager-dataplane (config/rbac/manager_dataplane_role.yaml, held to
// this by a test). preflight asks each plane whether the planes kubeconfig's identity may.
var ManagerDataPlaneRules = []rbacv1.PolicyRule{
	{APIGroups: []string{dpv1alpha1.GroupVersion.Group}, Resources: []string{"volumebackupmembers", "volumerestoremembers"},
		Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
}

// MinKubernetesMinor is the oldest Kubernetes 1.x the charts work on: ValidatingAdmissionPolicy
// v1 (docs/compatibility.md).
const MinKubernetesMinor = 30

// Result is one preflight check: where (control, or a data plane's context), what, and its
// error (nil: passed).
type Result struct {
	Where, What string
	Err         error
}

// NewPreflightCmd returns `fedbr preflight`.
func NewPreflightCmd() *cobra.Command {
	var c conn
	var namespaces []string
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check that the control plane and every data plane are ready for fedbr, one line per check",
		Long: `preflight checks, with your kubeconfig for the control plane and the manager's data-plane
kubeconfig (from its Secret, or --planes-kubeconfig) for each data plane, what fedbr needs
before a first backup:

  control  fedbr's CRDs are installed and are fedbr's (not tidb-operator's BR Federation CRDs)
  control  the data planes' kubeconfig loads (no credential plugin run, no local file named)
  plane    its context loads, its API server answers, and runs Kubernetes 1.30 or later
  plane    a static token is a bound one with 7 days or more left (not a token Secret's,
           which never expires): the manager's tokens are rotated before they expire
  plane    the member CRDs (dataplane.fedbr.io/v1alpha1) are served
  plane    the kubeconfig's identity may do what the manager does there (the ClusterRole
           fedbr-manager-dataplane), asked of the plane's API server: cluster-wide, or in each
           of --dataplane-namespaces (the manager's own, where the agent chart's
           watchNamespaces binds the role per namespace)
  plane    an agent runs for it: the Lease fedbr-agent-<context name> in --agent-namespace is
           held and renewed (the agent's leader election, with its --k8s-cluster-name equal to
           the context's name; the agent chart lets the manager's identity read that Lease)

It exits non-zero when a check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			results := c.preflight(cmd.Context(), namespaces, c.agentNamespace)
			return Report(cmd.OutOrStdout(), results)
		},
	}
	c.flags(cmd)
	cmd.Flags().StringSliceVar(&namespaces, "dataplane-namespaces", nil, "the manager's --dataplane-namespaces (its chart's dataPlanes.namespaces): check its rights in each (default: cluster-wide)")
	return cmd
}

// Report prints one line per result and fails when any failed.
func Report(w io.Writer, results []Result) error {
	l := checklist.List{WhereWidth: 10}
	for _, r := range results {
		l.Checks = append(l.Checks, checklist.Check{Where: r.Where, What: r.What, Err: r.Err})
	}
	if err := l.Print(w); err != nil {
		return err
	}
	if failed := l.Failed(); failed > 0 {
		return fmt.Errorf("preflight: %d of %d checks failed", failed, len(results))
	}
	return nil
}

func (c *conn) preflight(ctx context.Context, namespaces []string, agentNamespace string) []Result {
	var out []Result
	cfg, _, err := c.Config()
	if err != nil {
		return append(out, Result{"control", "kubeconfig loads", err})
	}
	out = append(out, Result{"control", "fedbr's CRDs installed", crd.Check(ctx, cfg, crd.Manager)})
	control, _, err := c.Client()
	if err != nil {
		return append(out, Result{"control", "client", err})
	}
	raw, err := c.planesConfig(ctx, control)
	if err != nil {
		return append(out, Result{"control", "data planes' kubeconfig", err})
	}
	kc, err := clientcmd.Load(raw)
	if err == nil && len(kc.Contexts) == 0 {
		err = errors.New("no context: want one per data plane, named as its k8sClusterName")
	}
	out = append(out, Result{"control", "data planes' kubeconfig loads", err})
	if err != nil {
		return out
	}
	names := make([]string, 0, len(kc.Contexts))
	for n := range kc.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		rc, err := plane.Config(kc, name, "preflight")
		if err != nil {
			out = append(out, Result{name, "context loads", err})
			continue
		}
		if tok, ok := plane.ContextToken(kc, name); ok {
			out = append(out, Result{name, "token bound, 7 days or more left", tok.Check(time.Now())})
		}
		rc.Timeout = c.Timeout
		kube, err := kubernetes.NewForConfig(rc)
		if err != nil {
			out = append(out, Result{name, "context loads", err})
			continue
		}
		out = append(out, PlaneChecks(ctx, name, kube, namespaces, agentNamespace)...)
	}
	return out
}

// PlaneChecks are the checks of one data plane through kube, built from the planes
// kubeconfig's context name: reachable and recent enough (the later checks are skipped when it
// does not answer), the member CRDs served, the manager's rights (in namespaces, else
// cluster-wide), and an agent running for the plane (its Lease in agentNamespace).
func PlaneChecks(ctx context.Context, name string, kube kubernetes.Interface, namespaces []string, agentNamespace string) []Result {
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		return []Result{{name, "API server answers", err}}
	}
	out := []Result{{name, "API server answers", nil}}
	minor, err := strconv.Atoi(strings.TrimSuffix(v.Minor, "+"))
	switch {
	case err != nil || v.Major != "1":
		err = fmt.Errorf("version %s.%s not understood", v.Major, v.Minor)
	case minor < MinKubernetesMinor:
		err = fmt.Errorf("version %s (%s): the agent's chart needs 1.%d or later (ValidatingAdmissionPolicy v1)", v.GitVersion, name, MinKubernetesMinor)
	}
	out = append(out, Result{name, "Kubernetes 1." + strconv.Itoa(MinKubernetesMinor) + " or later", err})
	gv := dpv1alpha1.GroupVersion.String()
	served, err := kube.Discovery().ServerResourcesForGroupVersion(gv)
	if err == nil {
		var missing []string
		for _, r := range []string{"volumebackupmembers", "volumerestoremembers"} {
			if !slices.ContainsFunc(served.APIResources, func(a metav1.APIResource) bool { return a.Name == r }) {
				missing = append(missing, r)
			}
		}
		if len(missing) > 0 {
			err = fmt.Errorf("%s not served: install the agent's chart (its CRDs)", strings.Join(missing, ", "))
		}
	} else {
		err = fmt.Errorf("%s not served: install the agent's chart (its CRDs): %w", gv, err)
	}
	out = append(out, Result{name, "member CRDs served", err})
	what := "the manager's rights (fedbr-manager-dataplane)"
	if len(namespaces) > 0 {
		what += " in " + strings.Join(namespaces, ", ")
	}
	out = append(out, Result{name, what, managerRights(ctx, kube, namespaces)})
	agent := "an agent runs (Lease " + agentNamespace + "/" + agentlease.Name(name) + ")"
	st, err := agentlease.Check(ctx, kube.CoordinationV1(), agentNamespace, name, time.Now())
	if err == nil {
		agent += ", held by " + st.Holder
	}
	out = append(out, Result{name, agent, err})
	return out
}

// managerRights asks the plane whether the identity kube authenticates as may do every verb of
// ManagerDataPlaneRules in each of namespaces, or cluster-wide (none), as the agent chart binds
// the ClusterRole.
func managerRights(ctx context.Context, kube kubernetes.Interface, namespaces []string) error {
	where := namespaces
	if len(where) == 0 {
		where = []string{""}
	}
	var denied []string
	for _, ns := range where {
		for _, rule := range ManagerDataPlaneRules {
			for _, res := range rule.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, verb := range rule.Verbs {
					review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
						ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: rule.APIGroups[0], Resource: resource, Subresource: sub, Verb: verb}}}
					got, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
					if err != nil {
						return fmt.Errorf("ask the API server: %w", err)
					}
					if !got.Status.Allowed && ns == "" {
						denied = append(denied, verb+" "+res)
					} else if !got.Status.Allowed {
						denied = append(denied, verb+" "+res+" in "+ns)
					}
				}
			}
		}
	}
	if len(denied) > 0 {
		return fmt.Errorf("the identity may not %s: bind the ClusterRole fedbr-manager-dataplane to it (the agent chart's managerAccess; with watchNamespaces it is bound there only, so pass the manager's --dataplane-namespaces)", strings.Join(denied, ", "))
	}
	return nil
}
