// Package testkvs is a key-value space for tests whose ranks are goroutines
// of one process: it stands in for the process manager's KVS (Put, Get and a
// real Barrier over every rank) when devices are wired up in-process.
package testkvs

import (
	"fmt"
	"sync"
)

// KVS is an in-process key-value space shared by n ranks.
type KVS struct {
	mu    sync.Mutex
	cond  *sync.Cond
	m     map[string]string
	n     int // ranks
	in    int // ranks in the current barrier
	round int
}

// New returns an empty key-value space for n ranks.
func New(n int) *KVS {
	k := &KVS{m: map[string]string{}, n: n}
	k.cond = sync.NewCond(&k.mu)
	return k
}

// Put stores v under key.
func (k *KVS) Put(key, v string) error {
	k.mu.Lock()
	k.m[key] = v
	k.mu.Unlock()
	return nil
}

// Get returns the value under key, or an error naming a key never put.
func (k *KVS) Get(key string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[key]
	if !ok {
		return "", fmt.Errorf("testkvs: no key %s", key)
	}
	return v, nil
}

// Barrier returns once all n ranks have called it.
func (k *KVS) Barrier() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	round := k.round
	if k.in++; k.in == k.n {
		k.in, k.round = 0, k.round+1
		k.cond.Broadcast()
		return nil
	}
	for k.round == round {
		k.cond.Wait()
	}
	return nil
}
