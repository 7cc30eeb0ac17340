package clisuite

import (
	"reflect"
	"strings"
	"testing"

	velerov1 "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/relink"
	"github.com/initlock/initlock/pkg/initlock/capi"
)

// relinkOwner is a recorded owner of Cluster API kind, as the relinker's
// annotation names it.
func relinkOwner(kind, name, uid string) relink.OwnerRef {
	return relink.OwnerRef{APIVersion: capi.Group + "/" + capi.V1Beta2, Kind: kind, Name: name, UID: types.UID(uid)}
}

// annotated makes ConfigMap name with labels, then gives it the relinker's
// annotation with value.
func (b *Backend) annotated(t *testing.T, ns, name string, labels map[string]string, value string) {
	t.Helper()
	cm := b.newConfigMap(t, ns, name, labels, nil, nil)
	cm.Annotations = map[string]string{relink.Annotation: value}
	if err := b.Client.Update(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
}

// relinksOutput: relinks -o json and -o yaml print the same RelinkList
// (each object with its recorded owners, their verdicts, reasons and live
// UIDs, and the kinds not listed), -o name one TYPE/NAME per object
// whatever the number of its owners, and an unknown format is refused
// before any request.
func relinksOutput(t *testing.T, b *Backend) {
	ns := b.Namespace(t)
	restored := map[string]string{capi.ClusterNameLabel: "c1", velerov1.RestoreNameLabel: "restore-1"}
	// c1 took the name of the backed-up Cluster without being restored;
	// c2 came back with restore-1.
	unrelated := b.newCluster(t, ns, "c1", false)
	back := b.newCluster(t, ns, "c2", false, func(u *unstructured.Unstructured) { u.SetLabels(restored) })
	b.annotated(t, ns, "addons", restored, relink.Encode([]relink.OwnerRef{relinkOwner("Cluster", "c1", "uid-c1"), relinkOwner("Cluster", "c2", "uid-c2")}))
	b.annotated(t, ns, "broken", restored, `[{"kind":"Cluster"}]`)
	b.annotated(t, ns, "kubeconfig", restored, relink.Encode([]relink.OwnerRef{relinkOwner("Cluster", "gone", "uid-gone")}))
	b.newConfigMap(t, ns, "linked", restored, nil, unrelated)
	args := []string{"relinks", "-n", ns, "--kinds", "ConfigMap,Widget.example.com"}

	r := b.run(t, invocation{}, append(args, "-o", "json")...).ExpectCode(t, cli.ExitOK)
	if r.Err != "" {
		t.Errorf("-o json wrote to stderr: %s", r.Err)
	}
	var got cli.RelinkList
	decodeJSON(t, r.Out, &got)
	if len(got.Items) != 3 {
		t.Fatalf("relinks -o json: %d items, want addons, broken and kubeconfig:\n%s", len(got.Items), r.Out)
	}
	for i := range got.Items {
		if got.Items[i].Created == "" {
			t.Errorf("item %d has no creation time", i)
		}
		got.Items[i].Created = "<time>"
	}
	ref := func(name, uid, live, verdict, reason string) cli.RelinkOwnerStatus {
		return cli.RelinkOwnerStatus{APIVersion: capi.Group + "/" + capi.V1Beta2, Kind: "Cluster", Name: name, UID: uid, LiveUID: live, Verdict: verdict, Reason: reason}
	}
	item := func(name, problem string, owners ...cli.RelinkOwnerStatus) cli.RelinkStatus {
		return cli.RelinkStatus{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name, Created: "<time>", Problem: problem, Owners: append([]cli.RelinkOwnerStatus{}, owners...)}
	}
	c1 := string(unrelated.GetUID())
	want := cli.RelinkList{APIVersion: cli.ListAPIVersion, Kind: cli.RelinkListKind,
		NotListed: []string{"Widget.example.com: not served"},
		Items: []cli.RelinkStatus{
			item("addons", "",
				ref("c1", "uid-c1", c1, "unproven", "exists with UID "+c1+", not the backed-up UID uid-c1, and was not restored by restore restore-1"),
				ref("c2", "uid-c2", string(back.GetUID()), "same-restore", "")),
			item("broken", "invalid "+relink.Annotation+` annotation: owner 0: apiVersion "", kind "Cluster" and name "" must all be set`),
			item("kubeconfig", "", ref("gone", "uid-gone", "", "not-found", "not found")),
		}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("relinks -o json:\n%+v\nwant:\n%+v", got, want)
	}

	y := b.run(t, invocation{}, append(args, "-o", "yaml")...).ExpectCode(t, cli.ExitOK)
	var fromYAML cli.RelinkList
	if err := yaml.Unmarshal([]byte(y.Out), &fromYAML); err != nil {
		t.Fatalf("decoding relinks -o yaml: %v\n%s", err, y.Out)
	}
	for i := range fromYAML.Items {
		fromYAML.Items[i].Created = "<time>"
	}
	if !reflect.DeepEqual(fromYAML, want) {
		t.Errorf("relinks -o yaml is not -o json's list:\n%s", y.Out)
	}

	n := b.run(t, invocation{}, append(args, "-o", "name")...).ExpectCode(t, cli.ExitOK)
	if want := "configmap/addons\nconfigmap/broken\nconfigmap/kubeconfig\n"; n.Out != want {
		t.Errorf("relinks -o name:\n%s\nwant:\n%s", n.Out, want)
	}
	if want := "Not listed: Widget.example.com: not served.\n"; n.Err != want {
		t.Errorf("relinks -o name's stderr: %q, want %q", n.Err, want)
	}

	// Nothing waiting: an empty list, or nothing on stdout.
	empty := b.Namespace(t)
	if e := b.run(t, invocation{}, "relinks", "-n", empty, "--kinds", "ConfigMap", "-o", "json").ExpectCode(t, cli.ExitOK); !strings.Contains(e.Out, `"items": []`) || e.Err != "" {
		t.Errorf("relinks -o json of an empty namespace: stdout %q, stderr %q", e.Out, e.Err)
	}
	if e := b.run(t, invocation{}, "relinks", "-n", empty, "--kinds", "ConfigMap", "-o", "name").ExpectCode(t, cli.ExitOK); e.Out != "" || !strings.Contains(e.Err, "No restored object waits for the relinker.") {
		t.Errorf("relinks -o name of an empty namespace: stdout %q, stderr %q", e.Out, e.Err)
	}

	// Formats that list has and relinks has not.
	for _, format := range []string{"wide", "xml"} {
		b.run(t, invocation{}, "relinks", "-n", ns, "-o", format).ExpectCode(t, cli.ExitError).
			ErrHas(t, `unknown output format "`+format+`": use one of table, name, json, yaml`)
	}
}
