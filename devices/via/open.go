package via

import (
	"fmt"
	"os"
	"strings"

	"github.com/adimpi/adimpi/internal/pmi"
)

// Job is a standalone VIA program's view of its job: this process's NIC,
// its rank among the processes mpirun started, and every NIC's address,
// exchanged through the launcher's key-value space (PMI-1) the way the MPI
// runtime wires up its devices.
type Job struct {
	NIC   *NIC
	Rank  int
	Size  int
	pmi   *pmi.Client
	addrs []string
}

// Open starts a NIC for a program run under mpirun (or alone, as rank 0 of
// 1) and exchanges NIC addresses with the other processes. opts are NIC
// options (doorbell, at, tlbsize, desccache, cq); nil takes them from
// ADIMPI_DEVICE_OPT, which mpirun -device-opt sets.
func Open(opts map[string]string) (*Job, error) {
	if opts == nil {
		opts = map[string]string{}
		for _, kv := range strings.Split(os.Getenv("ADIMPI_DEVICE_OPT"), ",") {
			if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
				opts[k] = v
			}
		}
	}
	// The MPI device's options are accepted too (ADIMPI_DEVICE_OPT is the
	// device's); only the NIC's matter here.
	v, err := OptionTable.Parse(opts)
	if err != nil {
		return nil, err
	}
	o := applyNIC(DefaultOptions(), v, true)
	c, err := pmi.Connect()
	if err != nil {
		return nil, fmt.Errorf("via: Open: connecting to the launcher: %w", err)
	}
	nic, err := OpenNIC(o)
	if err != nil {
		c.Abort(1, err.Error())
		return nil, err
	}
	j := &Job{NIC: nic, Rank: c.Rank(), Size: c.Size(), pmi: c, addrs: make([]string, c.Size())}
	if err := c.Put(fmt.Sprintf("vipl-%d", j.Rank), nic.Address()); err != nil {
		nic.Close()
		return nil, err
	}
	if err := c.Barrier(); err != nil {
		nic.Close()
		return nil, err
	}
	for r := range j.addrs {
		if r == j.Rank {
			j.addrs[r] = nic.Address()
			continue
		}
		if j.addrs[r], err = c.Get(fmt.Sprintf("vipl-%d", r)); err != nil {
			nic.Close()
			return nil, err
		}
	}
	return j, nil
}

// Address is rank's NIC address.
func (j *Job) Address(rank int) string { return j.addrs[rank] }

// Connect connects vi to VI remoteVI of rank's NIC. Both sides call it.
func (j *Job) Connect(vi *VI, rank, remoteVI int) error {
	if rank < 0 || rank >= j.Size {
		return fmt.Errorf("via: Connect: rank %d out of range [0,%d)", rank, j.Size)
	}
	return vi.Connect(j.addrs[rank], remoteVI)
}

// Barrier waits until every process of the job has called it.
func (j *Job) Barrier() error { return j.pmi.Barrier() }

// Close ends this process's part in the job: a final barrier, so that no
// peer still writes into this process, then the NIC closes.
func (j *Job) Close() error {
	berr := j.pmi.Barrier()
	err := j.NIC.Close()
	if ferr := j.pmi.Finalize(); err == nil {
		err = ferr
	}
	if err == nil {
		err = berr
	}
	return err
}
