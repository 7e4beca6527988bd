package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/testnote"
)

// TestXDPCompareSmoke runs xdpcompare for real, one short round of netvm
// on both placements, and checks that each placement's report has a value
// in every cell of both wires and of the raw frame, and that the
// cpu-per-host one names each host's CPU.
func TestXDPCompareSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and starts two simulated clusters")
	}
	if os.Geteuid() != 0 {
		testnote.Skip(t, "xdpcompare needs root for the simulated hosts and AF_XDP")
	}
	bin := buildBench(t)
	out := filepath.Join(t.TempDir(), "report.md")
	t0 := time.Now()
	cmd := exec.Command("timeout", "300", bin, "xdpcompare", "--rounds", "1", "--devices", "netvm", "--openmpi=false",
		"--loss", "", "--min-time", "20ms", "--limit", "60s", "--placement", "shared,cpu-per-host", "--out", out)
	b, err := cmd.CombinedOutput()
	t.Logf("xdpcompare took %v", time.Since(t0).Round(time.Second))
	if err != nil {
		t.Fatalf("xdpcompare: %v\n%s", err, b)
	}
	rep, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	r := string(rep)
	shared, pinned, ok := strings.Cut(r, "### Each host on a CPU of its own")
	if !ok || !strings.Contains(shared, "### Every host on every CPU") {
		t.Fatalf("the report has no section per placement:\n%s", r)
	}
	if !regexp.MustCompile(`h1 on CPU \d+, h2 on CPU \d+, h3 on CPU \d+`).MatchString(pinned) {
		t.Errorf("the cpu-per-host section does not name the hosts' CPUs:\n%s", pinned)
	}
	num := `[0-9.]+( \([0-9.]+–[0-9.]+\))?` // one round has no range
	row := regexp.MustCompile(`(?m)^\| netvm \| (tcp|xdp) \| ` + num + ` \| ` + num + ` \| ` + num + ` \|$`)
	raw := regexp.MustCompile(`(?m)^\| raw AF_XDP frame, 128 B \| — \| [0-9.]+ one way`)
	for name, sec := range map[string]string{"shared": shared, "cpu-per-host": pinned} {
		if n := len(row.FindAllString(sec, -1)); n != 2 {
			t.Errorf("%s: %d complete netvm rows, want 2 (tcp, xdp):\n%s", name, n, sec)
		}
		if !raw.MatchString(sec) {
			t.Errorf("%s: no raw frame row:\n%s", name, sec)
		}
	}
	if strings.Contains(r, "Notes:") {
		t.Errorf("a measurement failed:\n%s", r)
	}
}
