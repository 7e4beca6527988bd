package wire

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
)

// KVS is the job's key-value space (PMI), as a device gets it at Init.
type KVS interface {
	Put(key, value string) error
	Barrier() error
	Get(key string) (string, error)
}

// Job describes the job an endpoint belongs to, for Setup.
type Job struct {
	Rank, Size int
	Hosts      []int  // each world rank's host number (nil: one host)
	KVS        KVS    // the job's key-value space
	Prefix     string // the device's name: keys are <prefix>-wire-<rank>
	Handler    Handler
	Logf       func(format string, args ...any) // refused connections (default: stderr)
}

// Remote reports whether any rank runs on another host than rank.
func Remote(hosts []int, rank int) bool {
	for _, h := range hosts {
		if h != hosts[rank] {
			return true
		}
	}
	return false
}

// Setup opens this rank's endpoint for a job some of whose ranks run on
// other hosts, and publishes its address; it returns nil when every rank
// shares this host. It is collective: every rank calls it, before the
// barrier after which the device reads its peers' keys. The secret comes
// from the launcher (EnvSecret) or, when the launcher set none (Hydra, for
// instance), from rank 0 through the key-value space, which only the job's
// processes reach; Setup then costs one more barrier.
func Setup(j Job) (*Endpoint, error) {
	if j.Hosts == nil || !Remote(j.Hosts, j.Rank) {
		return nil, nil
	}
	secret, err := SecretFromEnv()
	if err != nil {
		return nil, err
	}
	if secret == nil {
		if secret, err = sharedSecret(j); err != nil {
			return nil, err
		}
	}
	addr, err := HostAddr()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("adimpi job "), secret...))
	ep, err := Open(Config{
		Rank:    j.Rank,
		Job:     binary.LittleEndian.Uint64(sum[:8]),
		Secret:  secret,
		Listen:  netip.AddrPortFrom(addr, 0).String(),
		Handler: j.Handler,
		Logf:    j.Logf,
		Resolve: func(peer int) (string, error) {
			if peer < 0 || peer >= j.Size {
				return "", fmt.Errorf("no rank %d in a job of %d", peer, j.Size)
			}
			return j.KVS.Get(addrKey(j.Prefix, peer))
		},
	})
	if err != nil {
		return nil, err
	}
	if err := ep.openXDP(j, ep.cfg.Job, secret, addr); err != nil {
		ep.Close()
		return nil, err
	}
	if err := j.KVS.Put(addrKey(j.Prefix, j.Rank), ep.Addr()); err != nil {
		ep.Close()
		return nil, fmt.Errorf("wire: publishing the address: %v", err)
	}
	return ep, nil
}

func addrKey(prefix string, rank int) string { return prefix + "-wire-" + strconv.Itoa(rank) }

// sharedSecret has rank 0 make a secret and every rank read it.
func sharedSecret(j Job) ([]byte, error) {
	key := j.Prefix + "-wire-secret"
	if j.Rank == 0 {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("wire: making the job secret: %v", err)
		}
		if err := j.KVS.Put(key, hex.EncodeToString(b)); err != nil {
			return nil, fmt.Errorf("wire: publishing the job secret: %v", err)
		}
	}
	if err := j.KVS.Barrier(); err != nil {
		return nil, err
	}
	v, err := j.KVS.Get(key)
	if err != nil {
		return nil, fmt.Errorf("wire: reading the job secret: %v", err)
	}
	return hex.DecodeString(v)
}
