package uninstall_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/cmd/delete"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
)

var env *kubeenv.Env

func TestMain(m *testing.M) {
	kubeenv.Main(m, kubeenv.Options{}, &env)
}

// TestUninstallAsDocumented installs initlock (install.yaml, the
// --relink-secrets role and the OwnerReferencesPermissionEnforcement role)
// beside a held lock, runs the page's uninstall twice, and checks that
// every command exited 0, that none of the installed objects is left and
// that the lock is as it was.
func TestUninstallAsDocumented(t *testing.T) {
	ctx := t.Context()
	root, err := kubeenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	installed := install(t, root, dir)
	ns := env.Namespace(t)
	lock := kubeenv.NewLock(ns, "c1", "c1-cp-0", nil)
	if err := env.Client.Create(ctx, lock); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.WriteKubeconfig("operator", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	commands := documented(t, filepath.Join(root, "docs", "install.md"))
	for round := 1; round <= 2; round++ {
		for _, args := range commands {
			if code, out := kubectl(t, kubeconfig, dir, args); code != 0 {
				t.Errorf("round %d: kubectl %s exited %d:\n%s", round, strings.Join(args, " "), code, out)
			}
		}
	}
	for _, u := range installed {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), live)
		if !apierrors.IsNotFound(err) {
			t.Errorf("after the uninstall, %s %s: %v; want it gone", u.GetKind(), client.ObjectKeyFromObject(u), err)
		}
	}
	after := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lock), after); err != nil {
		t.Fatalf("the lock after the uninstall: %v", err)
	}
	if after.ResourceVersion != lock.ResourceVersion {
		t.Errorf("the uninstall changed the lock: resourceVersion %s, was %s", after.ResourceVersion, lock.ResourceVersion)
	}
}

// install renders install.yaml into dir as make manifests does, creates its
// objects and the two opt-in roles with their bindings, and returns them.
func install(t *testing.T, root, dir string) []*unstructured.Unstructured {
	t.Helper()
	out := filepath.Join(dir, "install.yaml")
	cmd := exec.Command("make", "-s", "manifests", "MANIFESTS="+out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make manifests: %v\n%s", err, b)
	}
	var objs []*unstructured.Unstructured
	for _, f := range []string{out,
		filepath.Join(root, "config/relink-secrets/role.yaml"), filepath.Join(root, "config/relink-secrets/role_binding.yaml"),
		filepath.Join(root, "config/owner-references-enforcement/role.yaml"), filepath.Join(root, "config/owner-references-enforcement/role_binding.yaml"),
	} {
		read, err := kubeenv.ReadObjects(f)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, read...)
	}
	for _, u := range objs {
		if err := env.Client.Create(t.Context(), u.DeepCopy()); err != nil {
			t.Fatalf("installing %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	return objs
}

// documented returns the kubectl delete commands of the first sh block
// under the page's heading "Uninstalling", as argument lists without
// "kubectl": all but those for the alerts and for Velero (see doc.go).
func documented(t *testing.T, page string) [][]string {
	t.Helper()
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds [][]string
	section, block := false, false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			section = strings.HasPrefix(line, "## Uninstalling")
		case section && strings.HasPrefix(line, "```"):
			if block {
				return cmds
			}
			block = true
		case section && block && strings.HasPrefix(line, "kubectl ") && !strings.Contains(line, "config/monitoring"):
			// The page's commands quote nothing.
			code, _, _ := strings.Cut(line, "#")
			cmds = append(cmds, strings.Fields(code)[1:])
		}
	}
	t.Fatalf("%s: no sh block under ## Uninstalling", page)
	return nil
}

// kubectl runs kubectl's delete command with args in-process, $URL naming
// dir, and returns its exit code and output.
func kubectl(t *testing.T, kubeconfig, dir string, args []string) (int, string) {
	t.Helper()
	if len(args) == 0 || args[0] != "delete" {
		t.Fatalf("the uninstall runs kubectl %v; the test runs only kubectl delete", args)
	}
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "$URL", dir)
	}
	var out bytes.Buffer
	code := 0
	cmdutil.BehaviorOnFatal(func(msg string, c int) {
		out.WriteString(msg)
		code = c
	})
	defer cmdutil.DefaultBehaviorOnFatal()
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = &kubeconfig
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}
	cmd := delete.NewCmdDelete(cmdutil.NewFactory(flags), streams)
	flags.AddFlags(cmd.PersistentFlags())
	cmd.SetArgs(append(args[1:], "--timeout", "2m"))
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := cmd.ExecuteContext(ctx); err != nil {
		return 1, fmt.Sprintf("%s%v", out.String(), err)
	}
	return code, out.String()
}
