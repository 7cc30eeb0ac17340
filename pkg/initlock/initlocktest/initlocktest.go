package initlocktest

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// NewClientBuilder returns fake.NewClientBuilder() holding objs, each given
// a UID when it has none (WithUIDs), with the interceptors of Funcs.
func NewClientBuilder(objs ...client.Object) *fake.ClientBuilder {
	return fake.NewClientBuilder().WithObjects(WithUIDs(objs...)...).WithInterceptorFuncs(Funcs(interceptor.Funcs{}))
}

// WithUIDs gives each of objs that has no UID a new one, in place, as the
// API server gives every object it creates, and returns objs.
func WithUIDs(objs ...client.Object) []client.Object {
	for _, o := range objs {
		if o.GetUID() == "" {
			o.SetUID(uuid.NewUUID())
		}
	}
	return objs
}

// Funcs returns next with its Create, Patch and Delete made to answer as
// the API server does: an object created without a UID is given one; a
// JSON patch whose test fails, or which names a path that does not exist,
// is refused with the API server's 422 Invalid; a delete whose UID
// precondition does not hold is refused with 409 Conflict. next's own
// functions, when set, are called in place of the client's methods.
func Funcs(next interceptor.Funcs) interceptor.Funcs {
	create, patch, del := next.Create, next.Patch, next.Delete
	next.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		given := obj.GetUID() == ""
		if given {
			obj.SetUID(uuid.NewUUID())
		}
		var err error
		if create != nil {
			err = create(ctx, c, obj, opts...)
		} else {
			err = c.Create(ctx, obj, opts...)
		}
		if err != nil && given {
			obj.SetUID("")
		}
		return err
	}
	next.Patch = func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
		var err error
		if patch != nil {
			err = patch(ctx, c, obj, p, opts...)
		} else {
			err = c.Patch(ctx, obj, p, opts...)
		}
		if err != nil && p.Type() == types.JSONPatchType && (errors.Is(err, jsonpatch.ErrTestFailed) || errors.Is(err, jsonpatch.ErrMissing)) {
			// The API server's answer to a JSON patch it cannot apply.
			return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
		return err
	}
	next.Delete = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if err := checkUID(ctx, c, obj, opts); err != nil {
			return err
		}
		if del != nil {
			return del(ctx, c, obj, opts...)
		}
		return c.Delete(ctx, obj, opts...)
	}
	return next
}

// checkUID refuses a delete whose UID precondition names another object
// than the one stored, with the API server's 409 Conflict.
func checkUID(ctx context.Context, c client.WithWatch, obj client.Object, opts []client.DeleteOption) error {
	var o client.DeleteOptions
	o.ApplyOptions(opts)
	if o.Preconditions == nil || o.Preconditions.UID == nil {
		return nil
	}
	stored, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return nil
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
		return err
	}
	if want := *o.Preconditions.UID; stored.GetUID() != want {
		gvk, err := c.GroupVersionKindFor(obj)
		if err != nil {
			return err
		}
		gvr, _ := meta.UnsafeGuessKindToResource(gvk)
		return apierrors.NewConflict(gvr.GroupResource(), obj.GetName(),
			fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", want, stored.GetUID()))
	}
	return nil
}
