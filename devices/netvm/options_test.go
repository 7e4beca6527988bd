package netvm_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/adimpi/adimpi/internal/testbuild"
)

// TestStridedPaths runs testdata/strided (large messages between every
// pairing of regular, contiguous, negative-stride and irregular layouts,
// each byte and gap checked) under the options that pick each of netvm's
// paths for non-contiguous data, and checks through the device counters
// that the path was taken.
func TestStridedPaths(t *testing.T) {
	bins := testbuild.Programs(t, "../../cmd/mpirun", "./testdata/strided")
	for _, c := range []struct {
		opts    []string
		counter string // must move on the receiver
		sender  string // must move on the sender
	}{
		{nil, "", ""}, // pipelined chunks, offered for takeover
		{[]string{"stall=0"}, "stream_takeovers", ""}, // the receiver takes every offered stream over
		{[]string{"stall=1"}, "", ""},                 // tail reads and chunks meet in the middle
		{[]string{"offer=0"}, "", ""},                 // chunks only
		{[]string{"pull=1"}, "remote_reads", ""},      // the receiver reads every non-contiguous message
		{[]string{"pull=1", "gap=0"}, "remote_reads", ""},
		{[]string{"scatter=1"}, "remote_reads", ""}, // the sender writes in place, the receiver reads the tail
		{[]string{"scatter=1", "split=0"}, "", ""},
		{[]string{"cma=off"}, "", ""},
		{[]string{"stream=1"}, "", ""},                                  // contiguous receives take streams too
		{[]string{"ntpack=1000000", "stall=100000"}, "", "nt_chunks"},   // every chunk packed with non-temporal stores (ntpack.go)
		{[]string{"ntpack=1000000", "stall=0"}, "stream_takeovers", ""}, // ... and taken over
	} {
		args := []string{"-np", "2", "-device", "netvm", "-timeout", "120s"}
		for _, o := range c.opts {
			args = append(args, "-device-opt", o)
		}
		args = append(args, bins["strided"])
		if c.counter != "" {
			args = append(args, "-want-counter", c.counter)
		}
		if c.sender != "" {
			args = append(args, "-want-sender-counter", c.sender)
		}
		out, err := exec.Command(bins["mpirun"], args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "36 layout pairs ok") {
			t.Errorf("mpirun %v: %v\n%s", args, err, out)
		}
	}
}

// TestProtocolsMustAgree starts a job whose rank 1 alone runs MPIN's
// receiver-initiated protocol (eager=0): MPI_Init must fail on both ranks
// with a message that names the option, not hang or mix the protocols.
func TestProtocolsMustAgree(t *testing.T) {
	bins := testbuild.Programs(t, "../../cmd/mpirun", "../../examples/ring")
	wrapper := filepath.Join(t.TempDir(), "rank1-mpin")
	script := "#!/bin/sh\nif [ \"$PMI_RANK\" = 1 ]; then ADIMPI_DEVICE_OPT=eager=0; export ADIMPI_DEVICE_OPT; fi\nexec \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bins["mpirun"], "-np", "2", "-device", "netvm", "-timeout", "60s", wrapper, bins["ring"]).CombinedOutput()
	if err == nil {
		t.Fatalf("a job with eager=0 on one rank only ran to the end:\n%s", out)
	}
	if !strings.Contains(string(out), "options must agree") || !strings.Contains(string(out), "eager=0") {
		t.Fatalf("mpirun failed without naming the disagreement: %v\n%s", err, out)
	}
}
