package velerosim

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// restoreByResource is Restore with Options.Workers: it cuts items into
// runs of one resource and restores each run with up to Workers items at
// once, one run after the other.
func (r *Restorer) restoreByResource(ctx context.Context, items []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(items))
	for start := 0; start < len(items); {
		gr, err := r.resource(items[start])
		if err != nil {
			return out, err
		}
		end := start + 1
		for ; end < len(items); end++ {
			next, err := r.resource(items[end])
			if err != nil {
				return out, err
			}
			if next != gr {
				break
			}
		}
		created, err := r.restoreRun(ctx, items[start:end])
		out = append(out, created...)
		if err != nil {
			return out, err
		}
		start = end
	}
	return out, nil
}

// restoreRun restores run with up to Workers items at once and returns the
// items created, in run's order. After an error it starts no more items,
// and it returns the errors of the items started.
func (r *Restorer) restoreRun(ctx context.Context, run []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	created := make([]*unstructured.Unstructured, len(run))
	errs := make([]error, len(run))
	var failed atomic.Bool
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(r.opts.Workers, len(run)) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(run) {
					return
				}
				if created[i], errs[i] = r.restoreItem(ctx, run[i]); errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	out := make([]*unstructured.Unstructured, 0, len(run))
	for _, obj := range created {
		if obj != nil {
			out = append(out, obj)
		}
	}
	return out, errors.Join(errs...)
}
