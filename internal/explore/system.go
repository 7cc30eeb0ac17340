package explore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/pkg/initlock"
)

// The world every scenario starts from: one Cluster and its control-plane
// Machines, in one namespace.
const (
	namespace   = "ns"
	clusterName = "c1"
	lockName    = "c1-lock"
)

var (
	clusterKey = apimodel.Key{Kind: "Cluster", Namespace: namespace, Name: clusterName}
	lockKey    = apimodel.Key{Kind: "ConfigMap", Namespace: namespace, Name: lockName}
)

func machineKey(name string) apimodel.Key {
	return apimodel.Key{Kind: "Machine", Namespace: namespace, Name: name}
}

// budget is what is left of the scenario's bounds in one execution.
type budget struct {
	faults, late, events, losses, stale int
}

func (b *budget) spend(c eventCost) {
	b.events--
	if c == costLoss {
		b.losses--
	}
}

// System is one execution of a scenario: the model API server, the actors
// running the real code against it, the adversary, and the checker.
type System struct {
	mu      sync.Mutex
	sc      *Scenario
	store   *apimodel.Store
	gate    *gate
	late    []*apimodel.Request
	budget  budget
	checker *checker
	// floors is, per actor and object, the newest revision the actor's
	// cache has shown it: a cache never goes back in time.
	floors map[string]map[apimodel.Key]int64
	// history is, per actor, a digest of everything it was told: its code
	// is deterministic, so equal digests mean equal states.
	history map[string]*actorHistory
	// outstanding and rounds count, per actor, the requests not answered
	// yet and the rounds of requests issued together.
	outstanding map[string]int
	rounds      map[string]int
	running     map[string]bool
	// snap is the snapshot of revision snapRev.
	snap    *snapshot
	snapRev int64
	aborted     bool
	trace       []string
	tokens      map[string]int
}

func newSystem(sc *Scenario, initial *System) *System {
	s := &System{
		sc:          sc,
		store:       apimodel.NewStore(),
		budget:      budget{faults: sc.Faults, late: sc.Late, events: sc.Events, losses: sc.Losses, stale: sc.StaleReads},
		floors:      map[string]map[apimodel.Key]int64{},
		history:     map[string]*actorHistory{},
		outstanding: map[string]int{},
		rounds:      map[string]int{},
		running:     map[string]bool{},
		tokens:      map[string]int{},
	}
	s.gate = &gate{sys: s}
	s.checker = newChecker()
	if initial != nil {
		s.store = initial.store.Clone()
		s.checker.grants = append(s.checker.grants, initial.checker.grants...)
		return s
	}
	s.setUp()
	return s
}

// setUp creates the starting objects.
func (s *System) setUp() {
	cl := kubeenv.NewCluster("v1beta2", namespace, clusterName)
	if s.sc.Annotated {
		cl.SetAnnotations(map[string]string{"example.com/owner": "team-a"})
	}
	s.mustCreate(clusterKey, cl.Object)
	for _, m := range s.sc.machines() {
		s.mustCreate(machineKey(m), kubeenv.NewMachine("v1beta2", namespace, clusterName, m).Object)
	}
	if s.sc.UpstreamHolder != "" {
		lock := kubeenv.NewLock(namespace, clusterName, s.sc.UpstreamHolder, nil)
		u, err := toUnstructured(lock)
		if err != nil {
			panic(err)
		}
		live, _ := s.store.Get(clusterKey)
		meta := live["metadata"].(map[string]any)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: clusterName, UID: typesUID(meta["uid"])}})
		s.mustCreate(lockKey, u.Object)
		s.checker.upstream(s, s.sc.UpstreamHolder)
	}
	for _, k := range s.sc.Before {
		evs := s.eventsOf(k)
		if len(evs) == 0 {
			panic(fmt.Sprintf("explore: event %s cannot happen at the start of scenario %s", k, s.sc.Name))
		}
		evs[0].run(s)
	}
}

func (s *System) mustCreate(k apimodel.Key, obj map[string]any) {
	if _, err := s.store.Create(k, obj); err != nil {
		panic(err)
	}
}

// client returns a gated client of the model for actor.
func (s *System) client(actor string) *apimodel.Client {
	return &apimodel.Client{Store: s.store, Gate: s.gate, Actor: actor}
}

// token is the deterministic token source of an actor's Locker.
func (s *System) token(actor string) func() string {
	return func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.tokens[actor]++
		return fmt.Sprintf("%s-t%d", actor, s.tokens[actor])
	}
}

// view reads k from actor's cache: the scheduler picks the version.
func (s *System) view(actor string, k apimodel.Key) map[string]any {
	if s.isAborted() {
		return nil
	}
	p := &pending{view: &viewRead{actor: actor, key: k}, done: make(chan struct{})}
	s.gate.add(p)
	<-p.done
	if p.view.chosen.Object == nil {
		return nil
	}
	return runtime.DeepCopyJSON(p.view.chosen.Object)
}

// branch asks the scheduler to pick one of ways at a point of actor's
// script; once the execution is aborted, the last way (which ends the
// script) is taken.
func (s *System) branch(actor, what string, ways ...string) int {
	return s.choose(actor, what, false, ways)
}

// wait makes actor wait until the scheduler lets it go on.
func (s *System) wait(actor, what string) {
	s.choose(actor, what, true, []string{"goes"})
}

func (s *System) choose(actor, what string, wait bool, ways []string) int {
	if s.isAborted() {
		return len(ways) - 1
	}
	p := &pending{branch: &branchPoint{actor: actor, what: what, ways: ways, wait: wait}, done: make(chan struct{})}
	s.gate.add(p)
	<-p.done
	return p.branch.chosen
}

// viewVersions are the versions a cache read may show: those not older
// than what the actor saw last, at most the scenario's View Depth back.
func (s *System) viewVersions(v *viewRead) []apimodel.Version {
	h := s.store.History(v.key)
	if len(h) == 0 {
		return []apimodel.Version{{}}
	}
	floor := s.floors[v.actor][v.key]
	var out []apimodel.Version
	for _, ver := range h {
		if ver.RV >= floor {
			out = append(out, ver)
		}
	}
	n := s.sc.viewDepth(v.actor) + 1
	if s.budget.stale <= 0 {
		n = 1
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

func (s *System) seen(actor string, k apimodel.Key, rv int64) {
	if s.floors[actor] == nil {
		s.floors[actor] = map[apimodel.Key]int64{}
	}
	if rv > s.floors[actor][k] {
		s.floors[actor][k] = rv
	}
}

// actorHistory is what an actor was told, with revisions named by their
// ranks (apimodel.Store.Rank): a digest of its closed rounds of requests,
// and the answers of its open round, which its code may receive in any
// order.
type actorHistory struct {
	digest string
	round  int
	open   []string
}

func (h *actorHistory) add(round int, what string) {
	if round != h.round {
		h.close()
		h.round = round
	}
	h.open = append(h.open, what)
}

func (h *actorHistory) close() {
	if len(h.open) == 0 {
		return
	}
	sort.Strings(h.open)
	sum := sha256.Sum256([]byte(h.digest + "\n" + strings.Join(h.open, "|")))
	h.digest, h.open = hex.EncodeToString(sum[:16]), nil
}

func (h *actorHistory) String() string {
	open := slices.Clone(h.open)
	sort.Strings(open)
	return h.digest + " " + strings.Join(open, "|")
}

// record adds what an actor was told to its history.
func (s *System) record(p *pending, c choice) {
	var actor, what string
	switch {
	case p.branch != nil:
		actor, what = p.branch.actor, fmt.Sprintf("branch %s=%d", p.branch.what, c.way)
	case p.view != nil:
		actor, what = p.view.actor, fmt.Sprintf("view %s #%d", p.view.key, s.store.Rank(p.view.key, p.view.chosen.RV))
	default:
		actor, what = p.req.Actor, s.canonical(p.req)+" -> "+s.canonicalAnswer(p.req)
	}
	h := s.history[actor]
	if h == nil {
		h = &actorHistory{}
		s.history[actor] = h
	}
	h.add(p.round, what)
}

// canonical describes a request with the revisions it names (a merge
// patch's resourceVersion, a delete's precondition) replaced by their
// ranks.
func (s *System) canonical(r *apimodel.Request) string {
	body := r.Body
	for _, marker := range []string{`"resourceVersion":"`, "rv="} {
		i := strings.Index(body, marker)
		if i < 0 {
			continue
		}
		j := i + len(marker)
		k := j
		for k < len(body) && body[k] >= '0' && body[k] <= '9' {
			k++
		}
		rv, _ := strconv.ParseInt(body[j:k], 10, 64)
		body = body[:j] + "#" + strconv.Itoa(s.store.Rank(r.Key, rv)) + body[k:]
	}
	return r.Verb + " " + r.Key.String() + " " + body
}

func (s *System) canonicalAnswer(r *apimodel.Request) string {
	if r.Err != nil {
		if st, ok := r.Err.(apierrors.APIStatus); ok {
			return fmt.Sprintf("%d %s", st.Status().Code, st.Status().Reason)
		}
		return r.Err.Error()
	}
	if r.Result == nil {
		return "ok"
	}
	meta, _ := r.Result["metadata"].(map[string]any)
	rv, _ := strconv.ParseInt(fmt.Sprint(meta["resourceVersion"]), 10, 64)
	return fmt.Sprintf("ok #%d", s.store.Rank(r.Key, rv))
}

// hash digests the state: the store, what is pending and held back, what
// each actor was told (in any order within a round of requests it issued
// together), the budgets, the caches' floors and the checker's state,
// every revision named by its rank. Two executions that reach the same
// digest have the same futures.
func (s *System) hash() string {
	h := sha256.New()
	fmt.Fprintln(h, s.store.Fingerprint(s.maxViewDepth()+1))
	keys := make([]string, 0, len(s.gate.pending))
	for _, p := range s.gate.pending {
		if p.req != nil {
			keys = append(keys, p.req.Actor+" "+s.canonical(p.req))
		} else {
			keys = append(keys, pendingKey(p))
		}
	}
	sort.Strings(keys)
	fmt.Fprintln(h, strings.Join(keys, "\n"))
	for _, l := range s.late {
		fmt.Fprintln(h, "late", l.Actor, s.canonical(l))
	}
	actors := make([]string, 0, len(s.history))
	for a := range s.history {
		actors = append(actors, a)
	}
	sort.Strings(actors)
	for _, a := range actors {
		fmt.Fprintln(h, a, s.history[a])
	}
	fmt.Fprintf(h, "%+v\n", s.budget)
	var floors []string
	for a, fs := range s.floors {
		for k, rv := range fs {
			floors = append(floors, fmt.Sprintf("floor %s %s #%d", a, k, s.store.Rank(k, rv)))
		}
	}
	sort.Strings(floors)
	fmt.Fprintln(h, strings.Join(floors, "\n"))
	fmt.Fprintln(h, s.checker.state())
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func (s *System) isAborted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.aborted
}

// abort ends the execution: every actor is answered at once, with an error,
// until its script ends.
func (s *System) abort() {
	s.mu.Lock()
	s.aborted = true
	pend := s.gate.pending
	s.gate.pending = nil
	s.mu.Unlock()
	for _, p := range pend {
		s.release(p)
	}
}

func (s *System) release(p *pending) {
	switch {
	case p.branch != nil:
		p.branch.chosen = len(p.branch.ways) - 1
	case p.req != nil:
		p.req.Err = context.Canceled
	}
	close(p.done)
}

func (s *System) actorStarted(name string) {
	s.mu.Lock()
	s.running[name] = true
	s.mu.Unlock()
}

func (s *System) actorDone(name string) {
	s.mu.Lock()
	s.running[name] = false
	s.mu.Unlock()
}

func (s *System) anyRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.running {
		if r {
			return true
		}
	}
	return false
}

// snapshot is the live state the checker judges a write against.
type snapshot struct {
	cluster *initlock.Cluster
	lock    *initlock.Lock
	// machines by name, as initlock sees them
	machines map[string]*initlock.Machine
}

// snapshot returns the live state, computed once per revision of the
// store.
func (s *System) snapshot() snapshot {
	rev := s.store.Revision()
	if s.snap != nil && s.snapRev == rev {
		return *s.snap
	}
	sn := snapshot{machines: map[string]*initlock.Machine{}}
	if obj := s.store.Peek(clusterKey); obj != nil {
		cl, err := initlock.ClusterFrom(&unstructured.Unstructured{Object: obj}, nil)
		if err != nil {
			panic(err)
		}
		sn.cluster = &cl
	}
	if obj := s.store.Peek(lockKey); obj != nil {
		cm := &corev1.ConfigMap{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, cm); err != nil {
			panic(err)
		}
		sn.lock = initlock.ObserveLock(cm, clusterName)
	}
	for _, k := range s.store.Keys() {
		if k.Kind != "Machine" {
			continue
		}
		meta := s.store.Peek(k)["metadata"].(map[string]any)
		sn.machines[k.Name] = &initlock.Machine{Namespace: namespace, Name: k.Name, UID: typesUID(meta["uid"]), APIVersion: apimodel.MachineGVK.GroupVersion().String()}
	}
	s.snap, s.snapRev = &sn, rev
	return sn
}

// viewClient reads through an actor's cache and writes live: a manager's
// client.
type viewClient struct {
	*apimodel.Client
	sys *System
}

func (c viewClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if _, ok := obj.(*corev1.ConfigMap); ok {
		kind = "ConfigMap"
	}
	k := apimodel.Key{Kind: kind, Namespace: key.Namespace, Name: key.Name}
	v := c.sys.view(c.Actor, k)
	if v == nil {
		return apierrors.NewNotFound(gr(kind), key.Name)
	}
	return apimodel.Fill(obj, v)
}

func gr(kind string) schema.GroupResource {
	if kind == "ConfigMap" {
		return schema.GroupResource{Resource: "configmaps"}
	}
	return schema.GroupResource{Group: "cluster.x-k8s.io", Resource: strings.ToLower(kind) + "s"}
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func toConfigMap(obj map[string]any) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	return cm, apimodel.Fill(cm, obj)
}

func typesUID(v any) types.UID {
	s, _ := v.(string)
	return types.UID(s)
}

func (s *System) maxViewDepth() int {
	d := s.sc.ManagerViewDepth
	for _, p := range s.sc.Providers {
		d = max(d, p.ViewDepth)
	}
	return d
}
