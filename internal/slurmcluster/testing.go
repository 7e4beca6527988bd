package slurmcluster

import "os"

// TB is the part of testing.TB that StartT uses (an interface, so that
// commands linking this package do not link package testing).
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	TempDir() string
}

// StartT starts a Slurm cluster of n hosts for a test and tears it down
// when the test ends, passed, failed or panicked. A test should first skip,
// loudly, when Missing says the machine cannot run one; StartT fails the
// test if the cluster does not come up.
func StartT(t TB, n int) *Cluster {
	t.Helper()
	// t.TempDir's path holds the test's name, which may be too long for
	// Slurm's Unix sockets: the cluster gets a short directory of its own.
	dir, err := os.MkdirTemp("", "slurm-")
	if err != nil {
		t.Fatalf("slurmcluster: %v", err)
	}
	c, err := Start(Options{Hosts: n, Dir: dir})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("cannot start a Slurm cluster of %d simulated hosts: %v", n, err)
	}
	c.tempDir = true
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("tearing down the Slurm cluster: %v", err)
		}
	})
	return c
}
