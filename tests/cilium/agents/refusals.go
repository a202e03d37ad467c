package main

import (
	"strings"
	"sync"
	"time"
)

// refusalText is the error Cilium's allocator returns from one allocation
// attempt when the id pool of its range is empty (Allocator.lockedAllocate,
// pkg/allocator, in 1.15 and in the current release alike).
const refusalText = "no more available IDs in configured space"

// attemptFailedMsg is the warning Allocator.Allocate logs after each failed
// attempt, with the attempt's error and the key, before it backs off and
// tries again (at most 16 attempts, 20 ms doubling, inside the caller's
// context). Allocate returns only the last error, so a refusal is counted
// here, from that log record, once per attempt: alloc_v1_15.go hooks the
// logrus logger 1.15's allocator logs to, alloc_current.go wraps the slog
// handler the current allocator is given.
const attemptFailedMsg = "Key allocation attempt failed"

// wait is one pod's wait for an identity: from its first refused attempt
// to its allocation (nil while it still waits).
type wait struct {
	Pod            string     `json:"pod"`
	App            string     `json:"app"`
	Refusals       int        `json:"refusals"`
	FirstRefusedAt time.Time  `json:"firstRefusedAt"`
	LastRefusedAt  time.Time  `json:"lastRefusedAt"`
	AllocatedAt    *time.Time `json:"allocatedAt"`
	key            string
}

// refusals counts every refused attempt of every agent of the process and
// attributes it to the pods allocating that key. The allocator logs the
// key, not the caller: two agents allocating the same label set at once
// (each its own allocator) are both charged with each other's refusals;
// both are refused anyway, the range being full for that key.
type refusals struct {
	mu     sync.Mutex
	total  int
	active map[string][]*wait
	done   []*wait
}

var refused = &refusals{active: map[string][]*wait{}}

// note is called from the allocator's log: one attempt failed with err for key.
func (r *refusals) note(key, err string) {
	if !strings.Contains(err, refusalText) {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	for _, w := range r.active[key] {
		if w.Refusals == 0 {
			w.FirstRefusedAt = now
		}
		w.Refusals++
		w.LastRefusedAt = now
	}
}

// begin registers a pod's allocation of key; end closes it (allocated or
// not) and keeps it if it was refused at least once.
func (r *refusals) begin(pod, app, key string) *wait {
	w := &wait{Pod: pod, App: app, key: key}
	r.mu.Lock()
	r.active[key] = append(r.active[key], w)
	r.mu.Unlock()
	return w
}

func (r *refusals) end(w *wait, allocated bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.active[w.key]
	for i, x := range list {
		if x == w {
			r.active[w.key] = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(r.active[w.key]) == 0 {
		delete(r.active, w.key)
	}
	if allocated {
		w.AllocatedAt = &now
	}
	if w.Refusals > 0 {
		r.done = append(r.done, w)
	}
}

// snapshot is the refusal count and every wait seen, the ones still open
// (pods that never got an identity) included.
func (r *refusals) snapshot() (int, []wait) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []wait
	for _, w := range r.done {
		out = append(out, *w)
	}
	for _, list := range r.active {
		for _, w := range list {
			if w.Refusals > 0 {
				out = append(out, *w)
			}
		}
	}
	return r.total, out
}
