package explore

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/initlock/initlock/internal/kubeenv"
	"github.com/initlock/initlock/internal/kubeenv/apimodel"
	"github.com/initlock/initlock/internal/kubeenv/wire"
)

type eventCost int

const (
	costEvent eventCost = iota
	costLoss
)

type event struct {
	name string
	kind EventKind
	cost eventCost
	run  func(*System)
}

// events lists the adversary's events possible now, within the budgets,
// while some actor still runs.
func (s *System) events() []*event {
	if s.budget.events <= 0 || !s.anyRunning() {
		return nil
	}
	var out []*event
	for _, k := range s.sc.Adversary {
		if costOf(k) == costLoss && s.budget.losses <= 0 {
			continue
		}
		out = append(out, s.eventsOf(k)...)
	}
	return out
}

func costOf(k EventKind) eventCost {
	switch k {
	case DeleteLock, DeleteLockAtVersion, FinalizerGone, RevertRegister, RemoveRegister, ReshapeLock, CollectLock:
		return costLoss
	}
	return costEvent
}

func (s *System) eventsOf(k EventKind) []*event {
	sn := s.snapshot() // one per revision
	if _, ok := eventClasses[k]; !ok {
		panic(fmt.Sprintf("explore: event kind %s has no fault class in eventClasses", k))
	}
	ev := func(name string, run func(*System)) *event {
		return &event{name: name, kind: k, cost: costOf(k), run: run}
	}
	if r, ok := restores[k]; ok {
		if s.backup == nil || s.restored {
			return nil
		}
		return []*event{ev(r.name, func(s *System) {
			s.restored = true
			r.run(s, s.backup)
		})}
	}
	switch k {
	case DeleteLock:
		if sn.lock != nil && !sn.lock.Deleting {
			return []*event{ev("the lock is deleted", func(s *System) {
				// With no precondition: the lock guard, if installed,
				// refuses it unless the lock is marked for release.
				s.removeLock("the adversary's delete", func() error { return s.store.Delete(lockKey, nil, nil) })
			})}
		}
	case HoldDeletion:
		if sn.lock != nil && !sn.lock.Deleting {
			return []*event{ev("another controller's finalizer holds the lock, deleted", func(s *System) {
				s.store.Mutate(lockKey, func(o map[string]any) {
					meta := o["metadata"].(map[string]any)
					meta["finalizers"] = []any{otherFinalizer}
					meta["deletionTimestamp"] = start.Format(time.RFC3339)
					setAnnotation(o, wire.ReleaseAnnotation, ptrTo(meta["uid"].(string)))
				})
			})}
		}
	case FinalizerGone:
		if sn.lock != nil && sn.lock.Deleting {
			return []*event{ev("the other controller's finalizer is removed: the lock goes", func(s *System) {
				before := s.store.Peek(lockKey)
				if _, err := s.store.Patch(lockKey, types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)); err != nil {
					panic(err)
				}
				s.checker.lockRemoved(s, before, "the end of its deletion")
				s.checker.lockDeleted()
			})}
		}
	case RemoveRegister:
		if sn.cluster != nil && sn.cluster.Grant != nil {
			return []*event{ev("the grant register's annotation is removed", func(s *System) {
				s.store.Mutate(clusterKey, func(o map[string]any) { setAnnotation(o, wire.GrantAnnotation, nil) })
				s.checker.registerLost()
			})}
		}
	case RevertRegister:
		return s.revertEvents(sn)
	case DeleteMachine:
		if m := s.sc.holder(); m != "" && sn.machines[m] != nil {
			return []*event{ev("machine "+m+" is deleted", func(s *System) {
				_ = s.store.Delete(machineKey(m), nil, nil)
				s.checker.machineGone(m)
			})}
		}
	case DeleteOwner:
		return s.deleteOwnerEvents(sn)
	case MachineBack:
		if m := s.sc.holder(); m != "" && sn.machines[m] == nil && s.pendingMachine(m) == nil {
			return []*event{ev("machine "+m+" comes back", func(s *System) {
				s.mustCreate(machineKey(m), kubeenv.NewMachine("v1beta2", namespace, clusterName, m).Object)
				s.checker.machineBack(s)
			})}
		}
	case RecreateMachine:
		var out []*event
		for _, m := range s.sc.machines() {
			if sn.machines[m] == nil {
				continue
			}
			out = append(out, ev("machine "+m+" is deleted and created again", func(s *System) {
				_ = s.store.Delete(machineKey(m), nil, nil)
				s.mustCreate(machineKey(m), kubeenv.NewMachine("v1beta2", namespace, clusterName, m).Object)
				s.checker.machineGone(m)
			}))
		}
		return out
	case DeleteCluster:
		if sn.cluster != nil && !sn.cluster.Deleting {
			return []*event{ev("the cluster is deleted; Cluster API's finalizer holds it", func(s *System) {
				s.store.Mutate(clusterKey, func(o map[string]any) {
					meta := o["metadata"].(map[string]any)
					meta["finalizers"] = []any{clusterFinalizer}
					meta["deletionTimestamp"] = start.Format(time.RFC3339)
				})
			})}
		}
	case Pause, Unpause:
		if sn.cluster != nil && sn.cluster.Paused == (k == Unpause) {
			return []*event{ev("the cluster is "+map[bool]string{true: "paused", false: "unpaused"}[k == Pause], func(s *System) {
				s.store.Mutate(clusterKey, func(o map[string]any) { o["spec"].(map[string]any)["paused"] = k == Pause })
			})}
		}
	case ReplaceCluster:
		if sn.cluster != nil {
			return []*event{ev("the cluster, its machines and its lock are deleted, and created again", func(s *System) {
				_ = s.store.Delete(lockKey, nil, nil) // the lock guard refuses it, if installed
				_ = s.store.Delete(clusterKey, nil, nil)
				for _, m := range s.sc.machines() {
					_ = s.store.Delete(machineKey(m), nil, nil)
					s.checker.machineGone(m)
				}
				s.mustCreate(clusterKey, kubeenv.NewCluster("v1beta2", namespace, clusterName).Object)
				for _, m := range s.sc.machines() {
					s.mustCreate(machineKey(m), kubeenv.NewMachine("v1beta2", namespace, clusterName, m).Object)
				}
				s.checker.clusterReplaced()
			})}
		}
	case Backup:
		if s.backup == nil {
			return []*event{ev("the namespace is backed up", func(s *System) { s.backup = s.takeBackup() })}
		}
	case RestoreMachine:
		if s.backup == nil || s.restored {
			return nil
		}
		var out []*event
		for _, it := range s.backup.items {
			if m := it.GetName(); it.GetKind() == "Machine" && sn.machines[m] != nil {
				out = append(out, ev("machine "+m+" is deleted and restored alone from the backup", func(s *System) {
					s.restored = true
					s.restoreMachine(s.backup, m)
				}))
			}
		}
		return out
	case MachinesRestored:
		if len(s.pending) > 0 {
			return []*event{ev("the Machines are restored", func(s *System) { s.restoreMachines() })}
		}
	case CollectLock:
		if sn.lock != nil && !sn.lock.Deleting {
			return []*event{ev("the garbage collector deletes the lock", func(s *System) {
				s.removeLock("the garbage collector", func() error { return collectorDelete(s.store) })
			})}
		}
	case ReshapeLock:
		if sn.lock != nil && !sn.lock.Deleting {
			return []*event{ev("the lock's label is taken away and it is deleted", func(s *System) {
				before := s.store.Peek(lockKey)
				if _, err := s.store.Patch(lockKey, types.JSONPatchType,
					[]byte(`[{"op":"remove","path":"/metadata/labels/cluster.x-k8s.io~1cluster-name"}]`)); err != nil {
					return // refused by the lock guard
				}
				if err := s.store.Delete(lockKey, nil, nil); err == nil {
					s.checker.lockRemoved(s, before, "a delete after taking its shape away")
					s.checker.lockDeleted()
				}
			})}
		}
	case LeaveReleaseMark:
		if sn.lock != nil && !sn.lock.Deleting && !sn.lock.Releasable {
			return []*event{ev("a release stops between its mark and its delete", func(s *System) {
				s.store.Mutate(lockKey, func(o map[string]any) { setAnnotation(o, wire.ReleaseAnnotation, ptrTo(uidOf(o))) })
			})}
		}
	case ApplyOldLock:
		if sn.lock != nil && !sn.lock.Deleting && !hasAnnotation(s.store.Peek(lockKey), wire.ReleaseAnnotation) {
			return []*event{ev("an earlier lock's manifest is applied over the lock, with that lock's release mark", func(s *System) {
				s.store.Mutate(lockKey, func(o map[string]any) { setAnnotation(o, wire.ReleaseAnnotation, ptrTo("uid-of-an-earlier-lock")) })
			})}
		}
	case DeleteLockAtVersion:
		if sn.lock != nil && !sn.lock.Deleting {
			return []*event{ev("a script deletes the lock at the version it read", func(s *System) {
				rv := rvOf(s.store.Peek(lockKey))
				s.removeLock("a script's delete at the version it read", func() error {
					return s.store.DeleteWith(lockKey, apimodel.DeleteRequest{ResourceVersion: &rv, User: "a-script"})
				})
			})}
		}
	case LeaveMoveMark:
		if sn.lock != nil && !sn.lock.Deleting && !sn.lock.MoveMark {
			return []*event{ev("a move that failed leaves delete-for-move on the lock", func(s *System) {
				s.store.Mutate(lockKey, func(o map[string]any) { setAnnotation(o, wire.MoveAnnotation, ptrTo("")) })
			})}
		}
	case InitCompletes:
		if sn.cluster != nil && !sn.cluster.Initialized && (s.checker.anyGrant() || len(s.gate.pending) == 0) {
			return []*event{ev("the control plane is initialised", func(s *System) {
				s.store.Mutate(clusterKey, func(o map[string]any) {
					o["status"] = map[string]any{"initialization": map[string]any{"controlPlaneInitialized": true}}
				})
				s.checker.initialised()
			})}
		}
	}
	return nil
}

// otherFinalizer is the finalizer of a controller other than initlock's.
const otherFinalizer = "example.com/keep"

// gcUser is the user the garbage collector deletes as: one the lock guard
// does not know by name (a kube-controller-manager started with a kubeconfig
// user of its own), so that the guard must tell the collector by what it
// sends.
const gcUser = "kube-controller-manager"

// collectorDelete deletes the lock as kube-controller-manager's garbage
// collector does (k8s.io/kubernetes pkg/controller/garbagecollector,
// deleteObject): with the UID and the resourceVersion it read as
// preconditions and a propagation policy, as gcUser.
func collectorDelete(st *apimodel.Store) error {
	cur := st.Peek(lockKey)
	if cur == nil {
		return st.Delete(lockKey, nil, nil) // NotFound, as the API server answers
	}
	uid, rv := types.UID(uidOf(cur)), rvOf(cur)
	background := metav1.DeletePropagationBackground
	return st.DeleteWith(lockKey, apimodel.DeleteRequest{UID: &uid, ResourceVersion: &rv, Propagation: &background, User: gcUser})
}

// clusterFinalizer is Cluster API's finalizer on a Cluster.
const clusterFinalizer = "cluster.cluster.x-k8s.io"

// removeLock deletes the lock with del and, once it is gone, has the
// checker judge its removal by `by`; a delete refused, or one a finalizer
// holds, loses nothing.
func (s *System) removeLock(by string, del func() error) {
	before := s.store.Peek(lockKey)
	if del() == nil && s.store.Peek(lockKey) == nil {
		s.checker.lockRemoved(s, before, by)
		s.checker.lockDeleted()
	}
}

// restores are the restores of the backup, at most one an execution, by
// kind of event.
var restores = map[EventKind]struct {
	name string
	run  func(*System, *backup)
}{
	Restore: {"the namespace is deleted and restored from the backup", (*System).restoreBackup},
	RestoreRewritten: {"the namespace is deleted and restored from the backup, the lock's record written with its key escaped",
		func(s *System, b *backup) { s.restoreBackup(b.withEscapedRecord()) }},
	RestoreClusterFirst: {"the namespace is deleted and restored from the backup, the Machines left for later", (*System).restoreClusterFirst},
	RestoreOverLock: {"the cluster and its machines are deleted and restored from the backup over the lock, the Machines left for later",
		(*System).restoreOverLock},
	RestoreUpdate: {"the backup is restored over the live objects with the update policy", (*System).restoreUpdate},
}

// revertEvents are the register's earlier values it may go back to.
func (s *System) revertEvents(sn snapshot) []*event {
	if sn.cluster == nil {
		return nil
	}
	cur := sn.cluster.Grant.Raw()
	seen := map[string]bool{cur: true}
	var out []*event
	for _, v := range s.store.History(clusterKey) {
		if v.Object == nil {
			continue
		}
		meta, _ := v.Object["metadata"].(map[string]any)
		if meta["uid"] != string(sn.cluster.UID) {
			continue
		}
		ann, _ := meta["annotations"].(map[string]any)
		val, _ := ann[wire.GrantAnnotation].(string)
		if seen[val] {
			continue
		}
		seen[val] = true
		out = append(out, &event{name: fmt.Sprintf("the grant register goes back to %s", describeRegister(val)), kind: RevertRegister, cost: costLoss, run: func(s *System) {
			s.store.Mutate(clusterKey, func(o map[string]any) {
				if val == "" {
					setAnnotation(o, wire.GrantAnnotation, nil)
				} else {
					setAnnotation(o, wire.GrantAnnotation, &val)
				}
			})
			s.reverted = true
			s.checker.registerLost()
		}})
	}
	return out
}

func describeRegister(v string) string {
	if v == "" {
		return "empty"
	}
	var g map[string]any
	if json.Unmarshal([]byte(v), &g) == nil {
		return fmt.Sprintf("%v/%v", g["machineName"], g["token"])
	}
	return v
}

func ptrTo[T any](v T) *T { return &v }

func setAnnotation(o map[string]any, k string, v *string) {
	meta := o["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	if v == nil {
		delete(ann, k)
	} else {
		ann[k] = *v
	}
	meta["annotations"] = ann
}
