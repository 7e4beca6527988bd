package mpi

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/adimpi/adimpi/adi"
	"github.com/adimpi/adimpi/internal/hostid"
	"github.com/adimpi/adimpi/internal/pmi"
)

// hostKey is the key-value space entry in which rank r publishes its host.
func hostKey(r int) string { return "adimpi-host-" + strconv.Itoa(r) }

// learnHosts publishes this process's host identity and name, and reads
// every rank's, so that r.hosts[w] is the number of world rank w's host
// (hosts numbered by their lowest rank) and r.hostNames[h] host h's name.
// It costs one fence of the key-value space and one get per rank.
func (r *runtime) learnHosts(kvs *pmi.Client) error {
	id, err := hostid.Self()
	if err != nil {
		return err
	}
	name := hostid.Name()
	if err := kvs.Put(hostKey(r.rank), name+"|"+string(id)); err != nil {
		return err
	}
	if err := kvs.Barrier(); err != nil {
		return err
	}
	ids := make([]hostid.ID, r.size)
	names := make([]string, r.size)
	for w := range ids {
		v, err := kvs.Get(hostKey(w))
		if err != nil {
			return fmt.Errorf("host of rank %d: %v", w, err)
		}
		n, i, ok := strings.Cut(v, "|")
		if !ok {
			return fmt.Errorf("host of rank %d: malformed entry %q", w, v)
		}
		ids[w], names[w] = hostid.ID(i), n
	}
	r.hosts = hostid.Map(ids)
	r.hostNames = make([]string, 0, r.size)
	for w, h := range r.hosts {
		if h == len(r.hostNames) {
			r.hostNames = append(r.hostNames, names[w])
		}
	}
	return nil
}

// oneHost checks, for a device that reaches its peers through shared
// memory only (it lacks adi.CrossHost), that every rank shares this
// process's host.
func (r *runtime) oneHost(dev adi.Device) error {
	if ch, ok := dev.(adi.CrossHost); ok && ch.CrossHost() {
		return nil
	}
	mine := r.hosts[r.rank]
	for w, h := range r.hosts {
		if h == mine {
			continue
		}
		a, b := r.hostNames[mine], r.hostNames[h]
		if a == b {
			b += " (the same name, but another kernel or other PID/mount namespaces)"
		}
		return fmt.Errorf("rank %d runs on host %s, rank %d on host %s: device %s reaches only ranks of its own host (shared memory)",
			r.rank, a, w, b, r.devName)
	}
	return nil
}

// ProcessorName returns the name of the host this process runs on
// (MPI_Get_processor_name).
func ProcessorName() string { return hostid.Name() }
