package mpi

import (
	"fmt"
	"os"
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
	return r.setPlace(os.Getenv(pretendEnv))
}

// pretendEnv names a knob for tests only: ADIMPI_PRETEND_HOSTS makes the
// core's collectives and SplitType treat the ranks as placed on the hosts
// it gives, while the device still sees the real hosts (adi.Config.Hosts),
// so that the hierarchical collectives run on one machine. Its forms:
//
//	block:K      K hosts, consecutive ranks together (uneven when K does not divide the size)
//	rr:K         K hosts, round-robin: rank w on host w mod K
//	map:H0,H1,…  rank w on host H[w mod len(H)] (any labels; the list repeats)
//
// Ranks on different real hosts stay apart whatever the knob says. Every
// rank must see the same value (mpirun passes its environment to all).
const pretendEnv = "ADIMPI_PRETEND_HOSTS"

// setPlace sets the placement the core's collectives and SplitType use:
// the real hosts, refined by the pretend placement spec if not empty.
func (r *runtime) setPlace(spec string) error {
	r.place = r.hosts
	if spec != "" {
		fake, err := pretendHosts(spec, r.size)
		if err != nil {
			return fmt.Errorf("%s=%s: %v", pretendEnv, spec, err)
		}
		ids := make([]hostid.ID, r.size)
		for w := range ids {
			ids[w] = hostid.ID(strconv.Itoa(r.hosts[w]) + "/" + strconv.Itoa(fake[w]))
		}
		r.place = hostid.Map(ids)
	}
	r.spread = false
	for _, h := range r.place {
		r.spread = r.spread || h != r.place[0]
	}
	return nil
}

// pretendHosts parses an ADIMPI_PRETEND_HOSTS spec for size ranks into a
// host label per rank.
func pretendHosts(spec string, size int) ([]int, error) {
	kind, arg, ok := strings.Cut(spec, ":")
	if !ok {
		return nil, fmt.Errorf("want block:K, rr:K or map:H0,H1,...")
	}
	place := make([]int, size)
	switch kind {
	case "block", "rr":
		k, err := strconv.Atoi(arg)
		if err != nil || k < 1 {
			return nil, fmt.Errorf("host count %q is not a positive integer", arg)
		}
		for w := range place {
			if kind == "block" {
				place[w] = w * k / size
			} else {
				place[w] = w % k
			}
		}
	case "map":
		var labels []int
		for _, f := range strings.Split(arg, ",") {
			h, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || h < 0 {
				return nil, fmt.Errorf("host %q is not a non-negative integer", f)
			}
			labels = append(labels, h)
		}
		for w := range place {
			place[w] = labels[w%len(labels)]
		}
	default:
		return nil, fmt.Errorf("unknown form %q: want block:K, rr:K or map:H0,H1,...", kind)
	}
	return place, nil
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
