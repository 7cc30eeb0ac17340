package cli

import (
	"errors"
	"fmt"
	"io/fs"

	"k8s.io/client-go/tools/clientcmd"
)

// kubeconfigError explains a kubeconfig that cannot be loaded and says how
// to give one.
func kubeconfigError(err error) error {
	const hint = "kubectl-initlock reads the kubeconfig as kubectl does: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config (check with 'kubectl config view')"
	switch {
	case clientcmd.IsEmptyConfig(err):
		return fmt.Errorf("no kubeconfig found: %s", hint)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading the kubeconfig: %w; %s", err, hint)
	}
	return fmt.Errorf("reading the kubeconfig: %w", err)
}
