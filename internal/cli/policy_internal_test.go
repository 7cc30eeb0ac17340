package cli

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/initlock/initlock/internal/cli/inventory"
	"github.com/initlock/initlock/pkg/initlock/capi"
	"github.com/initlock/initlock/pkg/initlock/keeper"
)

// The manager's arguments are read as its flag package parses them.
func TestSettingsFromArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command []string
		args    []string
		want    managerSettings
		wantErr string
	}{
		{name: "defaults", command: []string{"/initlock-manager"}, args: []string{"--leader-elect"},
			want: managerSettings{policy: keeper.DefaultPolicy()}},
		{name: "every form", command: []string{"/initlock-manager"},
			args: []string{"-release-after-init=false", "--orphan-grace", "1h", "--namespace=capi", "-watch-filter", "fleet-a", "--", "--namespace=ignored"},
			want: managerSettings{policy: keeper.Policy{ReleaseAfterInit: false, OrphanGrace: time.Hour},
				scope: managerScope{namespace: "capi", watchFilter: "fleet-a"}}},
		{name: "bare boolean", args: []string{"--release-after-init"}, want: managerSettings{policy: keeper.DefaultPolicy()}},
		{name: "bad duration", args: []string{"--orphan-grace=soon"}, wantErr: `argument "--orphan-grace=soon": time: invalid duration "soon"`},
		{name: "no value", args: []string{"--watch-filter"}, wantErr: `argument "--watch-filter" has no value`},
		{name: "environment", args: []string{"--orphan-grace=$(GRACE)"}, wantErr: "refers to an environment variable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := settingsFromArgs([]corev1.Container{{Name: "sidecar", Args: []string{"--namespace=no"}}, {Name: "manager", Command: tc.command, Args: tc.args}})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("settingsFromArgs = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// A manager handles the locks of its namespace and watch filter; an orphan
// by the lock's own label, as its lock controller does.
func TestManagerScopeHandles(t *testing.T) {
	cluster := keeper.Status{ClusterExists: true}
	lock := func(labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: labels}}
	}
	watched := map[string]string{capi.WatchFilterLabel: "a"}
	for _, tc := range []struct {
		name  string
		scope managerScope
		entry inventory.Entry
		want  bool
	}{
		{"everything", managerScope{}, inventory.Entry{Namespace: "x"}, true},
		{"other namespace", managerScope{namespace: "capi"}, inventory.Entry{Namespace: "x"}, false},
		{"its namespace", managerScope{namespace: "capi"}, inventory.Entry{Namespace: "capi"}, true},
		{"labelled cluster", managerScope{watchFilter: "a"}, inventory.Entry{Status: cluster, ClusterLabels: watched}, true},
		{"unlabelled cluster, labelled lock", managerScope{watchFilter: "a"}, inventory.Entry{Status: cluster, ConfigMap: lock(watched)}, false},
		{"orphan with the label", managerScope{watchFilter: "a"}, inventory.Entry{ConfigMap: lock(watched)}, true},
		{"orphan without it", managerScope{watchFilter: "a"}, inventory.Entry{ConfigMap: lock(nil)}, false},
	} {
		if got := tc.scope.handles(tc.entry); got != tc.want {
			t.Errorf("%s: handles = %t, want %t", tc.name, got, tc.want)
		}
	}
}
