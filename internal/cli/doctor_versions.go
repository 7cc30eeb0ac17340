package cli

import (
	"fmt"
	"path"
	"slices"
	"strings"

	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// pluginImage is the last element of the repository of initlock's Velero
// plugin image (ghcr.io/initlock/velero-plugin-initlock).
const pluginImage = "velero-plugin-initlock"

// minKubernetes is the oldest Kubernetes initlock supports: the lock guard
// is an admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy
// (docs/install.md#compatibility).
var minKubernetes = utilversion.MajorMinor(1, 30)

// imageRef splits an image reference into its repository, tag and
// digest, each "" when absent.
func imageRef(ref string) (repo, tag, digest string) {
	name, digest, _ := strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[:i], name[i+1:], digest
	}
	return name, "", digest
}

// shortImage is ref with its digest cut to 12 hex digits, for people.
func shortImage(ref string) string {
	name, digest, ok := strings.Cut(ref, "@")
	algo, hex, _ := strings.Cut(digest, ":")
	if !ok || len(hex) <= 12 {
		return ref
	}
	return name + "@" + algo + ":" + hex[:12] + "…"
}

// versionVerdict is an image's version against kubectl-initlock's.
type versionVerdict struct {
	status string
	// tag is the image's tag; why says how it compares; patch tells that
	// only the patch release differs; remedy is that of a warning that
	// is not patch.
	tag, why, remedy string
	patch            bool
}

// compareVersion compares the tag of image with kubectl-initlock's
// version cli: the same release is ok, a patch release apart a warning,
// other releases a failure; a version that cannot be read (an image named
// by digest alone, a tag or a kubectl-initlock that is not a release) is a
// warning.
func compareVersion(image, cli string) versionVerdict {
	_, tag, _ := imageRef(image)
	v := versionVerdict{tag: tag, status: CheckWarn}
	c, cerr := utilversion.ParseSemantic(cli)
	t, terr := utilversion.ParseSemantic(tag)
	switch {
	case cerr != nil:
		v.why = fmt.Sprintf("kubectl-initlock is a development build (%s): versions are not compared", cli)
		v.remedy = "run a release of kubectl-initlock to compare versions"
	case tag == "":
		v.why = "named by digest alone: its version cannot be read"
		v.remedy = fmt.Sprintf("compare its digest with the release notes of %s", cli)
	case terr != nil:
		v.why = fmt.Sprintf("tag %q is not a release version", tag)
		v.remedy = fmt.Sprintf("name the image of %s by its tag, or compare its digest with the release notes of %s", cli, cli)
	case t.EqualTo(c):
		v.status, v.why = CheckOK, fmt.Sprintf("%s, as kubectl-initlock", tag)
	case t.Major() == c.Major() && t.Minor() == c.Minor() && t.PreRelease() == "" && c.PreRelease() == "":
		v.patch, v.why = true, fmt.Sprintf("%s, kubectl-initlock %s: patch releases apart", tag, cli)
	default:
		v.status, v.why = CheckFail, fmt.Sprintf("%s, kubectl-initlock %s: different releases", tag, cli)
	}
	return v
}

// judgeVelero judges Velero's Deployment: absent is a warning (initlock's
// plugin matters only where Velero restores this cluster); present, it
// must run initlock's plugin, at kubectl-initlock's version.
func judgeVelero(v veleroFacts, cli string) DoctorCheck {
	c := DoctorCheck{Name: "velero-plugin"}
	ref := fmt.Sprintf("Deployment %s/%s", v.namespace, v.name)
	switch {
	case v.err != nil:
		return unknownCheck(c.Name, v.err)
	case v.deployment == nil:
		c.Status, c.Detail = CheckWarn, ref+" not found: Velero is not installed there, and initlock's plugin is needed only where Velero restores this cluster"
		c.Remedy = "if Velero runs elsewhere, name it with --velero-namespace and --velero-deployment (docs/install.md#the-velero-plugin)"
		return c
	}
	spec := v.deployment.Spec.Template.Spec
	var images []string
	for _, ctr := range slices.Concat(spec.InitContainers, spec.Containers) {
		if repo, _, _ := imageRef(ctr.Image); path.Base(repo) == pluginImage {
			images = append(images, ctr.Image)
		}
	}
	if len(images) == 0 {
		c.Status, c.Detail = CheckFail, ref+" runs without initlock's plugin: a restore leaves the restored objects without their ownerReferences"
		c.Remedy = fmt.Sprintf("velero plugin add ghcr.io/initlock/%s@sha256:<digest of %s's release notes> (it restarts Velero: run it when no backup or restore is in progress)", pluginImage, cli)
		return c
	}
	image := images[0]
	vv := compareVersion(image, cli)
	c.Status, c.Detail = vv.status, fmt.Sprintf("%s (%s runs %s)", vv.why, ref, shortImage(image))
	switch {
	case vv.status == CheckFail || vv.patch:
		c.Remedy = fmt.Sprintf("velero plugin remove %s, then velero plugin add the plugin image of %s's release notes (each restarts Velero)", image, cli)
	case vv.status == CheckWarn:
		c.Remedy = vv.remedy
	}
	return c
}

// judgeKubernetes judges the API server's version.
func judgeKubernetes(k kubeFacts) DoctorCheck {
	c := DoctorCheck{Name: "kubernetes-version"}
	if k.gitVersion == "" {
		c.Status, c.Detail = CheckUnknown, "the API server's version was not read"
		c.Remedy = "run kubectl initlock doctor with a kubeconfig"
		return c
	}
	v, err := utilversion.ParseGeneric(k.gitVersion)
	switch {
	case err != nil:
		c.Status, c.Detail = CheckWarn, fmt.Sprintf("the API server's version %q cannot be read: initlock needs Kubernetes v1.30 or later", k.gitVersion)
		c.Remedy = "check the version with kubectl version"
	case v.LessThan(minKubernetes):
		c.Status, c.Detail = CheckFail, fmt.Sprintf("%s: the lock guard needs v1.30 or later (admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy)", k.gitVersion)
		c.Remedy = "upgrade the management cluster to Kubernetes v1.30 or later (docs/install.md#compatibility)"
	default:
		c.Status, c.Detail = CheckOK, k.gitVersion+": supported (v1.30 or later)"
	}
	return c
}

// judgeClusterAPI judges the versions the Clusters' CRD serves against the
// compatibility table: v1beta2 (Cluster API v1.11 and later), or v1beta1
// only (up to v1.10, with the kubectl install).
func judgeClusterAPI(f capiFacts) DoctorCheck {
	c := DoctorCheck{Name: "cluster-api-version"}
	install := "install Cluster API v1.11 or later (clusterctl init; docs/install.md#compatibility)"
	switch {
	case f.err != nil:
		return unknownCheck(c.Name, f.err)
	case f.missing:
		c.Status, c.Detail, c.Remedy = CheckFail, clusterCRD+" is not served: Cluster API is not installed", install
		if f.why != nil {
			c.Detail += " (" + f.why.Error() + ")"
		}
		return c
	}
	served := fmt.Sprintf("%s serves %s", f.source, strings.Join(f.served, ", "))
	if f.storage != "" {
		served += fmt.Sprintf(" (storage %s)", f.storage)
	}
	switch {
	case slices.Contains(f.served, capi.V1Beta2):
		c.Status, c.Detail = CheckOK, served+": supported (Cluster API v1.11 or later)"
	case slices.Contains(f.served, capi.V1Beta1):
		c.Status, c.Detail = CheckOK, served+": supported with the kubectl install (Cluster API up to v1.10; clusterctl installs initlock from v1.11)"
	default:
		c.Status, c.Detail, c.Remedy = CheckFail, served+": initlock needs v1beta2 or v1beta1", install
	}
	return c
}

// judgeLocks judges the locks: none may need a person.
func judgeLocks(f locksFacts) DoctorCheck {
	c := DoctorCheck{Name: "locks"}
	where, scope := "in all namespaces", "-A"
	if f.namespace != "" {
		where, scope = "in namespace "+f.namespace, "-n "+f.namespace
	}
	switch {
	case f.skipped != "":
		c.Status, c.Detail = CheckSkipped, f.skipped+" (see cluster-api-version)"
		return c
	case f.err != nil:
		return unknownCheck(c.Name, f.err)
	case len(f.person) == 0:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("no lock needs a person (%d %s %s)", f.total, plural(f.total, "lock", "locks"), where)
		return c
	}
	c.Status = CheckFail
	c.Detail = fmt.Sprintf("%d %s a person (of %d %s %s)", len(f.person), plural(len(f.person), "lock needs", "locks need"), f.total, plural(f.total, "lock", "locks"), where)
	c.Remedy = fmt.Sprintf("kubectl initlock list %s -o wide shows them, and kubectl initlock repair %s --dry-run=client what a person must do for each", scope, scope)
	for _, r := range f.person {
		c.Items = append(c.Items, fmt.Sprintf("%s/%s (%s): %s", r.entry.Namespace, r.entry.LockName, r.status().Verdict, humanWhy(r)))
	}
	return c
}
