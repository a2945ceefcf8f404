// Package crd checks, before the manager starts, that the CustomResourceDefinitions of the
// kinds it watches in the control cluster are fedbr's.
//
// fedbr's control-plane kinds keep tidb-operator's group (federation.pingcap.com) and names, so
// that upstream manifests apply unchanged; a cluster that had BR Federation therefore already
// has CRDs of the same names, and a Helm install does not replace CRDs that exist. Against
// upstream's CRDs the manager would run with a schema that prunes what it writes (upstream has
// no status subresource and no status.observedGeneration) and without fedbr's admission, so it
// refuses to start instead and says what to do.
package crd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// Want is what fedbr needs of one CRD.
type Want struct {
	// Name is the CRD's name, <plural>.<group>.
	Name string
	// Version must be served.
	Version string
	// Field is a dotted path in that version's openAPIV3Schema that fedbr's CRD has and
	// upstream's does not.
	Field string
}

// Manager lists the CRDs of the kinds the manager watches in the control cluster. The field
// checked is status.observedGeneration, for all three: upstream's statuses never had it (its
// kinds have no status subresource either), fedbr's reconcile loop writes it on every
// successful reconcile, so a schema without it breaks the manager, and it is a Kubernetes API
// convention that will not be renamed or dropped as fedbr's own fields might be.
var Manager = []Want{
	{Name: "volumebackups." + fedv1alpha1.GroupVersion.Group, Version: fedv1alpha1.GroupVersion.Version, Field: "status.observedGeneration"},
	{Name: "volumerestores." + fedv1alpha1.GroupVersion.Group, Version: fedv1alpha1.GroupVersion.Version, Field: "status.observedGeneration"},
	{Name: "volumebackupschedules." + fedv1alpha1.GroupVersion.Group, Version: fedv1alpha1.GroupVersion.Version, Field: "status.observedGeneration"},
}

// Steps say what to do about a CRD that is missing or not fedbr's.
const (
	installSteps = "install fedbr's CRDs in the control cluster: kubectl apply --server-side --force-conflicts -f charts/fedbr-manager/crds/ " +
		"(the fedbr-manager chart's CRDs, copies of config/crd/bases/; helm install creates them only where none of that name exists), then restart the manager"
	replaceSteps = "tidb-operator's BR Federation CRDs (same group and names) look like this: stop tidb-operator's br-federation-manager, " +
		"then replace the CRDs with fedbr's: kubectl apply --server-side --force-conflicts -f charts/fedbr-manager/crds/ " +
		"(copies of config/crd/bases/; helm does not replace CRDs that exist), then restart the manager; " +
		"see \"Migrating from tidb-operator's BR Federation\" in docs/install.md for the objects upstream left"
)

// Check reads the CRDs of wants through cfg and returns every problem found, each naming its
// CRD and the steps to take; nil when all are fedbr's.
func Check(ctx context.Context, cfg *rest.Config, wants []Want) error {
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("client for the control cluster's CRDs: %w", err)
	}
	var errs []error
	for _, w := range wants {
		var crd apiextensionsv1.CustomResourceDefinition
		err := c.Get(ctx, client.ObjectKey{Name: w.Name}, &crd)
		switch {
		case apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("CRD %s is not installed in the control cluster: %s", w.Name, installSteps))
		case apierrors.IsForbidden(err):
			errs = append(errs, fmt.Errorf("reading CRD %s: %w (the manager's ClusterRole fedbr-manager needs get on customresourcedefinitions.apiextensions.k8s.io)", w.Name, err))
		case err != nil:
			errs = append(errs, fmt.Errorf("reading CRD %s: %w", w.Name, err))
		default:
			errs = append(errs, Problem(&crd, w))
		}
	}
	return errors.Join(errs...)
}

// Problem says why crd is not the CRD w wants, with the steps to take; nil when it is.
func Problem(crd *apiextensionsv1.CustomResourceDefinition, w Want) error {
	if crd.DeletionTimestamp != nil {
		return fmt.Errorf("CRD %s is being deleted: wait until it is gone, then %s", w.Name, installSteps)
	}
	var v *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == w.Version {
			v = &crd.Spec.Versions[i]
		}
	}
	switch {
	case v == nil || !v.Served:
		return fmt.Errorf("CRD %s does not serve version %s, which fedbr uses: %s", w.Name, w.Version, installSteps)
	case v.Schema == nil || !hasField(v.Schema.OpenAPIV3Schema, w.Field):
		return fmt.Errorf("CRD %s is not fedbr's: its %s schema has no %s, which fedbr's has; %s", w.Name, w.Version, w.Field, replaceSteps)
	case v.Subresources == nil || v.Subresources.Status == nil:
		return fmt.Errorf("CRD %s is not fedbr's: its %s has no status subresource, which fedbr's has; %s", w.Name, w.Version, replaceSteps)
	}
	return nil
}

// hasField says whether the dotted path is a property of schema.
func hasField(schema *apiextensionsv1.JSONSchemaProps, path string) bool {
	for _, name := range strings.Split(path, ".") {
		if schema == nil {
			return false
		}
		p, ok := schema.Properties[name]
		if !ok {
			return false
		}
		schema = &p
	}
	return true
}
