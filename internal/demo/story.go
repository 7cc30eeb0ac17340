package demo

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// takeLock acquires cluster's lock for machine with the library, as a
// bootstrap provider does, and shows the lock and the grant it recorded.
func (d *demo) takeLock(n note, cluster, machine *unstructured.Unstructured) error {
	res, err := d.locker.Lock(d.ctx, cluster, machine)
	if err != nil {
		return err
	}
	if !res.Acquired {
		return fmt.Errorf("lock not acquired: held by %s (verdict %s)", res.Holder, res.Verdict)
	}
	cm, err := kubeenv.GetLock(d.ctx, d.c, cluster.GetNamespace(), cluster.GetName())
	if err != nil {
		return err
	}
	if cm == nil {
		return errors.New("acquired, yet there is no lock ConfigMap")
	}
	n("acquired (action %s): lock %s", res.Action, describeLock(cm))
	n("%s: %s", wire.DataKey, cm.Data[wire.DataKey])
	n("grant register on Cluster %s: %s", cluster.GetName(), cluster.GetAnnotations()[wire.GrantAnnotation])
	return nil
}

// kubectlInitlock runs the kubectl plugin in this process, shows its output
// and checks that it reports the verdict.
func (d *demo) kubectlInitlock(n note, verdict string, args ...string) error {
	var out, errOut bytes.Buffer
	n("$ kubectl initlock %s", strings.Join(args, " "))
	code := cli.Execute(d.ctx, cli.Options{
		IOStreams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
	}, append(args, "--kubeconfig", d.kubeconfig))
	for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		n("  %s", l)
	}
	if code != cli.ExitOK {
		return fmt.Errorf("kubectl initlock %s exited %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errOut.String()))
	}
	if !strings.Contains(out.String(), " "+verdict) {
		return fmt.Errorf("kubectl initlock %s does not show the verdict %s", strings.Join(args, " "), verdict)
	}
	return nil
}
