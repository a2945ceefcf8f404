// Package get is `fedbr get backups|restores|schedules`: the control plane's VolumeBackups,
// VolumeRestores or VolumeBackupSchedules, one line each, as kubectl get lists them but with
// the columns an SRE looks for (phase, size, commit ts, the schedule's last and next run). It
// reads only, and only the control plane.
package get

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/cmd/describe"
)

// Kind is one of the three listable kinds.
type Kind struct {
	// Name is the kind (VolumeBackup, …).
	Name string
	// Aliases are the words the command accepts for it; the first is the canonical one.
	Aliases []string
}

// Kinds are the listable kinds and their aliases: the plural and singular words, the CRD's
// short name, its kind and plural (as kubectl accepts them), and the plural with its group.
var Kinds = []Kind{
	{"VolumeBackup", []string{"backups", "backup", "vbk", "volumebackup", "volumebackups", "volumebackups.federation.pingcap.com"}},
	{"VolumeRestore", []string{"restores", "restore", "vrt", "volumerestore", "volumerestores", "volumerestores.federation.pingcap.com"}},
	{"VolumeBackupSchedule", []string{"schedules", "schedule", "vbks", "volumebackupschedule", "volumebackupschedules", "volumebackupschedules.federation.pingcap.com"}},
}

// KindOf resolves a word of the command line (case-insensitive) to its kind.
func KindOf(word string) (Kind, bool) {
	w := strings.ToLower(word)
	for _, k := range Kinds {
		if slices.Contains(k.Aliases, w) {
			return k, true
		}
	}
	return Kind{}, false
}

type options struct {
	conn          describe.Control
	allNamespaces bool
	output        string
	selector      string
	now           func() time.Time
}

// NewCmd returns `fedbr get`.
func NewCmd() *cobra.Command {
	o := options{now: time.Now}
	var valid []string
	for _, k := range Kinds {
		valid = append(valid, k.Aliases...)
	}
	cmd := &cobra.Command{
		Use:   "get backups|restores|schedules [NAME...]",
		Short: "List VolumeBackups, VolumeRestores or VolumeBackupSchedules of the control plane, one line each",
		Long: "get lists the control plane's VolumeBackups (phase, size, commit ts, age), VolumeRestores (phase,\n" +
			"commit ts, time taken, age) or VolumeBackupSchedules (schedule, phase, last backup, last and next\n" +
			"run, age), in one namespace or, with -A, in all; -o wide adds columns, -o yaml|json prints the\n" +
			"objects. The kind may also be written backup, vbk, volumebackup(s); restore, vrt,\n" +
			"volumerestore(s); schedule, vbks, volumebackupschedule(s). It reads the control plane only.",
		Args:      cobra.MinimumNArgs(1),
		ValidArgs: valid,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, ok := KindOf(args[0])
			if !ok {
				return fmt.Errorf("get %q: want backups, restores or schedules (or one of their aliases: fedbr get --help)", args[0])
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), k, args[1:])
		},
	}
	o.conn.AddFlags(cmd)
	f := cmd.Flags()
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list in every namespace (-n is ignored), with a NAMESPACE column")
	f.StringVarP(&o.output, "output", "o", "", "output format: wide (more columns), yaml or json (the objects, without managedFields); default a table")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector, e.g. tidb.pingcap.com/backup-schedule=nightly for a schedule's backups")
	return cmd
}

func (o *options) run(ctx context.Context, w io.Writer, k Kind, names []string) error {
	switch o.output {
	case "", "wide", "yaml", "json":
	default:
		return fmt.Errorf("--output %q: want wide, yaml or json", o.output)
	}
	if o.allNamespaces && len(names) > 0 {
		return errors.New("a name cannot be looked up in every namespace: give -n NAMESPACE instead of -A")
	}
	if len(names) > 0 && o.selector != "" {
		return errors.New("give names or --selector, not both")
	}
	sel, err := labels.Parse(o.selector)
	if err != nil {
		return fmt.Errorf("--selector %q: %w", o.selector, err)
	}
	c, ns, err := o.conn.Client()
	if err != nil {
		return err
	}
	if o.allNamespaces {
		ns = ""
	}
	var list client.ObjectList
	switch k.Name {
	case "VolumeBackup":
		list = &fedv1alpha1.VolumeBackupList{}
	case "VolumeRestore":
		list = &fedv1alpha1.VolumeRestoreList{}
	default:
		list = &fedv1alpha1.VolumeBackupScheduleList{}
	}
	missing, err := fetch(ctx, c, list, k, ns, names, sel)
	if err != nil {
		return err
	}
	if err := o.print(w, k, list, len(names) == 1 && len(missing) == 0); err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s %s not found in namespace %s", k.Name, strings.Join(missing, ", "), ns)
	}
	return nil
}

// fetch fills list: the named objects of namespace ns (and the names not found), or every
// object of ns ("" for all) that sel selects, sorted by namespace and name.
func fetch(ctx context.Context, c client.Client, list client.ObjectList, k Kind, ns string, names []string, sel labels.Selector) ([]string, error) {
	if len(names) == 0 {
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, fmt.Errorf("list %ss: %w", k.Name, err)
		}
		sortList(list)
		return nil, nil
	}
	var missing []string
	get := func(name string, obj client.Object) (bool, error) {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			missing = append(missing, name)
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %s %s/%s: %w", k.Name, ns, name, err)
		}
		return true, nil
	}
	for _, name := range names {
		switch l := list.(type) {
		case *fedv1alpha1.VolumeBackupList:
			var obj fedv1alpha1.VolumeBackup
			if ok, err := get(name, &obj); err != nil {
				return nil, err
			} else if ok {
				l.Items = append(l.Items, obj)
			}
		case *fedv1alpha1.VolumeRestoreList:
			var obj fedv1alpha1.VolumeRestore
			if ok, err := get(name, &obj); err != nil {
				return nil, err
			} else if ok {
				l.Items = append(l.Items, obj)
			}
		case *fedv1alpha1.VolumeBackupScheduleList:
			var obj fedv1alpha1.VolumeBackupSchedule
			if ok, err := get(name, &obj); err != nil {
				return nil, err
			} else if ok {
				l.Items = append(l.Items, obj)
			}
		}
	}
	return missing, nil
}

func sortList(list client.ObjectList) {
	less := func(ns1, n1, ns2, n2 string) bool {
		if ns1 != ns2 {
			return ns1 < ns2
		}
		return n1 < n2
	}
	switch l := list.(type) {
	case *fedv1alpha1.VolumeBackupList:
		sort.SliceStable(l.Items, func(i, j int) bool {
			return less(l.Items[i].Namespace, l.Items[i].Name, l.Items[j].Namespace, l.Items[j].Name)
		})
	case *fedv1alpha1.VolumeRestoreList:
		sort.SliceStable(l.Items, func(i, j int) bool {
			return less(l.Items[i].Namespace, l.Items[i].Name, l.Items[j].Namespace, l.Items[j].Name)
		})
	case *fedv1alpha1.VolumeBackupScheduleList:
		sort.SliceStable(l.Items, func(i, j int) bool {
			return less(l.Items[i].Namespace, l.Items[i].Name, l.Items[j].Namespace, l.Items[j].Name)
		})
	}
}

// print writes the list as a table, or its objects as YAML or JSON: one object when single
// (one name asked for and found), else a v1 List as kubectl prints one.
func (o *options) print(w io.Writer, k Kind, list client.ObjectList, single bool) error {
	if o.output == "yaml" || o.output == "json" {
		return printObjects(w, o.output, k, list, single)
	}
	to := TableOptions{AllNamespaces: o.allNamespaces, Wide: o.output == "wide"}
	now := o.now()
	switch l := list.(type) {
	case *fedv1alpha1.VolumeBackupList:
		return Backups(w, l.Items, to, now)
	case *fedv1alpha1.VolumeRestoreList:
		return Restores(w, l.Items, to, now)
	case *fedv1alpha1.VolumeBackupScheduleList:
		return Schedules(w, l.Items, to, now)
	}
	return fmt.Errorf("unknown list %T", list)
}

func printObjects(w io.Writer, format string, k Kind, list client.ObjectList, single bool) error {
	var items []client.Object
	switch l := list.(type) {
	case *fedv1alpha1.VolumeBackupList:
		for i := range l.Items {
			items = append(items, &l.Items[i])
		}
	case *fedv1alpha1.VolumeRestoreList:
		for i := range l.Items {
			items = append(items, &l.Items[i])
		}
	case *fedv1alpha1.VolumeBackupScheduleList:
		for i := range l.Items {
			items = append(items, &l.Items[i])
		}
	}
	gvk := fedv1alpha1.GroupVersion.WithKind(k.Name)
	for _, obj := range items {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		obj.SetManagedFields(nil)
	}
	var doc any = map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}, "items": items}
	if single && len(items) == 1 {
		doc = items[0]
	}
	var b []byte
	var err error
	if format == "json" {
		b, err = json.MarshalIndent(doc, "", "    ")
		b = append(b, '\n')
	} else {
		b, err = yaml.Marshal(doc)
	}
	if err != nil {
		return fmt.Errorf("encode the %ss: %w", k.Name, err)
	}
	_, err = w.Write(b)
	return err
}
