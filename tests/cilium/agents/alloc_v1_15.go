//go:build cilium_v1_15

package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cilium/cilium/pkg/allocator"
	"github.com/cilium/cilium/pkg/identity/key"
	"github.com/cilium/cilium/pkg/idpool"
	"github.com/cilium/cilium/pkg/k8s/client/clientset/versioned"
	"github.com/cilium/cilium/pkg/k8s/identitybackend"
	"github.com/cilium/cilium/pkg/logging"
	"github.com/cilium/cilium/pkg/option"
)

const ciliumVersion = "v1.15"

var hookOnce sync.Once

// newAllocator builds the allocator an agent of 1.15 builds in
// CachingIdentityAllocator.InitIdentityAllocator (pkg/identity/cache) in CRD
// mode: the CRD backend, identities minID..maxID of cluster 0 (an agent:
// 256..65535), master key protection. 1.15 reads the periodic key sync from
// the agent's option.Config.KVstorePeriodicSync.
func newAllocator(client versioned.Interface, syncInterval time.Duration, minID, maxID int) (*allocator.Allocator, error) {
	option.Config.KVstorePeriodicSync = syncInterval
	// 1.15's allocator logs to the package-level logrus logger of
	// pkg/logging: a hook sees each failed attempt (see attemptFailedMsg).
	hookOnce.Do(func() { logging.DefaultLogger.AddHook(refusalHook{}) })
	backend, err := identitybackend.NewCRDBackend(identitybackend.CRDBackendConfiguration{
		Store:   nil,
		Client:  client,
		KeyFunc: (&key.GlobalIdentity{}).PutKeyFromMap,
	})
	if err != nil {
		return nil, err
	}
	return allocator.NewAllocator(&key.GlobalIdentity{}, backend,
		allocator.WithMax(idpool.ID(maxID)), allocator.WithMin(idpool.ID(minID)),
		allocator.WithMasterKeyProtection(),
		allocator.WithPrefixMask(idpool.ID(0)))
}

// refusalHook counts the allocator's "Key allocation attempt failed"
// warnings that carry the refusal error.
type refusalHook struct{}

func (refusalHook) Levels() []logrus.Level { return []logrus.Level{logrus.WarnLevel} }

func (refusalHook) Fire(e *logrus.Entry) error {
	if e.Message != attemptFailedMsg {
		return nil
	}
	refused.note(fmt.Sprint(e.Data["key"]), fmt.Sprint(e.Data[logrus.ErrorKey]))
	return nil
}
