package mpi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/testbuild"
)

// hierLine is what testdata/hierprog prints per rank.
var hierLine = regexp.MustCompile(`^rank (\d+) shared \[([\d ]*)\] board (\d+) hier (\d+) multi (\d+) hostboard (\d+)$`)

// hierCounts are one rank's line of testdata/hierprog.
type hierCounts struct {
	shared                         string
	board, hier, multis, hostboard int
}

// runHierprog runs testdata/hierprog on np ranks of dev with
// ADIMPI_PRETEND_HOSTS=pretend (none if empty) and returns each rank's line.
func runHierprog(t *testing.T, bins map[string]string, dev string, np int, pretend string) []hierCounts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins["mpirun"], "-np", strconv.Itoa(np), "-device", dev, "-timeout", "50s", bins["hierprog"])
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ADIMPI_") && !strings.HasPrefix(kv, "PMI_") {
			env = append(env, kv)
		}
	}
	if pretend != "" {
		env = append(env, "ADIMPI_PRETEND_HOSTS="+pretend)
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s np=%d pretend %q: %v\n%s", dev, np, pretend, err, out)
	}
	got := make([]hierCounts, np)
	seen := 0
	for _, line := range strings.Split(string(out), "\n") {
		m := hierLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		r, _ := strconv.Atoi(m[1])
		b, _ := strconv.Atoi(m[3])
		h, _ := strconv.Atoi(m[4])
		ms, _ := strconv.Atoi(m[5])
		hb, _ := strconv.Atoi(m[6])
		got[r] = hierCounts{shared: m[2], board: b, hier: h, multis: ms, hostboard: hb}
		seen++
	}
	if seen != np {
		t.Fatalf("%s np=%d pretend %q: %d of %d ranks reported:\n%s", dev, np, pretend, seen, np, out)
	}
	return got
}

// TestPretendHostsPaths: with ADIMPI_PRETEND_HOSTS the collectives on
// MPI_COMM_WORLD keep off the boards and fm's multidestination sends
// and run in tiers, a tiered Barrier's host phases on the host's board,
// and SplitTypeShared gives the pretend hosts' ranks;
// without it they take the board on every device and never tiers.
func TestPretendHostsPaths(t *testing.T) {
	bins := testbuild.Programs(t, "../cmd/mpirun", "./testdata/hierprog")
	for _, c := range []struct {
		dev, pretend string
		np           int
		shared       func(r int) string // the ranks sharing r's host
	}{
		{"netvm", "", 4, func(int) string { return "0 1 2 3" }},
		{"netvm", "rr:2", 4, func(r int) string { return []string{"0 2", "1 3"}[r%2] }},
		{"fm", "", 8, func(int) string { return "0 1 2 3 4 5 6 7" }},
		{"fm", "block:2", 8, func(r int) string { return []string{"0 1 2 3", "4 5 6 7"}[r/4] }},
	} {
		t.Run(fmt.Sprintf("%s/pretend=%s", c.dev, c.pretend), func(t *testing.T) {
			got := runHierprog(t, bins, c.dev, c.np, c.pretend)
			board, hier, multis, hostboard := 0, 0, 0, 0
			for r, g := range got {
				if g.shared != c.shared(r) {
					t.Errorf("rank %d: SplitTypeShared gives world ranks [%s], want [%s]", r, g.shared, c.shared(r))
				}
				board, hier, multis, hostboard = board+g.board, hier+g.hier, multis+g.multis, hostboard+g.hostboard
			}
			// Hosts of more than one rank run a tiered Barrier's host
			// phases on their board (hierprog starts with a Barrier).
			if c.pretend != "" && hostboard == 0 {
				t.Errorf("across pretend hosts: no tiered collective ran its host phases on a board")
			}
			switch {
			case c.pretend != "" && (board != 0 || multis != 0 || hier == 0):
				t.Errorf("across pretend hosts: %d board rounds and %d multidestination messages (want 0), %d tiered collectives (want > 0)", board, multis, hier)
			case c.pretend == "" && hier != 0:
				t.Errorf("on one host: %d tiered collectives, want 0", hier)
			case c.pretend == "" && board == 0:
				t.Errorf("%s on one host: no board rounds: the board path is off", c.dev)
			case c.pretend == "" && c.dev == "fm" && multis == 0:
				t.Errorf("fm on one host at np %d: no multidestination messages: that path is off", c.np)
			}
			t.Logf("board rounds %d, multidestination messages %d, tiered collectives %d", board, multis, hier)
		})
	}
}
