//go:build !cilium_v1_15

package main

import (
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
// mode: the CRD backend, identities 256..65535 of cluster 0, master key
// protection, the periodic key sync (WithSyncInterval).
func newAllocator(client versioned.Interface, syncInterval time.Duration) (*allocator.Allocator, error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
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
		allocator.WithMax(idpool.ID(65535)), allocator.WithMin(idpool.ID(256)),
		allocator.WithSyncInterval(syncInterval),
		allocator.WithMasterKeyProtection(),
		allocator.WithPrefixMask(idpool.ID(0)))
}
