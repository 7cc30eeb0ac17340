// Command typed is a bootstrap provider's swap of its init lock with
// Cluster API's own types, as CABPK's reconciler holds it: the mutex
// satisfies the provider's interface, and the provider's next Update of the
// Cluster object it passed succeeds. The consumer test runs it against a
// real API server: typed <kubeconfig> <namespace>.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/initlock/initlock/pkg/initlock/locking"
)

// InitLocker is CABPK's interface, as in its kubeadmconfig reconciler.
type InitLocker interface {
	Lock(ctx context.Context, cluster *clusterv1.Cluster, machine *clusterv1.Machine) bool
	Unlock(ctx context.Context, cluster *clusterv1.Cluster) bool
}

func main() {
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, ns string) error {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(clusterv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	var lock InitLocker = locking.NewControlPlaneInitMutex[*clusterv1.Cluster, *clusterv1.Machine](c)

	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "typed"},
		Spec:       clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "typed.example.test", Port: 6443}},
	}
	if err := c.Create(ctx, cluster); err != nil {
		return err
	}
	secret := "typed-cp-0-bootstrap"
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "typed-cp-0", Labels: map[string]string{
			clusterv1.ClusterNameLabel: cluster.Name, clusterv1.MachineControlPlaneLabel: "",
		}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster.Name,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: &secret},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine", Name: "typed-cp-0"},
		},
	}
	if err := c.Create(ctx, machine); err != nil {
		return err
	}
	// A reconciler reads its objects back: their TypeMeta is empty.
	got := &clusterv1.Cluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), got); err != nil {
		return err
	}
	m := &clusterv1.Machine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(machine), m); err != nil {
		return err
	}
	rv := got.ResourceVersion
	fmt.Println("lock:", lock.Lock(ctx, got, m))
	fmt.Println("object has the grant:", granted(got.Annotations), "new resourceVersion:", got.ResourceVersion != rv)
	got.Labels = map[string]string{"provider": "lock"}
	fmt.Println("update after lock:", c.Update(ctx, got))
	other := m.DeepCopy()
	other.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "typed-cp-1", Labels: m.Labels}
	other.Spec.InfrastructureRef.Name = other.Name
	if err := c.Create(ctx, other); err != nil {
		return err
	}
	fmt.Println("second machine refused:", !lock.Lock(ctx, got, other))
	fmt.Println("unlock:", lock.Unlock(ctx, got))
	fmt.Println("object has the grant:", granted(got.Annotations))
	got.Labels = map[string]string{"provider": "unlock"}
	fmt.Println("update after unlock:", c.Update(ctx, got))
	return nil
}

// granted reads the grant the lock records on the Cluster, as kubectl
// shows it: the annotation initlock.dev/init-lock-grant names a Machine
// while the grant stands.
func granted(annotations map[string]string) bool {
	var g struct {
		MachineName string `json:"machineName"`
	}
	v, ok := annotations["initlock.dev/init-lock-grant"]
	return ok && json.Unmarshal([]byte(v), &g) == nil && g.MachineName != ""
}
