//go:build cilium_v1_15

package main

import (
	"time"

	"github.com/cilium/cilium/pkg/allocator"
	"github.com/cilium/cilium/pkg/identity/key"
	"github.com/cilium/cilium/pkg/idpool"
	"github.com/cilium/cilium/pkg/k8s/client/clientset/versioned"
	"github.com/cilium/cilium/pkg/k8s/identitybackend"
	"github.com/cilium/cilium/pkg/option"
)

const ciliumVersion = "v1.15"

// newAllocator builds the allocator an agent of 1.15 builds in
// CachingIdentityAllocator.InitIdentityAllocator (pkg/identity/cache) in CRD
// mode: the CRD backend, identities 256..65535 of cluster 0, master key
// protection. 1.15 reads the periodic key sync from the agent's
// option.Config.KVstorePeriodicSync.
func newAllocator(client versioned.Interface, syncInterval time.Duration) (*allocator.Allocator, error) {
	option.Config.KVstorePeriodicSync = syncInterval
	backend, err := identitybackend.NewCRDBackend(identitybackend.CRDBackendConfiguration{
		Store:   nil,
		Client:  client,
		KeyFunc: (&key.GlobalIdentity{}).PutKeyFromMap,
	})
	if err != nil {
		return nil, err
	}
	return allocator.NewAllocator(&key.GlobalIdentity{}, backend,
		allocator.WithMax(idpool.ID(65535)), allocator.WithMin(idpool.ID(256)),
		allocator.WithMasterKeyProtection(),
		allocator.WithPrefixMask(idpool.ID(0)))
}
