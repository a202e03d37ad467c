// Command cilium-agents plays N Cilium agents against a cluster with Cilium's
// own identity allocation code (pkg/allocator with the CRD backend of
// pkg/k8s/identitybackend, of the release it is compiled against): each agent
// starts pods (a Pending Pod and its CiliumEndpoint), allocates the identity
// of the pod's label set as an agent does, and ends pods (CiliumEndpoint and
// Pod deleted, the identity released) at the churn rate, for a bounded time.
// The marks cilium-operator puts on unused identities are stripped, and their
// resourceVersions bumped, by Cilium's code (crdBackend.AcquireReference,
// called by Allocator.Allocate and by the allocator's periodic key sync),
// not by ours.
//
// It prints one JSON summary on stdout when it ends; Cilium's logs and ours
// go to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	ciliumclient "github.com/cilium/cilium/pkg/k8s/client/clientset/versioned"
)

// config is what the flags set.
type config struct {
	kubeconfig   string
	namespace    string
	agents       int
	pods         int
	churn        time.Duration
	duration     time.Duration
	labelSets    int
	labelPrefix  string
	syncInterval time.Duration
	endAll       bool
	seed         int64
	qps          float64

	minID, maxID    int
	allocateTimeout time.Duration
	waitForIdentity bool
}

func parseFlags() config {
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	flag.StringVar(&c.namespace, "namespace", "default", "namespace of the pods and CiliumEndpoints")
	flag.IntVar(&c.agents, "agents", 4, "number of agents (nodes), each with its own allocator and identity informer")
	flag.IntVar(&c.pods, "pods", 10, "pods each agent keeps running")
	flag.DurationVar(&c.churn, "churn", 500*time.Millisecond, "each agent ends one pod and starts another this often (0: start the pods and stop)")
	flag.DurationVar(&c.duration, "duration", 30*time.Second, "how long the agents run (bounded: at most 1h)")
	flag.IntVar(&c.labelSets, "label-sets", 50, "size of the pool of label sets pods are drawn from (one identity each)")
	flag.StringVar(&c.labelPrefix, "label-prefix", "agents", "value prefix of the pods' app label (label set i is app=<prefix>-<i>)")
	flag.DurationVar(&c.syncInterval, "sync-interval", 5*time.Minute, "the allocator's periodic key sync (re-acquires, so unmarks, held identities; agents: 5m)")
	flag.BoolVar(&c.endAll, "end-all", false, "end every pod (and release its identity) before exiting")
	flag.Int64Var(&c.seed, "seed", 1, "seed of the random choices")
	flag.Float64Var(&c.qps, "qps", 100, "client-side QPS limit of each agent's clients")
	flag.IntVar(&c.minID, "min-id", 256, "lowest identity the allocator hands out (allocator.WithMin; an agent: 256)")
	flag.IntVar(&c.maxID, "max-id", 65535, "highest identity the allocator hands out (allocator.WithMax; an agent: 65535); a small range fills quickly")
	flag.DurationVar(&c.allocateTimeout, "allocate-timeout", time.Minute, "context of one Allocator.Allocate call (Cilium retries refused attempts inside it)")
	flag.BoolVar(&c.waitForIdentity, "wait-for-identity", false, "a pod whose allocation failed calls Allocate again until the churn ends (as kubelet retries the sandbox) instead of being deleted")
	flag.Parse()
	if c.minID < 1 || c.maxID < c.minID || c.allocateTimeout <= 0 {
		fmt.Fprintln(os.Stderr, "cilium-agents: need 1 <= --min-id <= --max-id, --allocate-timeout > 0")
		os.Exit(2)
	}
	if c.agents < 1 || c.pods < 0 || c.labelSets < 1 || c.duration <= 0 || c.duration > time.Hour {
		fmt.Fprintln(os.Stderr, "cilium-agents: need --agents >= 1, --pods >= 0, --label-sets >= 1, 0 < --duration <= 1h")
		os.Exit(2)
	}
	return c
}

func main() {
	c := parseFlags()
	base, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cilium-agents: kubeconfig: %v\n", err)
		os.Exit(1)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	// The run is bounded: the churn stops at --duration, and ending the
	// pods afterwards gets at most a minute more.
	runCtx, stopChurn := context.WithTimeout(ctx, c.duration)
	defer stopChurn()

	started := time.Now()
	counts := newCounter()
	rng := rand.New(rand.NewSource(c.seed))
	agents := make([]*agent, c.agents)
	for i := range agents {
		a, err := newAgent(i, c, clientsFor(base, c.qps, counts), rng.Int63())
		if err != nil {
			fmt.Fprintf(os.Stderr, "cilium-agents: agent %d: %v\n", i, err)
			os.Exit(1)
		}
		agents[i] = a
	}
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func(a *agent) {
			defer wg.Done()
			a.run(runCtx)
		}(a)
	}
	wg.Wait()
	if c.endAll {
		endCtx, cancelEnd := context.WithTimeout(ctx, time.Minute)
		for _, a := range agents {
			wg.Add(1)
			go func(a *agent) {
				defer wg.Done()
				a.endAll(endCtx)
			}(a)
		}
		wg.Wait()
		cancelEnd()
	}
	for _, a := range agents {
		a.close()
	}
	printSummary(agents, counts, started)
}

// clients are one agent's API clients; every request is counted.
type clients struct {
	kube   kubernetes.Interface
	cilium ciliumclient.Interface
}

func clientsFor(base *rest.Config, qps float64, counts *counter) clients {
	cfg := rest.CopyConfig(base)
	cfg.QPS = float32(qps)
	cfg.Burst = int(qps * 2)
	cfg.UserAgent = "cilium-agents"
	cfg.Wrap(counts.wrap)
	return clients{
		kube:   kubernetes.NewForConfigOrDie(cfg),
		cilium: ciliumclient.NewForConfigOrDie(cfg),
	}
}

// summary is the JSON printed on stdout.
type summary struct {
	Version          string         `json:"ciliumVersion"`
	Agents           int            `json:"agents"`
	PodsStarted      int            `json:"podsStarted"`
	PodsEnded        int            `json:"podsEnded"`
	Allocations      int            `json:"allocations"`
	NewIdentities    int            `json:"newIdentities"`
	AllocationErrors int            `json:"allocationErrors"`
	WriteErrors      int            `json:"writeErrors"`
	HeldIdentities   []int64        `json:"heldIdentities"`
	PodsRunning      int            `json:"podsRunning"`
	Requests         map[string]int `json:"requests"`
	// AllocationRefusals counts every attempt Cilium's allocator refused with
	// "no more available IDs in configured space" (refusals.go), not only the
	// calls that failed in the end (allocationErrors).
	AllocationRefusals int `json:"allocationRefusals"`
	// Waits are the pods refused at least once: when, how often, and when
	// (if ever) they got their identity.
	Waits     []wait    `json:"waits"`
	MinID     int       `json:"minId"`
	MaxID     int       `json:"maxId"`
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt"`
}

func printSummary(agents []*agent, counts *counter, started time.Time) {
	s := summary{Version: ciliumVersion, Agents: len(agents), Requests: counts.snapshot(),
		StartedAt: started, EndedAt: time.Now()}
	s.AllocationRefusals, s.Waits = refused.snapshot()
	if s.Waits == nil {
		s.Waits = []wait{}
	}
	if len(agents) > 0 {
		s.MinID, s.MaxID = agents[0].cfg.minID, agents[0].cfg.maxID
	}
	held := map[int64]bool{}
	for _, a := range agents {
		a.mu.Lock()
		s.PodsStarted += a.stats.podsStarted
		s.PodsEnded += a.stats.podsEnded
		s.Allocations += a.stats.allocations
		s.NewIdentities += a.stats.newIdentities
		s.AllocationErrors += a.stats.allocationErrors
		s.WriteErrors += a.stats.writeErrors
		s.PodsRunning += len(a.pods)
		for _, p := range a.pods {
			held[p.identity] = true
		}
		a.mu.Unlock()
	}
	s.HeldIdentities = make([]int64, 0, len(held))
	for id := range held {
		s.HeldIdentities = append(s.HeldIdentities, id)
	}
	sort.Slice(s.HeldIdentities, func(i, j int) bool { return s.HeldIdentities[i] < s.HeldIdentities[j] })
	out, _ := json.Marshal(s)
	fmt.Println(string(out))
}
