package apimodel

import (
	"context"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
	gvr := served[r.Key.Kind]
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
	g.Counter.Record(kubeenv.Request{Verb: r.Verb, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource,
		Namespace: r.Key.Namespace, Name: r.Key.Name}, status)
}
