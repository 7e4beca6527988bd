package main

import (
	"strings"
	"testing"
)

// TestWireFlag checks that -wire reaches every rank as ADIMPI_WIRE, that
// ADIMPI_WIRE in mpirun's environment is its default, and that an unknown
// wire is refused.
func TestWireFlag(t *testing.T) {
	show := []string{"sh", "-c", `echo "wire=$ADIMPI_WIRE"`}
	if res := run(t, nil, nil, append([]string{"-np", "2", "-wire", "xdp"}, show...)...); res.code != 0 || strings.Count(res.stdout, "wire=xdp\n") != 2 {
		t.Errorf("-wire xdp: want wire=xdp from both ranks: %v", res)
	}
	if res := run(t, nil, []string{"ADIMPI_WIRE=xdp"}, append([]string{"-np", "1", "-wire", "tcp"}, show...)...); res.code != 0 || !strings.Contains(res.stdout, "wire=tcp\n") {
		t.Errorf("-wire tcp over ADIMPI_WIRE=xdp: want wire=tcp: %v", res)
	}
	if res := run(t, nil, []string{"ADIMPI_WIRE=xdp"}, append([]string{"-np", "1"}, show...)...); res.code != 0 || !strings.Contains(res.stdout, "wire=xdp\n") {
		t.Errorf("ADIMPI_WIRE=xdp without -wire: want wire=xdp: %v", res)
	}
	if res := run(t, nil, nil, "-wire", "udp", "true"); res.code != exitUsage || !strings.Contains(res.stderr, `-wire "udp": want tcp or xdp`) {
		t.Errorf("-wire udp: want exit %d and the message: %v", exitUsage, res)
	}
}
