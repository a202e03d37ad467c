package main

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cilium/cilium/pkg/allocator"
	"github.com/cilium/cilium/pkg/identity/key"
	"github.com/cilium/cilium/pkg/idpool"
	v2 "github.com/cilium/cilium/pkg/k8s/apis/cilium.io/v2"
	"github.com/cilium/cilium/pkg/labels"
)

// pod is one pod an agent runs: its Pod and CiliumEndpoint share the name.
type pod struct {
	name     string
	key      allocator.AllocatorKey
	identity int64
}

type stats struct {
	podsStarted, podsEnded, allocations, newIdentities int
	allocationErrors, writeErrors                      int
}

// agent is one node's agent: its own allocator (with its own identity
// informer, local keys and periodic key sync) and the pods it runs.
type agent struct {
	index   int
	cfg     config
	clients clients
	alloc   *allocator.Allocator
	rng     *rand.Rand

	mu    sync.Mutex
	pods  []pod
	seq   int
	stats stats
}

func newAgent(index int, cfg config, c clients, seed int64) (*agent, error) {
	alloc, err := newAllocator(c.cilium, cfg.syncInterval, cfg.minID, cfg.maxID)
	if err != nil {
		return nil, fmt.Errorf("cilium allocator: %w", err)
	}
	return &agent{index: index, cfg: cfg, clients: c, alloc: alloc, rng: rand.New(rand.NewSource(seed))}, nil
}

// run starts the agent's pods, then churns (ends a random pod, starts
// another) until ctx ends; without churn it returns once they started.
func (a *agent) run(ctx context.Context) {
	if err := a.alloc.WaitForInitialSync(ctx); err != nil {
		a.logf("initial identity sync: %v", err)
		return
	}
	for i := 0; i < a.cfg.pods && ctx.Err() == nil; i++ {
		a.startPod(ctx)
	}
	if a.cfg.churn <= 0 {
		return
	}
	tick := time.NewTicker(a.cfg.churn)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		a.mu.Lock()
		n := len(a.pods)
		a.mu.Unlock()
		if n > 0 {
			a.endPod(ctx, a.rng.Intn(n))
		}
		a.startPod(ctx)
	}
}

// endAll ends every pod the agent runs.
func (a *agent) endAll(ctx context.Context) {
	for {
		a.mu.Lock()
		n := len(a.pods)
		a.mu.Unlock()
		if n == 0 || ctx.Err() != nil {
			return
		}
		a.endPod(ctx, n-1)
	}
}

func (a *agent) close() { a.alloc.Delete() }

// identityKey is the identity key of label set i in the namespace, the
// labels Cilium derives from a pod with label app=<prefix>-<i>.
func (a *agent) identityKey(i int) *key.GlobalIdentity {
	lbls := labels.NewLabelsFromModel([]string{
		fmt.Sprintf("k8s:app=%s-%d", a.cfg.labelPrefix, i),
		"k8s:io.kubernetes.pod.namespace=" + a.cfg.namespace,
		"k8s:io.cilium.k8s.policy.cluster=default",
		"k8s:io.cilium.k8s.policy.serviceaccount=default",
	})
	return &key.GlobalIdentity{LabelArray: lbls.LabelArray()}
}

// startPod creates a Pending Pod, allocates its identity with Cilium's
// allocator (Allocator.Allocate: reuse strips the operator's mark through
// crdBackend.AcquireReference) and writes the CiliumEndpoint that uses it.
func (a *agent) startPod(churnCtx context.Context) {
	// A pod once begun is finished even if the churn ends meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(churnCtx), time.Minute)
	defer cancel()
	set := a.rng.Intn(a.cfg.labelSets)
	a.mu.Lock()
	a.seq++
	name := fmt.Sprintf("%s-s%d-n%d-%d", a.cfg.labelPrefix, a.cfg.seed, a.index, a.seq)
	a.mu.Unlock()
	app := fmt.Sprintf("%s-%d", a.cfg.labelPrefix, set)

	p, err := a.clients.kube.CoreV1().Pods(a.cfg.namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.invalid/pause:3.9",
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		a.writeError("create pod %s: %v", name, err)
		return
	}
	k := a.identityKey(set)
	id, isNew, err := a.allocate(churnCtx, name, app, k)
	if err != nil {
		a.mu.Lock()
		a.stats.allocationErrors++
		a.mu.Unlock()
		a.logf("allocate identity for %s: %v", app, err)
		a.deletePod(ctx, name)
		return
	}
	// A wait may have outlasted the first context: the writes get their own.
	ctx, cancelWrites := context.WithTimeout(context.WithoutCancel(churnCtx), time.Minute)
	defer cancelWrites()
	a.mu.Lock()
	a.stats.allocations++
	if isNew {
		a.stats.newIdentities++
	}
	a.mu.Unlock()

	if _, err := a.clients.cilium.CiliumV2().CiliumEndpoints(a.cfg.namespace).Create(ctx, a.endpoint(p, int64(id), k), metav1.CreateOptions{}); err != nil {
		a.writeError("create ciliumendpoint %s: %v", name, err)
		a.deletePod(ctx, name)
		a.release(ctx, k)
		return
	}
	a.mu.Lock()
	a.pods = append(a.pods, pod{name: name, key: k, identity: int64(id)})
	a.stats.podsStarted++
	a.mu.Unlock()
}

// allocate is Allocator.Allocate of the pod's key within --allocate-timeout
// (an agent's endpoint creation: a minute). With --wait-for-identity a
// failed call is made again, as kubelet retries a sandbox whose CNI ADD
// failed, until the churn ends: each call starts Cilium's backoff afresh.
// Every refused attempt inside is counted (refusals.go).
func (a *agent) allocate(churnCtx context.Context, pod, app string, k *key.GlobalIdentity) (idpool.ID, bool, error) {
	w := refused.begin(pod, app, fmt.Sprint(k))
	for {
		parent := context.WithoutCancel(churnCtx)
		if a.cfg.waitForIdentity {
			parent = churnCtx
		}
		ctx, cancel := context.WithTimeout(parent, a.cfg.allocateTimeout)
		id, isNew, _, err := a.alloc.Allocate(ctx, k)
		cancel()
		if err == nil || !a.cfg.waitForIdentity || churnCtx.Err() != nil {
			refused.end(w, err == nil)
			return id, isNew, err
		}
		a.logf("allocate identity for %s (waiting, trying again): %v", app, err)
	}
}

// endpoint is the CiliumEndpoint an agent writes for a pod (owned by it,
// as the agent's endpoint synchronizer does).
func (a *agent) endpoint(p *corev1.Pod, id int64, k *key.GlobalIdentity) *v2.CiliumEndpoint {
	a.mu.Lock()
	seq := a.seq
	a.mu.Unlock()
	return &v2.CiliumEndpoint{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID,
			}},
		},
		Status: v2.EndpointStatus{
			ID:       int64(a.index*100000 + seq),
			Identity: &v2.EndpointIdentity{ID: id, Labels: k.LabelArray.GetModel()},
			State:    "ready",
			Networking: &v2.EndpointNetworking{
				Addressing: v2.AddressPairList{{IPV4: fmt.Sprintf("10.%d.%d.%d", a.index%250, (seq/250)%250, seq%250+1)}},
				NodeIP:     fmt.Sprintf("192.0.2.%d", a.index%250+1),
			},
		},
	}
}

// endPod deletes pod i's CiliumEndpoint and Pod and releases its identity
// (Allocator.Release: the CRD backend keeps no reference of its own, the
// CiliumEndpoints are the references).
func (a *agent) endPod(churnCtx context.Context, i int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(churnCtx), time.Minute)
	defer cancel()
	a.mu.Lock()
	p := a.pods[i]
	a.pods = append(a.pods[:i], a.pods[i+1:]...)
	a.stats.podsEnded++
	a.mu.Unlock()
	if err := a.clients.cilium.CiliumV2().CiliumEndpoints(a.cfg.namespace).Delete(ctx, p.name, metav1.DeleteOptions{}); err != nil {
		a.writeError("delete ciliumendpoint %s: %v", p.name, err)
	}
	a.deletePod(ctx, p.name)
	a.release(ctx, p.key)
}

func (a *agent) deletePod(ctx context.Context, name string) {
	zero := int64(0)
	if err := a.clients.kube.CoreV1().Pods(a.cfg.namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		a.writeError("delete pod %s: %v", name, err)
	}
}

func (a *agent) release(ctx context.Context, k allocator.AllocatorKey) {
	if _, err := a.alloc.Release(ctx, k); err != nil {
		a.logf("release identity: %v", err)
	}
}

func (a *agent) writeError(format string, args ...any) {
	a.mu.Lock()
	a.stats.writeErrors++
	a.mu.Unlock()
	a.logf(format, args...)
}

func (a *agent) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "cilium-agents: agent %d: %s\n", a.index, fmt.Sprintf(format, args...))
}
