package cli

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

const digest = "sha256:4f2d8c1e9b7a6f5e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e"

func TestImageRef(t *testing.T) {
	for _, tc := range []struct{ ref, repo, tag, digest, short string }{
		{"ghcr.io/initlock/velero-plugin-initlock:v0.1.0", "ghcr.io/initlock/velero-plugin-initlock", "v0.1.0", "", "ghcr.io/initlock/velero-plugin-initlock:v0.1.0"},
		{"ghcr.io/initlock/initlock-manager:v0.1.0@" + digest, "ghcr.io/initlock/initlock-manager", "v0.1.0", digest, "ghcr.io/initlock/initlock-manager:v0.1.0@sha256:4f2d8c1e9b7a…"},
		{"ghcr.io/initlock/velero-plugin-initlock@" + digest, "ghcr.io/initlock/velero-plugin-initlock", "", digest, "ghcr.io/initlock/velero-plugin-initlock@sha256:4f2d8c1e9b7a…"},
		{"registry:5000/velero-plugin-initlock", "registry:5000/velero-plugin-initlock", "", "", "registry:5000/velero-plugin-initlock"},
		{"registry:5000/initlock-manager:v1", "registry:5000/initlock-manager", "v1", "", "registry:5000/initlock-manager:v1"},
	} {
		repo, tag, d := imageRef(tc.ref)
		if repo != tc.repo || tag != tc.tag || d != tc.digest || shortImage(tc.ref) != tc.short {
			t.Errorf("%s: %q %q %q %q", tc.ref, repo, tag, d, shortImage(tc.ref))
		}
	}
}

// The same release is ok, a patch apart a warning, another release a
// failure; what cannot be read is a warning.
func TestCompareVersion(t *testing.T) {
	for _, tc := range []struct {
		image, cli string
		want       versionVerdict
	}{
		{"r/m:v0.1.0", "v0.1.0", versionVerdict{status: CheckOK, tag: "v0.1.0", why: "v0.1.0, as kubectl-initlock"}},
		{"r/m:v0.1.0@" + digest, "v0.1.0", versionVerdict{status: CheckOK, tag: "v0.1.0", why: "v0.1.0, as kubectl-initlock"}},
		{"r/m:v0.1.1", "v0.1.0", versionVerdict{status: CheckWarn, tag: "v0.1.1", why: "v0.1.1, kubectl-initlock v0.1.0: patch releases apart", patch: true}},
		{"r/m:v0.2.0", "v0.1.0", versionVerdict{status: CheckFail, tag: "v0.2.0", why: "v0.2.0, kubectl-initlock v0.1.0: different releases"}},
		{"r/m:v1.1.0", "v0.1.0", versionVerdict{status: CheckFail, tag: "v1.1.0", why: "v1.1.0, kubectl-initlock v0.1.0: different releases"}},
		{"r/m:v0.1.0-rc.1", "v0.1.0", versionVerdict{status: CheckFail, tag: "v0.1.0-rc.1", why: "v0.1.0-rc.1, kubectl-initlock v0.1.0: different releases"}},
		{"r/m@" + digest, "v0.1.0", versionVerdict{status: CheckWarn, why: "named by digest alone: its version cannot be read",
			remedy: "compare its digest with the release notes of v0.1.0"}},
		{"r/m:latest", "v0.1.0", versionVerdict{status: CheckWarn, tag: "latest", why: `tag "latest" is not a release version`,
			remedy: "name the image of v0.1.0 by its tag, or compare its digest with the release notes of v0.1.0"}},
		{"r/m:v0.1.0", "dev-0123456789ab-dirty", versionVerdict{status: CheckWarn, tag: "v0.1.0",
			why: "kubectl-initlock is a development build (dev-0123456789ab-dirty): versions are not compared", remedy: "run a release of kubectl-initlock to compare versions"}},
	} {
		if got := compareVersion(tc.image, tc.cli); got != tc.want {
			t.Errorf("compareVersion(%s, %s) =\n%+v\nwant\n%+v", tc.image, tc.cli, got, tc.want)
		}
	}
}

func velero(init ...string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "velero", Image: "velero/velero:v1.18.3"}}
	for _, image := range init {
		d.Spec.Template.Spec.InitContainers = append(d.Spec.Template.Spec.InitContainers, corev1.Container{Image: image})
	}
	return d
}

// Velero absent is a warning; present, it must run the plugin at
// kubectl-initlock's version.
func TestJudgeVelero(t *testing.T) {
	for _, tc := range []struct {
		name           string
		v              veleroFacts
		status, detail string
		remedy         string
	}{
		{"same release", veleroFacts{deployment: velero("velero/velero-plugin-for-aws:v1.14.3", "ghcr.io/initlock/velero-plugin-initlock:v0.1.0")}, CheckOK,
			"v0.1.0, as kubectl-initlock (Deployment velero/velero runs ghcr.io/initlock/velero-plugin-initlock:v0.1.0)", ""},
		{"by digest, as documented", veleroFacts{deployment: velero("registry.example.com/you/velero-plugin-initlock@" + digest)}, CheckWarn,
			"named by digest alone: its version cannot be read (Deployment velero/velero runs registry.example.com/you/velero-plugin-initlock@sha256:4f2d8c1e9b7a…)",
			"compare its digest with the release notes of v0.1.0"},
		{"patch apart", veleroFacts{deployment: velero("ghcr.io/initlock/velero-plugin-initlock:v0.1.2")}, CheckWarn,
			"v0.1.2, kubectl-initlock v0.1.0: patch releases apart (Deployment velero/velero runs ghcr.io/initlock/velero-plugin-initlock:v0.1.2)",
			"velero plugin remove ghcr.io/initlock/velero-plugin-initlock:v0.1.2, then velero plugin add the plugin image of v0.1.0's release notes (each restarts Velero)"},
		{"without the plugin", veleroFacts{deployment: velero("velero/velero-plugin-for-aws:v1.14.3", "example.com/velero-plugin-initlock-fork:v0.1.0")}, CheckFail,
			"Deployment velero/velero runs without initlock's plugin: a restore leaves the restored objects without their ownerReferences",
			"velero plugin add ghcr.io/initlock/velero-plugin-initlock@sha256:<digest of v0.1.0's release notes> (it restarts Velero: run it when no backup or restore is in progress)"},
		{"not installed", veleroFacts{}, CheckWarn,
			"Deployment velero/velero not found: Velero is not installed there, and initlock's plugin is needed only where Velero restores this cluster",
			"if Velero runs elsewhere, name it with --velero-namespace and --velero-deployment (docs/install.md#the-velero-plugin)"},
		{"unreadable", veleroFacts{err: errors.New("boom")}, CheckUnknown, "boom", "run kubectl initlock doctor again once the API server answers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.v.namespace, tc.v.name = "velero", "velero"
			want := DoctorCheck{Name: "velero-plugin", Status: tc.status, Detail: tc.detail, Remedy: tc.remedy}
			expectCheck(t, "judgeVelero", judgeVelero(tc.v, "v0.1.0"), want)
		})
	}
}

// Kubernetes v1.30 and later serve the lock guard; the Clusters' CRD must
// serve v1beta2 or v1beta1 (docs/install.md#compatibility).
func TestJudgeVersions(t *testing.T) {
	for _, tc := range []struct {
		version, status, detail string
	}{
		{"v1.37.2", CheckOK, "v1.37.2: supported (v1.30 or later)"},
		{"v1.30.0+k3s1", CheckOK, "v1.30.0+k3s1: supported (v1.30 or later)"},
		{"v1.29.9-gke.100", CheckFail, "v1.29.9-gke.100: the lock guard needs v1.30 or later (admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy)"},
		{"weird", CheckWarn, `the API server's version "weird" cannot be read: initlock needs Kubernetes v1.30 or later`},
		{"", CheckUnknown, "the API server's version was not read"},
	} {
		if got := judgeKubernetes(kubeFacts{gitVersion: tc.version}); got.Status != tc.status || got.Detail != tc.detail || (got.Status != CheckOK) != (got.Remedy != "") {
			t.Errorf("judgeKubernetes(%q) = %+v, want %s: %s", tc.version, got, tc.status, tc.detail)
		}
	}
	install := "install Cluster API v1.11 or later (clusterctl init; docs/install.md#compatibility)"
	for _, tc := range []struct {
		name                   string
		f                      capiFacts
		status, detail, remedy string
	}{
		{"v1beta2", capiFacts{source: clusterCRD, served: []string{"v1beta1", "v1beta2"}, storage: "v1beta2"}, CheckOK,
			"clusters.cluster.x-k8s.io serves v1beta1, v1beta2 (storage v1beta2): supported (Cluster API v1.11 or later)", ""},
		{"v1beta1 only", capiFacts{source: clusterCRD, served: []string{"v1alpha4", "v1beta1"}, storage: "v1beta1"}, CheckOK,
			"clusters.cluster.x-k8s.io serves v1alpha4, v1beta1 (storage v1beta1): supported with the kubectl install (Cluster API up to v1.10; clusterctl installs initlock from v1.11)", ""},
		{"discovered", capiFacts{source: "API group cluster.x-k8s.io (discovered)", served: []string{"v1beta2"}}, CheckOK,
			"API group cluster.x-k8s.io (discovered) serves v1beta2: supported (Cluster API v1.11 or later)", ""},
		{"too old", capiFacts{source: clusterCRD, served: []string{"v1alpha4"}, storage: "v1alpha4"}, CheckFail,
			"clusters.cluster.x-k8s.io serves v1alpha4 (storage v1alpha4): initlock needs v1beta2 or v1beta1", install},
		{"missing", capiFacts{missing: true, why: errors.New("group cluster.x-k8s.io is not served: install the Cluster API CRDs first")}, CheckFail,
			"clusters.cluster.x-k8s.io is not served: Cluster API is not installed (group cluster.x-k8s.io is not served: install the Cluster API CRDs first)", install},
		{"unreadable", capiFacts{err: errors.New("boom")}, CheckUnknown, "boom", "run kubectl initlock doctor again once the API server answers"},
	} {
		want := DoctorCheck{Name: "cluster-api-version", Status: tc.status, Detail: tc.detail, Remedy: tc.remedy}
		expectCheck(t, tc.name, judgeClusterAPI(tc.f), want)
	}
}

// Locks that need a person fail the check, one item each, with what to do.
func TestJudgeLocks(t *testing.T) {
	corrupt := row{entry: inventory.Entry{Namespace: "capi", ClusterName: "c1", LockName: "c1-lock",
		Status: keeper.Status{LockExists: true, Verdict: "corrupt", Wait: "person", Why: "corrupt lock: lock-information is not a JSON lock record", ReleaseNeedsForce: true}}}
	for _, tc := range []struct {
		name string
		f    locksFacts
		want DoctorCheck
	}{
		{"none", locksFacts{total: 3}, DoctorCheck{Name: "locks", Status: CheckOK, Detail: "no lock needs a person (3 locks in all namespaces)"}},
		{"one in a namespace", locksFacts{namespace: "capi", total: 2, person: []row{corrupt}}, DoctorCheck{Name: "locks", Status: CheckFail,
			Detail: "1 lock needs a person (of 2 locks in namespace capi)",
			Remedy: "kubectl initlock list -n capi -o wide shows them, and kubectl initlock repair -n capi --dry-run=client what a person must do for each",
			Items: []string{"capi/c1-lock (corrupt): corrupt lock: lock-information is not a JSON lock record; it is never taken over silently. " +
				"Once no machine of the cluster is running kubeadm init: kubectl initlock release c1 -n capi --force"}}},
		{"no Cluster API", locksFacts{skipped: "Cluster API is not served, so there are no locks to judge"},
			DoctorCheck{Name: "locks", Status: CheckSkipped, Detail: "Cluster API is not served, so there are no locks to judge (see cluster-api-version)"}},
		{"unreadable", locksFacts{err: errors.New("boom")}, DoctorCheck{Name: "locks", Status: CheckUnknown, Detail: "boom", Remedy: "run kubectl initlock doctor again once the API server answers"}},
	} {
		expectCheck(t, tc.name, judgeLocks(tc.f), tc.want)
	}
}
