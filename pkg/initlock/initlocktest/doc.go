// Package initlocktest makes controller-runtime's fake client answer the
// requests of an initlock.Locker as the API server answers them, so that a
// bootstrap provider's unit tests on the fake client keep passing, unchanged
// in what they assert, once its init lock is initlock's.
//
// The Locker relies on three things the API server does and the fake
// client (sigs.k8s.io/controller-runtime/pkg/client/fake) does not:
//
//   - Every object has a UID. The Locker records the Cluster's and the
//     Machine's UIDs with each grant, and its compare-and-swap of the
//     Cluster's grant register tests the Cluster's UID: on a Cluster
//     without one the test fails and no Machine is ever granted the lock.
//     WithUIDs gives objects a UID before they are handed to the fake
//     client, and Funcs gives one to every object created through it.
//   - A JSON patch whose test fails is refused with 422 Invalid and the
//     API server's generic message. The fake client returns the JSON-patch
//     library's own error, which the Locker cannot tell from a lost answer
//     (a write that may have been applied): a Machine that lost the race
//     for a free lock is then not refused at once, and the call may end in
//     an error instead of "held by another Machine". Funcs answers as the
//     API server does.
//   - A delete with a UID precondition is refused with 409 Conflict when
//     the object has another UID. The fake client checks only the
//     resourceVersion precondition; Funcs checks the UID too.
//
// A provider's test builds its fake client with NewClientBuilder (or adds
// WithUIDs and Funcs to its own builder) and passes it to the provider's
// real mutex; nothing else changes. NewClientBuilder's result is a
// *fake.ClientBuilder: WithScheme, WithStatusSubresource and the others
// apply as usual. Tests that inject errors wrap the built client as
// before.
//
// Limits. Objects given to the builder's WithObjects or WithLists
// directly, rather than through NewClientBuilder or WithUIDs, have no UID.
// A later WithInterceptorFuncs on the builder replaces Funcs: pass the
// test's own interceptor.Funcs to Funcs instead, which calls them. The UID
// precondition is checked with a read before the delete, not atomically
// with it, which is enough for tests whose requests do not race. Nothing
// else of the fake client changes: it remains an imitation, and the
// project's test/library checks, on a real API server, that the Locker
// answers the same there as on a fake client set up by this package.
package initlocktest
