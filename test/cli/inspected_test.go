package clisuite

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/cli"
	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

// TestReleaseReleasesWhatItInspected checks, on the real API server, a
// release whose lock or grant changes between its reading and its writes:
// a Machine the grant names back once the grant is retired stops a release
// made without --force before the withdraw, and a lock created after the
// release found none is left alone, even with --force, and a grant
// rewritten for its Machine by another call ends the release with an
// error, not a report of a grant it did not empty.
func TestReleaseReleasesWhatItInspected(t *testing.T) {
	restored := func(machine string) func(*unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{wire.GrantAnnotation: `{"machineName":"` + machine + `","token":"restored"}`})
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		// machines exist from the start; the grant names m1 by name only,
		// and there is no lock.
		machines []string
		// before runs before the request r is sent, the n-th of its verb
		// and resource (from 1); after, once its answer came.
		before, after func(t *testing.T, b *Backend, ns string, cl *unstructured.Unstructured, r kubeenv.Request, n int32)
		// wantGrant is the Machine the grant names at the end; wantLock
		// whether a lock is left.
		wantGrant string
		wantLock  bool
	}{
		{
			name: "the grant's Machine back once the grant is retired, no --force",
			args: []string{"--yes"},
			after: func(t *testing.T, b *Backend, ns string, _ *unstructured.Unstructured, r kubeenv.Request, n int32) {
				if r.Verb == "patch" && r.Resource == "clusters" && n == 1 {
					b.newMachine(t, ns, "c1", "m1", nil)
				}
			},
			wantGrant: "m1",
		},
		{
			name:     "a lock created once the release found none, --force",
			args:     []string{"--force", "--yes"},
			machines: []string{"m1", "m2"},
			before: func(t *testing.T, b *Backend, ns string, cl *unstructured.Unstructured, r kubeenv.Request, n int32) {
				if r.Verb == "get" && r.Resource == "configmaps" && n == 2 {
					b.newLock(t, ns, "c1", "m2", cl)
				}
			},
			wantGrant: "m1",
			wantLock:  true,
		},
		{
			name:     "the grant rewritten for its Machine by another call before the retire, --force",
			args:     []string{"--force", "--yes"},
			machines: []string{"m1"},
			before: func(t *testing.T, b *Backend, ns string, cl *unstructured.Unstructured, r kubeenv.Request, n int32) {
				if r.Verb == "patch" && r.Resource == "clusters" && n == 1 {
					other := cl.DeepCopy()
					other.SetAnnotations(map[string]string{wire.GrantAnnotation: `{"machineName":"m1","token":"another-acquisition"}`})
					if err := b.Client.Patch(t.Context(), other, client.MergeFrom(cl)); err != nil {
						t.Errorf("rewriting the grant: %v", err)
					}
				}
			},
			wantGrant: "m1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := apiServer()
			ns := b.Namespace(t)
			cl := b.newCluster(t, ns, "c1", false, restored("m1"))
			for _, m := range tc.machines {
				b.newMachine(t, ns, "c1", m, nil)
			}
			var counts sync32
			through := func(req *http.Request, send func() (*http.Response, error)) (*http.Response, error) {
				r := kubeenv.Classify(req)
				n := counts.add(r.Verb + " " + r.Resource)
				if tc.before != nil {
					tc.before(t, b, ns, cl, r, n)
				}
				resp, err := send()
				if tc.after != nil && err == nil && resp.StatusCode < 300 {
					tc.after(t, b, ns, cl, r, n)
				}
				return resp, err
			}
			r := b.runThrough(t, through, append([]string{"release", "c1", "-n", ns}, tc.args...)...).ExpectCode(t, cli.ExitError)
			if got := b.grantOf(t, cl); got != tc.wantGrant {
				t.Errorf("the grant names %q, want %q\nstderr:\n%s", got, tc.wantGrant, r.Err)
			}
			if lock := kubeenv.MustGetLock(t, b.Client, ns, "c1"); (lock != nil) != tc.wantLock {
				t.Errorf("lock left: %v, want %v\nstderr:\n%s", lock != nil, tc.wantLock, r.Err)
			}
		})
	}
}

// runThrough runs a command against the real API server as an admin,
// routing every request it sends through fn, which sends it on with send.
func (b *Backend) runThrough(t *testing.T, fn func(req *http.Request, send func() (*http.Response, error)) (*http.Response, error), args ...string) Result {
	t.Helper()
	var opts cli.Options
	args = append(args, b.connect(t, &opts, nil, nil)...)
	wrap := opts.WrapConfig
	opts.WrapConfig = func(cfg *rest.Config) *rest.Config {
		cfg = rest.CopyConfig(wrap(cfg))
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return kubeenv.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
				return fn(req, func() (*http.Response, error) { return rt.RoundTrip(req) })
			})
		})
		return cfg
	}
	return Execute(t, opts, args...)
}

// sync32 counts requests by kind, from any goroutine.
type sync32 struct {
	m sync.Map
}

func (s *sync32) add(key string) int32 {
	v, _ := s.m.LoadOrStore(key, new(atomic.Int32))
	return v.(*atomic.Int32).Add(1)
}
