package clisuite

import (
	"regexp"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// A user who may read the locks of one namespace, and nothing else, is
// told which checks doctor could not make and which permission each needs;
// the Cluster API version comes from discovery, which everyone may read.
func TestDoctorWithoutPermissions(t *testing.T) {
	b := apiServer()
	in := b.installForDoctor(t)
	kubeconfig := userWith(t, b, in.ns, "initlock-cli-doctor", "get", "list")
	var report cli.DoctorReport
	decodeJSON(t, runAs(t, kubeconfig, in.doctorArgs("-o", "json")...).ExpectCode(t, cli.ExitChecksFailed).Out, &report)
	got := map[string]cli.DoctorCheck{}
	for _, c := range report.Checks {
		got[c.Name] = c
	}
	denied := func(resource, group string) string {
		return `permission denied: kubectl-initlock needs "get" on "` + resource + `" (API group "` + group + `") in namespace "` + in.ns + `"`
	}
	for name, want := range map[string]struct{ status, detail string }{
		"lock-guard":          {cli.CheckUnknown, `the lock guard cannot be read: kubectl-initlock needs "get" on "validatingadmissionpolicies"`},
		"garbage-collector":   {cli.CheckUnknown, "whether the garbage collector is kept from held locks is the lock guard's, which cannot be read"},
		"manager":             {cli.CheckUnknown, `reading deployment "initlock-controller-manager" in namespace "` + in.ns + `": ` + denied("deployments", "apps")},
		"manager-version":     {cli.CheckSkipped, "Deployment " + in.ns + "/initlock-controller-manager could not be read (see manager)"},
		"manager-rbac":        {cli.CheckSkipped, "no manager Deployment whose ServiceAccount to look at (see manager)"},
		"velero-plugin":       {cli.CheckUnknown, `reading deployment "velero" in namespace "` + in.ns + `": ` + denied("deployments", "apps")},
		"kubernetes-version":  {cli.CheckOK, serverVersion(t) + ": supported"},
		"cluster-api-version": {cli.CheckOK, "API group cluster.x-k8s.io (discovered) serves v1beta2: supported (Cluster API v1.11 or later)"},
		"locks":               {cli.CheckOK, "no lock needs a person (1 lock in namespace " + in.ns + ")"},
	} {
		c := got[name]
		if c.Status != want.status || !strings.HasPrefix(c.Detail, want.detail) || (c.Status == cli.CheckUnknown) != (c.Remedy != "") {
			t.Errorf("%s: %+v\nwant %s, starting %q", name, c, want.status, want.detail)
		}
	}
	if !strings.HasPrefix(got["manager"].Remedy, "ask an administrator for the permission named") {
		t.Errorf("manager: remedy %q", got["manager"].Remedy)
	}
}

// doctorSample is the block of ReferencePage that shows doctor's output.
var doctorSample = regexp.MustCompile("(?s)```text\n\\$ (kubectl initlock doctor[^\n]*)\n(.*?)```")

// The sample of doctor in ReferencePage is its real output, for a
// kubectl-initlock v0.1.0, on an install made as the install pages say:
// the manager in initlock-system, Velero in velero with initlock's plugin
// named by digest alone, and a corrupt lock in capi.
func TestDoctorReferenceSample(t *testing.T) {
	b := apiServer()
	for _, ns := range []string{"initlock-system", "velero", "capi"} {
		b.namespace(t, ns)
	}
	in := b.installForDoctorIn(t, "initlock-system", "velero", "capi", "v0.1.0")
	b.update(t, in.velero, func() {
		in.velero.Spec.Template.Spec.InitContainers[1].Image = "ghcr.io/initlock/velero-plugin-initlock@sha256:" + doctorDigest
	})
	cl := b.newCluster(t, "capi", "c-corrupt", false)
	b.newConfigMap(t, "capi", "c-corrupt-lock", map[string]string{wire.ClusterNameLabel: "c-corrupt"}, map[string]string{wire.DataKey: "not json"}, cl)

	path, text := Reference(t)
	samples := 0
	updated := doctorSample.ReplaceAllStringFunc(text, func(block string) string {
		samples++
		command := doctorSample.FindStringSubmatch(block)[1]
		opts := cli.Options{Version: "v0.1.0", Clock: testingclock.NewFakePassiveClock(in.renewed.Add(3 * time.Second))}
		args := append(strings.Fields(strings.TrimPrefix(command, "kubectl initlock ")), b.connect(t, &opts, nil, nil)...)
		r := Execute(t, opts, args...).ExpectCode(t, cli.ExitChecksFailed)
		return "```text\n$ " + command + "\n" + r.Err + r.Out + "```"
	})
	if samples != 1 {
		t.Fatalf("%s shows %d samples of kubectl initlock doctor, want 1", ReferencePage, samples)
	}
	WriteReference(t, path, text, updated, "the sample of kubectl initlock doctor")
}
