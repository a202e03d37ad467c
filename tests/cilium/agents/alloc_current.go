//go:build !cilium_v1_15

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/cilium/cilium/pkg/allocator"
	"github.com/cilium/cilium/pkg/identity/key"
	"github.com/cilium/cilium/pkg/idpool"
	"github.com/cilium/cilium/pkg/k8s/client/clientset/versioned"
	"github.com/cilium/cilium/pkg/k8s/identitybackend"
)

const ciliumVersion = "current"

// newAllocator builds the allocator an agent builds in
// CachingIdentityAllocator.InitIdentityAllocator (pkg/identity/cache) in CRD
// mode: the CRD backend, identities minID..maxID of cluster 0 (an agent:
// 256..65535), master key protection, the periodic key sync
// (WithSyncInterval).
func newAllocator(client versioned.Interface, syncInterval time.Duration, minID, maxID int) (*allocator.Allocator, error) {
	text := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	// The current allocator logs to the logger it is given: its handler
	// sees each failed attempt (see attemptFailedMsg).
	logger := slog.New(refusalHandler{text})
	backend, err := identitybackend.NewCRDBackend(logger, identitybackend.CRDBackendConfiguration{
		Store:    nil,
		StoreSet: &atomic.Bool{},
		Client:   client,
		KeyFunc:  (&key.GlobalIdentity{}).PutKeyFromMap,
	})
	if err != nil {
		return nil, err
	}
	return allocator.NewAllocator(logger, &key.GlobalIdentity{}, backend,
		allocator.WithMax(idpool.ID(maxID)), allocator.WithMin(idpool.ID(minID)),
		allocator.WithSyncInterval(syncInterval),
		allocator.WithMasterKeyProtection(),
		allocator.WithPrefixMask(idpool.ID(0)))
}

// refusalHandler passes every record on and counts the allocator's
// "Key allocation attempt failed" warnings that carry the refusal error.
type refusalHandler struct{ slog.Handler }

func (h refusalHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == attemptFailedMsg {
		var k, e string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "key":
				k = fmt.Sprint(a.Value.Any())
			case "error":
				e = fmt.Sprint(a.Value.Any())
			}
			return true
		})
		refused.note(k, e)
	}
	return h.Handler.Handle(ctx, r)
}

func (h refusalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return refusalHandler{h.Handler.WithAttrs(attrs)}
}

func (h refusalHandler) WithGroup(name string) slog.Handler {
	return refusalHandler{h.Handler.WithGroup(name)}
}
