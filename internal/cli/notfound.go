package cli

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/initlock/initlock/pkg/initlock/capi"
)

// clusterNotFound is the error of a command about one Cluster that has
// neither a Cluster object nor a lock: the API server's NotFound for the
// Cluster, which Execute prints as kubectl does.
func clusterNotFound(name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: capi.Group, Resource: "clusters"}, name)
}

// onlyCluster keeps the row of one cluster, listed even when it is free;
// clusterNotFound when there is none.
func onlyCluster(rows []row, name string) ([]row, error) {
	for _, r := range rows {
		if r.entry.ClusterName == name {
			return []row{r}, nil
		}
	}
	return nil, clusterNotFound(name)
}

// errorMessage is how Execute prints err: as kubectl prints an error from
// the server ("Error from server (NotFound): ...") when err is one,
// "error: ..." otherwise.
func errorMessage(err error) string {
	var status *apierrors.StatusError
	if errors.As(err, &status) && status == err { //nolint:errorlint // only an unwrapped server error is printed as kubectl prints it
		return "Error from server (" + string(status.ErrStatus.Reason) + "): " + status.Error()
	}
	return "error: " + err.Error()
}
