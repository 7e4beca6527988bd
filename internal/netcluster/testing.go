package netcluster

import "os"

// TB is the part of testing.TB that StartT uses (taken as an interface so
// that commands linking this package do not link package testing).
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	TempDir() string
}

// StartT starts a cluster of n hosts for a test and tears it down when the
// test ends, passed, failed or panicked. If the hosts cannot be made the
// test fails and says why; only when the test does not run as root and CI
// is not set is it skipped instead, with the reason.
func StartT(t TB, n int) *Cluster {
	t.Helper()
	return StartOptsT(t, Options{Hosts: n})
}

// StartOptsT is StartT for a cluster that opts describe (its Dir is the
// test's temporary directory).
func StartOptsT(t TB, opts Options) *Cluster {
	t.Helper()
	n := opts.Hosts
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		t.Skipf("SKIPPED: netcluster needs root to create namespaces (running as uid %d; CI is not set, so this is a skip, not a failure)", os.Geteuid())
	}
	opts.Dir = t.TempDir()
	c, err := Start(opts)
	if err != nil {
		t.Fatalf("cannot create a simulated cluster of %d hosts: %v", n, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("tearing down the simulated cluster: %v", err)
		}
	})
	return c
}
