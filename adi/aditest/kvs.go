package aditest

import (
	"fmt"
	"sync"
)

// memKVS is a job's key-value space in memory, shared by the ranks of an
// in-process job (every rank holds the same one).
type memKVS struct {
	mu      sync.Mutex
	cond    sync.Cond
	kv      map[string]string
	size    int
	arrived int
	gen     int
	err     error // a rank failed: barriers return it instead of waiting
}

func newKVS(size int) *memKVS {
	k := &memKVS{kv: map[string]string{}, size: size}
	k.cond.L = &k.mu
	return k
}

func (k *memKVS) Put(key, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.kv[key] = value
	return nil
}

func (k *memKVS) Get(key string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.kv[key]
	if !ok {
		return "", fmt.Errorf("aditest: kvs: no key %q", key)
	}
	return v, nil
}

// Barrier returns once every rank of the job has called it.
func (k *memKVS) Barrier() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	gen := k.gen
	if k.arrived++; k.arrived == k.size {
		k.arrived, k.gen = 0, k.gen+1
		k.cond.Broadcast()
		return nil
	}
	for gen == k.gen && k.err == nil {
		k.cond.Wait()
	}
	if gen == k.gen {
		return k.err
	}
	return nil
}

// fail makes every barrier, now and later, return err: a rank that failed
// will never arrive.
func (k *memKVS) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		k.err = err
	}
	k.cond.Broadcast()
}
