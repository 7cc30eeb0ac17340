package apimodel

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"crypto/sha256"
	"encoding/hex"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Key names a stored object: its kind ("ConfigMap", "Cluster",
// "Machine"), namespace and name.
type Key struct {
	Kind, Namespace, Name string
}

func (k Key) String() string { return k.Kind + "/" + k.Namespace + "/" + k.Name }

// Version is one version of an object, as a JSON document; Object is nil
// for the deletion of the object. Digest identifies its content, but for
// its resourceVersion.
type Version struct {
	RV     int64
	Object map[string]any
	Digest string
	// text is the JSON Digest digests.
	text string
}

// Store is the model's linearizable storage: objects with UIDs and
// resourceVersions (one global revision counter, as etcd's), and every
// version each object went through, for cache views. Its write operations
// answer as kube-apiserver does, with the same API errors (the package
// documentation lists what is modelled). A write that changes nothing does
// not bump the revision.
type Store struct {
	mu      sync.Mutex
	rev     int64
	created map[Key]int
	objects map[Key]map[string]any
	history map[Key][]Version
	// now stamps creationTimestamps.
	now time.Time
	// guard, when set, is the admission policy enforced on deletes and
	// updates of ConfigMaps (SetGuard).
	guard *Guard
}

// SetNow sets the time the store stamps creationTimestamps with.
func (s *Store) SetNow(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = t
}

// SetGuard makes the store enforce g on every delete and update of a
// ConfigMap, as kube-apiserver enforces an installed
// ValidatingAdmissionPolicy: after the write's preconditions, before the
// object is written, deleted or marked for deletion. nil enforces nothing.
func (s *Store) SetGuard(g *Guard) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.guard = g
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{
		objects: map[Key]map[string]any{},
		created: map[Key]int{},
		history: map[Key][]Version{},
		now:     time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC),
	}
}

// Clone returns a copy of the store, which shares nothing with it.
func (s *Store) Clone() *Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := NewStore()
	c.rev, c.now, c.guard = s.rev, s.now, s.guard
	maps.Copy(c.created, s.created)
	maps.Copy(c.objects, s.objects) // stored objects are never changed in place
	for k, h := range s.history {
		c.history[k] = append([]Version(nil), h...)
	}
	return c
}

// statusSubresource tells which kinds keep their status out of writes of
// the object.
var statusSubresource = map[string]bool{"Cluster": true, "Machine": true}

func gr(kind string) schema.GroupResource { return served[kind].GroupResource() }

// Get returns a copy of the object, or NotFound.
func (s *Store) Get(k Key) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok := s.objects[k]
	if !ok {
		return nil, apierrors.NewNotFound(gr(k.Kind), k.Name)
	}
	return deepCopy(obj), nil
}

// Peek returns the stored object itself, nil when it does not exist: the
// caller must not change it.
func (s *Store) Peek(k Key) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[k]
}

// Create stores obj under k with a new UID and revision; AlreadyExists if
// the name is taken.
func (s *Store) Create(k Key, obj map[string]any) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[k]; ok {
		return nil, apierrors.NewAlreadyExists(gr(k.Kind), k.Name)
	}
	obj = normalize(obj)
	meta := metadata(obj)
	meta["namespace"], meta["name"] = k.Namespace, k.Name
	s.created[k]++
	meta["uid"] = fmt.Sprintf("%s-%s-%d", strings.ToLower(k.Kind), k.Name, s.created[k])
	meta["creationTimestamp"] = s.now.Format(time.RFC3339)
	delete(meta, "resourceVersion")
	if statusSubresource[k.Kind] {
		meta["generation"] = int64(1)
	}
	return s.commit(k, obj), nil
}

// Patch applies a JSON patch or a merge patch to the object, as the API
// server does: NotFound when it does not exist, 422 Invalid when a JSON
// patch does not apply (a failed test among them), Conflict when the
// patched object carries a resourceVersion other than the current one.
func (s *Store) Patch(k Key, pt types.PatchType, patch []byte) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objects[k]
	if !ok {
		return nil, apierrors.NewNotFound(gr(k.Kind), k.Name)
	}
	if pt != types.JSONPatchType && pt != types.MergePatchType {
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", gr(k.Kind), k.Name, "unsupported patch type "+string(pt), 0, false)
	}
	next, ok := applyPatch(cur, pt, patch)
	if !ok {
		var err error
		if next, err = libraryPatch(cur, pt, patch); err != nil {
			return nil, err
		}
	}
	return s.update(k, cur, next)
}

// libraryPatch applies a JSON patch or (any other type) a merge patch to a
// copy of cur with the library the API server uses, and fails as the API
// server does.
func libraryPatch(cur map[string]any, pt types.PatchType, patch []byte) (map[string]any, error) {
	curJS, err := json.Marshal(cur)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var patched []byte
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if patched, err = p.Apply(curJS); err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	default:
		if patched, err = jsonpatch.MergePatch(curJS, patch); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	next, err := decode(patched)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return next, nil
}

// Update replaces the object with obj, as a PUT: Conflict when obj carries
// a resourceVersion other than the current one (an empty one is refused as
// the API server refuses it).
func (s *Store) Update(k Key, obj map[string]any) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objects[k]
	if !ok {
		return nil, apierrors.NewNotFound(gr(k.Kind), k.Name)
	}
	if _, ok := metadata(obj)["resourceVersion"]; !ok {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: gr(k.Kind).Group, Kind: k.Kind}, k.Name, nil)
	}
	return s.update(k, cur, normalize(obj))
}

// update makes next the object, keeping what a write of the object may not
// change.
func (s *Store) update(k Key, cur, next map[string]any) (map[string]any, error) {
	curMeta, meta := metadata(cur), metadata(next)
	if rv, ok := meta["resourceVersion"]; ok && rv != curMeta["resourceVersion"] {
		return nil, apierrors.NewConflict(gr(k.Kind), k.Name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if uid, ok := meta["uid"]; ok && uid != curMeta["uid"] {
		return nil, apierrors.NewConflict(gr(k.Kind), k.Name,
			fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", uid, curMeta["uid"]))
	}
	for _, f := range []string{"uid", "creationTimestamp", "namespace", "name", "generation", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		if v, ok := curMeta[f]; ok {
			meta[f] = v
		} else {
			delete(meta, f)
		}
	}
	if _, deleting := curMeta["deletionTimestamp"]; deleting {
		// An object being deleted takes no new finalizer; once it has none
		// left, it is gone.
		for _, f := range finalizersOf(meta) {
			if !slices.Contains(finalizersOf(curMeta), f) {
				return nil, apierrors.NewInvalid(schema.GroupKind{Group: gr(k.Kind).Group, Kind: k.Kind}, k.Name, field.ErrorList{
					field.Forbidden(field.NewPath("metadata", "finalizers"), "no new finalizers can be added if the object is being deleted")})
			}
		}
		if len(finalizersOf(meta)) == 0 {
			next = normalize(next)
			s.remove(k)
			return next, nil
		}
	}
	if s.guard != nil && k.Kind == "ConfigMap" {
		if err := s.guard.admitUpdate(cur, next); err != nil {
			return nil, err
		}
	}
	if statusSubresource[k.Kind] {
		if st, ok := cur["status"]; ok {
			next["status"] = st
		} else {
			delete(next, "status")
		}
		if !reflect.DeepEqual(cur["spec"], next["spec"]) {
			meta["generation"] = curMeta["generation"].(int64) + 1
		}
	}
	// Stored objects are normalized, and next is plain JSON (decoded, or
	// normalized by the caller, with metadata taken from cur): only its
	// emptied metadata maps are left to drop.
	next = tidy(next)
	if reflect.DeepEqual(cur, next) {
		return deepCopy(cur), nil // no change: no new revision
	}
	return s.commit(k, next), nil
}

// Delete deletes the object, honouring UID and resourceVersion
// preconditions (Conflict when they do not hold) and, for a ConfigMap, the
// guard set with SetGuard (403 Forbidden when it refuses), as the admin.
func (s *Store) Delete(k Key, uid *types.UID, rv *string) error {
	return s.DeleteWith(k, DeleteRequest{UID: uid, ResourceVersion: rv})
}

// DeleteRequest is a delete as the API server receives it, as far as the
// lock guard reads it: its preconditions, its propagation policy and its
// user (the admin when empty).
type DeleteRequest struct {
	UID              *types.UID
	ResourceVersion  *string
	Propagation      *metav1.DeletionPropagation
	OrphanDependents *bool
	User             string
}

// DeleteWith is Delete with the whole request: the preconditions are
// checked first, as the API server checks them before admission, then
// the lock guard judges it.
func (s *Store) DeleteWith(k Key, r DeleteRequest) error {
	uid, rv := r.UID, r.ResourceVersion
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objects[k]
	if !ok {
		return apierrors.NewNotFound(gr(k.Kind), k.Name)
	}
	meta := metadata(cur)
	if uid != nil && string(*uid) != meta["uid"] {
		return apierrors.NewConflict(gr(k.Kind), k.Name,
			fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", *uid, meta["uid"]))
	}
	if rv != nil && *rv != meta["resourceVersion"] {
		return apierrors.NewConflict(gr(k.Kind), k.Name,
			fmt.Errorf("precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *rv, meta["resourceVersion"]))
	}
	if s.guard != nil && k.Kind == "ConfigMap" {
		if err := s.guard.admitDelete(cur, r); err != nil {
			return err
		}
	}
	if len(finalizersOf(meta)) > 0 {
		// Finalizers hold the object: it is marked for deletion once, and
		// goes when the last of them is removed.
		if _, ok := meta["deletionTimestamp"]; !ok {
			next := deepCopy(cur)
			m := metadata(next)
			m["deletionTimestamp"] = s.now.Format(time.RFC3339)
			m["deletionGracePeriodSeconds"] = int64(0)
			s.commit(k, next)
		}
		return nil
	}
	s.remove(k)
	return nil
}

// Purge removes the object whatever holds it, as the deletion of its
// namespace ends in the end (its finalizers done, admission passed): the
// explorer's restore deletes the namespace in one step.
func (s *Store) Purge(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[k]; ok {
		s.remove(k)
	}
}

// remove deletes k, as a new revision.
func (s *Store) remove(k Key) {
	s.rev++
	delete(s.objects, k)
	s.history[k] = append(s.history[k], Version{RV: s.rev, Digest: "deleted"})
}

func finalizersOf(meta map[string]any) []any {
	f, _ := meta["finalizers"].([]any)
	return f
}

// Mutate changes the object directly, as another client (a person, a
// controller, the status subresource) would, with a new revision. It
// returns false when the object does not exist.
func (s *Store) Mutate(k Key, change func(obj map[string]any)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.objects[k]
	if !ok {
		return false
	}
	next := deepCopy(cur)
	change(next)
	if next = normalize(next); !reflect.DeepEqual(cur, next) {
		s.commit(k, next)
	}
	return true
}

// commit stores obj, normalized, as the next revision of k and returns a
// copy.
func (s *Store) commit(k Key, obj map[string]any) map[string]any {
	s.rev++
	delete(metadata(obj), "resourceVersion")
	js, _ := json.Marshal(obj)
	sum := sha256.Sum256(js)
	metadata(obj)["resourceVersion"] = strconv.FormatInt(s.rev, 10)
	s.objects[k] = obj
	s.history[k] = append(s.history[k], Version{RV: s.rev, Object: obj, Digest: hex.EncodeToString(sum[:12]), text: string(js)})
	return deepCopy(obj)
}
