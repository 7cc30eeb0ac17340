package apimodel

import (
	"context"
	"errors"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
)

// Counting is a Gate that serves every request at once and counts it, with
// the status code of its answer, in Counter, as a kubeenv.Counter counts
// the requests sent to the API server: a test asserts the same request
// counts on the model as on the real API server.
type Counting struct {
	Counter *kubeenv.Counter
}

// Serve serves r and counts it.
func (g Counting) Serve(_ context.Context, r *Request) {
	r.Serve()
	status := http.StatusOK
	if r.Verb == "create" {
		status = http.StatusCreated
	}
	var st apierrors.APIStatus
	switch {
	case errors.As(r.Err, &st):
		status = int(st.Status().Code)
	case r.Err != nil:
		status = kubeenv.NoAnswer
	}
	g.Counter.Record(r.API(), status)
}

// API names r as kubeenv names a request sent to the API server.
func (r *Request) API() kubeenv.Request {
	gvr := served[r.Key.Kind]
	return kubeenv.Request{Verb: r.Verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource,
		Namespace: r.Key.Namespace, Name: r.Key.Name}
}

// SetInitialized writes into c's store the status kubeenv.SetInitialized
// writes through the status subresource, which the model does not serve,
// and refreshes cluster from it.
func SetInitialized(_ context.Context, c client.Client, cluster *unstructured.Unstructured) error {
	mc, ok := c.(*Client)
	if !ok {
		return errors.New("apimodel: SetInitialized needs a client of the model")
	}
	k := Key{Kind: cluster.GetKind(), Namespace: cluster.GetNamespace(), Name: cluster.GetName()}
	status := kubeenv.InitializedStatus(cluster.GroupVersionKind().Version, time.Now())
	if !mc.Store.Mutate(k, func(obj map[string]any) { obj["status"] = status }) {
		return apierrors.NewNotFound(ClusterGVK.GroupVersion().WithResource("clusters").GroupResource(), k.Name)
	}
	return Fill(cluster, mc.Store.Peek(k))
}
