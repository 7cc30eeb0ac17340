package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeconfigHint says how to give a kubeconfig.
const kubeconfigHint = "kubectl-initlock reads the kubeconfig as kubectl does: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config (check with 'kubectl config view')"

// kubeconfigError explains a kubeconfig that cannot be loaded and says how
// to give one.
func kubeconfigError(err error) error {
	switch {
	case clientcmd.IsEmptyConfig(err):
		return fmt.Errorf("no kubeconfig found: %s", kubeconfigHint)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading the kubeconfig: %w; %s", err, kubeconfigHint)
	}
	return fmt.Errorf("reading the kubeconfig: %w", err)
}

// checkKubeconfig fails when there is nothing to connect to: no cluster in
// any kubeconfig, no --server and no in-cluster configuration. client-go
// would otherwise try http://localhost:8080, and fail with a connection
// error that does not say what is missing.
func (a *app) checkKubeconfig() error {
	raw, err := a.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return kubeconfigError(err)
	}
	if len(raw.Clusters) > 0 || (a.flags.APIServer != nil && *a.flags.APIServer != "") {
		return nil
	}
	if _, err := rest.InClusterConfig(); err == nil {
		return nil
	}
	where := "KUBECONFIG is not set, and " + clientcmd.RecommendedHomeFile + " does not exist or holds no cluster"
	if v := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); v != "" {
		where = fmt.Sprintf("KUBECONFIG=%q names no file that holds a cluster", v)
	}
	if a.flags.KubeConfig != nil && *a.flags.KubeConfig != "" {
		where = fmt.Sprintf("--kubeconfig %q holds no cluster", *a.flags.KubeConfig)
	}
	return fmt.Errorf("no kubeconfig found (%s), and this is not a Pod with a service account: %s", where, kubeconfigHint)
}
