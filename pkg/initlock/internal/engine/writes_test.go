package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestTestFailed: only the API server's answer to a JSON patch whose test
// failed refuses a free claim at once; every other failure of the claim
// goes to settle. internal/kubeenv/apimodel's conformance test checks that
// the API server answers a failed test so.
func TestTestFailed(t *testing.T) {
	clusters := schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "clusters"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a failed test, as the patch handler answers it",
			apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", "testing value /metadata/uid failed", 0, false), true},
		{"wrapped", fmt.Errorf("claim: %w",
			apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", "test failed", 0, false)), true},
		{"a validation error naming the object (a webhook, the schema)",
			apierrors.NewInvalid(schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}, "c1",
				field.ErrorList{field.Invalid(field.NewPath("spec", "topology"), "x", "immutable")}), false},
		{"a conflict", apierrors.NewConflict(clusters, "c1", errors.New("the object has been modified")), false},
		{"not found", apierrors.NewNotFound(clusters, "c1"), false},
		{"forbidden", apierrors.NewForbidden(clusters, "c1", errors.New("no patch")), false},
		{"a timeout", apierrors.NewTimeoutError("the server was unable to return a response", 1), false},
		{"a lost connection", context.DeadlineExceeded, false},
		{"nil", nil, false},
	} {
		if got := testFailed(tc.err); got != tc.want {
			t.Errorf("%s: testFailed(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
