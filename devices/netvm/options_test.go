package netvm_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStridedPaths runs testdata/strided (large messages between every
// pairing of regular, contiguous, negative-stride and irregular layouts,
// each byte and gap checked) under the options that pick each of netvm's
// paths for non-contiguous data, and checks through the device counters
// that the path was taken.
func TestStridedPaths(t *testing.T) {
	dir := t.TempDir()
	bins := map[string]string{}
	for _, pkg := range []string{"../../cmd/mpirun", "./testdata/strided"} {
		out := filepath.Join(dir, filepath.Base(pkg))
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
		bins[filepath.Base(pkg)] = out
	}
	for _, c := range []struct {
		opts    []string
		counter string // must move on the receiver
	}{
		{nil, ""}, // pipelined chunks, offered for takeover
		{[]string{"stall=0"}, "stream_takeovers"}, // the receiver takes every offered stream over
		{[]string{"stall=1"}, ""},                 // tail reads and chunks meet in the middle
		{[]string{"offer=0"}, ""},                 // chunks only
		{[]string{"pull=1"}, "remote_reads"},      // the receiver reads every non-contiguous message
		{[]string{"pull=1", "gap=0"}, "remote_reads"},
		{[]string{"scatter=1"}, "remote_reads"}, // the sender writes in place, the receiver reads the tail
		{[]string{"scatter=1", "split=0"}, ""},
		{[]string{"cma=off"}, ""},
		{[]string{"stream=1"}, ""}, // contiguous receives take streams too
	} {
		args := []string{"-np", "2", "-device", "netvm", "-timeout", "120s"}
		for _, o := range c.opts {
			args = append(args, "-device-opt", o)
		}
		args = append(args, bins["strided"])
		if c.counter != "" {
			args = append(args, "-want-counter", c.counter)
		}
		out, err := exec.Command(bins["mpirun"], args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "36 layout pairs ok") {
			t.Errorf("mpirun %v: %v\n%s", args, err, out)
		}
	}
}
