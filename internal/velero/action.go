package velero

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/sirupsen/logrus"
	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"github.com/vmware-tanzu/velero/pkg/plugin/velero"
	riav2 "github.com/vmware-tanzu/velero/pkg/plugin/velero/restoreitemaction/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

const (
	// ActionName is the plugin name of the action for the Cluster API
	// resources, whatever their labels.
	ActionName = "initlock.dev/restore-owner-references"
	// LabelledActionName is the plugin name of the action for the resources
	// taken only with a label, by default ConfigMaps and Secrets that
	// belong to a Cluster.
	LabelledActionName = "initlock.dev/restore-owner-references-labelled"
)

// Environment variables read by ConfigFromEnv, deprecated in favour of the
// settings ConfigMap (see Settings). Velero starts its plugins with its own
// environment, so they are set on the Velero server container.
const (
	// EnvResources lists the resources the first action applies to, comma
	// separated, as Velero's --include-resources takes them: plural names,
	// group-qualified, with * matching any part (default "*.cluster.x-k8s.io",
	// every Cluster API group).
	EnvResources = "INITLOCK_VELERO_RESOURCES"
	// EnvLabelledResources lists the resources the second action applies to
	// (default "configmaps,secrets"); "-" means none.
	EnvLabelledResources = "INITLOCK_VELERO_LABELLED_RESOURCES"
	// EnvLabelSelector is the label selector of the second action (default
	// "cluster.x-k8s.io/cluster-name", the label is present).
	EnvLabelSelector = "INITLOCK_VELERO_LABEL_SELECTOR"
)

// Config says which restored items the actions record owners for.
type Config struct {
	// Resources are taken whatever their labels.
	Resources []string
	// LabelledResources are taken when they match LabelSelector.
	LabelledResources []string
	// LabelSelector selects among LabelledResources.
	LabelSelector string
}

// DefaultConfig returns the configuration used when no variable is set.
func DefaultConfig() Config {
	return Config{
		Resources:         []string{"*." + capi.Group},
		LabelledResources: []string{"configmaps", "secrets"},
		LabelSelector:     capi.ClusterNameLabel,
	}
}

// ConfigFromEnv returns DefaultConfig with the values set in the
// environment (read with getenv; nil means os.Getenv) replacing its own.
// The variables are deprecated: Settings reads the settings ConfigMap
// first.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	return parseConfig(getenv, envNames)
}

func splitList(v string) []string {
	if strings.TrimSpace(v) == "-" {
		return nil
	}
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Action is the RestoreItemAction. Its two instances differ only in the
// resources they apply to.
type Action struct {
	name     string
	selector velero.ResourceSelector
	log      logrus.FieldLogger
}

var _ riav2.RestoreItemAction = (*Action)(nil)

// NewAction returns the action for cfg.Resources (labelled false) or for
// cfg.LabelledResources and cfg.LabelSelector (labelled true). log may be
// nil.
func NewAction(cfg Config, labelled bool, log logrus.FieldLogger) *Action {
	if log == nil {
		l := logrus.New()
		l.SetOutput(discard{})
		log = l
	}
	name, sel := ActionName, velero.ResourceSelector{IncludedResources: cfg.Resources}
	if labelled {
		name, sel = LabelledActionName, velero.ResourceSelector{IncludedResources: cfg.LabelledResources, LabelSelector: cfg.LabelSelector}
	}
	if len(sel.IncludedResources) == 0 {
		// An empty list would match everything; match nothing instead.
		sel.IncludedResources = []string{"none.initlock.dev"}
	}
	return &Action{name: name, selector: sel, log: log}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// Name returns ActionName or LabelledActionName. Velero does not call it
// through the plugin RPC: it uses the name the action is registered under.
func (a *Action) Name() string { return a.name }

// AppliesTo returns the resources and the label selector of the action.
func (a *Action) AppliesTo() (velero.ResourceSelector, error) { return a.selector, nil }

// Execute records the ownerReferences of input.ItemFromBackup in the
// relink.Annotation of input.Item.
func (a *Action) Execute(input *velero.RestoreItemActionExecuteInput) (*velero.RestoreItemActionExecuteOutput, error) {
	if input == nil || input.Item == nil || input.ItemFromBackup == nil {
		return nil, errors.New("restore item action called without the item and the item from the backup")
	}
	backedUp, err := meta.Accessor(input.ItemFromBackup)
	if err != nil {
		return nil, fmt.Errorf("reading the backed-up item: %w", err)
	}
	refs := backedUp.GetOwnerReferences()
	unmark := liveMarks(input.Item)
	if len(refs) == 0 && len(unmark) == 0 {
		return velero.NewRestoreItemActionExecuteOutput(input.Item), nil
	}
	item := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(input.Item.UnstructuredContent())}
	name := describe(item)
	if len(unmark) > 0 {
		annotations := item.GetAnnotations()
		for _, k := range unmark {
			delete(annotations, k)
		}
		item.SetAnnotations(annotations)
		a.log.WithField("item", name).WithField("annotations", unmark).Info("Took off the marks of the live lock the backup held")
	}
	if len(refs) == 0 {
		return velero.NewRestoreItemActionExecuteOutput(item), nil
	}
	owners := relink.FromOwnerReferences(refs)
	annotations := item.GetAnnotations()
	if prev, ok := annotations[relink.Annotation]; ok {
		pending, err := relink.Decode(prev)
		if err != nil {
			return nil, fmt.Errorf("%s: %w; remove or correct the annotation in the backup (or with a restore resource modifier) and restore again", name, err)
		}
		owners = relink.Merge(owners, pending)
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[relink.Annotation] = relink.Encode(owners)
	item.SetAnnotations(annotations)
	a.log.WithField("item", name).WithField("owners", len(owners)).Info("Recorded the backed-up owner references for the relinker")
	return velero.NewRestoreItemActionExecuteOutput(item), nil
}

// lockMarks are the annotations that describe a live lock at one moment
// and let a delete of it through or start its orphan's grace period
// (docs/design.md, section 1): the release mark and when its release
// began, since when its Cluster has been missing, and clusterctl move's
// delete-for-move. A restored lock, created anew or written over the live
// one (--existing-resource-policy=update), carries none of them.
var lockMarks = []string{
	"initlock.dev/releasable",
	"initlock.dev/release-started",
	"initlock.dev/cluster-absent-since",
	"clusterctl.cluster.x-k8s.io/delete-for-move",
}

// heldRecord is the lock guard's test of a lock's record
// (config/protection/lock-guard.yaml): a machineName key, in any case, each
// letter written as itself or as a JSON escape (\u006d for m), as Go's
// decoder reads it.
var heldRecord = regexp.MustCompile(`(?i)"(?:m|\\u00[46]d)(?:a|\\u00[46]1)(?:c|\\u00[46]3)(?:h|\\u00[46]8)(?:i|\\u00[46]9)(?:n|\\u00[46]e)(?:e|\\u00[46]5)(?:n|\\u00[46]e)(?:a|\\u00[46]1)(?:m|\\u00[46]d)(?:e|\\u00[46]5)"\s*:`)

// liveMarks returns the lockMarks that item, when it is shaped like an init
// lock the lock guard holds (a ConfigMap named after its cluster-name label
// with "-lock", whose data key lock-information holds a record with a
// machineName: heldRecord), carries. Another provider's lock of the same
// name and key (KubeKey's record names no Machine) is left as it is.
func liveMarks(item runtime.Unstructured) []string {
	u, ok := item.(*unstructured.Unstructured)
	if !ok || u.GetKind() != "ConfigMap" || u.GroupVersionKind().Group != "" {
		return nil
	}
	cluster, ok := u.GetLabels()["cluster.x-k8s.io/cluster-name"]
	if !ok || u.GetName() != cluster+"-lock" {
		return nil
	}
	if record, ok, _ := unstructured.NestedString(u.Object, "data", "lock-information"); !ok || !heldRecord.MatchString(record) {
		return nil
	}
	var found []string
	for _, k := range lockMarks {
		if _, ok := u.GetAnnotations()[k]; ok {
			found = append(found, k)
		}
	}
	return found
}

func describe(u *unstructured.Unstructured) string {
	kind := strings.ToLower(u.GetKind())
	if gv := u.GroupVersionKind().Group; gv != "" {
		kind += "." + gv
	}
	if ns := u.GetNamespace(); ns != "" {
		return fmt.Sprintf("%s %s/%s", kind, ns, u.GetName())
	}
	return fmt.Sprintf("%s %s", kind, u.GetName())
}

// Progress is not supported: the action is synchronous.
func (a *Action) Progress(string, *velerov1.Restore) (velero.OperationProgress, error) {
	return velero.OperationProgress{}, riav2.AsyncOperationsNotSupportedError()
}

// Cancel does nothing: the action starts no operation.
func (a *Action) Cancel(string, *velerov1.Restore) error { return nil }

// AreAdditionalItemsReady is true: the action asks for no additional item.
func (a *Action) AreAdditionalItemsReady([]velero.ResourceIdentifier, *velerov1.Restore) (bool, error) {
	return true, nil
}
