package pmi

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/testnote"
)

// MPICH's Hydra starting adimpi programs across the hosts of a simulated
// cluster, the two ways a cluster's users run it: over ssh onto every
// host's sshd (Hydra's ssh bootstrap, the default on clusters), and
// through a lighter command that enters the host's namespaces
// (-launcher-exec pointed at bench/netcluster-agent.sh, which runs
// "netcluster exec"). The programs are cmd/mpirun's test programs:
// hostprobe (PMI only: each rank prints its host and every rank's host as
// the key-value space tells it) and mpiprog init (MPI_Init and
// MPI_Finalize across the hosts).

// hydraProgs builds the test programs and returns hostprobe's and
// mpiprog's paths, skipping (failing under CI) without mpiexec.hydra.
func hydraProgs(t *testing.T) (hydra, hostprobe, mpiprog string) {
	t.Helper()
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		testnote.Skip(t, "internal/pmi: mpiexec.hydra is not on PATH: install the Debian package mpich (apt-get install -y mpich) to run this test")
	}
	if os.Geteuid() != 0 {
		testnote.Skip(t, fmt.Sprintf("internal/pmi: Hydra across simulated hosts needs root to create namespaces (running as uid %d)", os.Geteuid()))
	}
	dir := t.TempDir()
	hostprobe, mpiprog = filepath.Join(dir, "hostprobe"), filepath.Join(dir, "mpiprog")
	for _, b := range [][2]string{{hostprobe, "../../cmd/mpirun/testdata/hostprobe"}, {mpiprog, "../../cmd/mpirun/testdata/mpiprog"}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
	return hydra, hostprobe, mpiprog
}

// hostprobeLine is one line of hostprobe.
var hostprobeLine = regexp.MustCompile(`^rank (\d+) host (\S+) pid \d+ secret \S* hosts (\S+)$`)

// checkRoundRobin checks hostprobe's output for np ranks that Hydra dealt
// round-robin over hosts: rank r on hosts[r%len(hosts)], and every rank
// told the same by the key-value space.
func checkRoundRobin(t *testing.T, what, out string, np int, hosts []string) {
	t.Helper()
	want := make([]string, np)
	for r := range want {
		want[r] = hosts[r%len(hosts)]
	}
	seen := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		m := hostprobeLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("%s: unexpected line %q", what, l)
			continue
		}
		r, _ := strconv.Atoi(m[1])
		if r >= np || m[2] != want[r] || m[3] != strings.Join(want, ",") {
			t.Errorf("%s: %q: want rank %d on %s and hosts %s", what, l, r, want[min(r, np-1)], strings.Join(want, ","))
		}
		seen++
	}
	if seen != np {
		t.Errorf("%s: %d ranks answered, want %d:\n%s", what, seen, np, out)
	}
}

// hydraRun runs cmd (a Hydra command line) with a time limit and returns
// its standard output, failing the test if it fails.
func hydraRun(t *testing.T, what string, cmd *exec.Cmd) string {
	t.Helper()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", what, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// Hydra's ssh bootstrap, from h1 onto the sshds of h1, h2 and h3.
func TestHydraAcrossHostsSSH(t *testing.T) {
	hydra, hostprobe, mpiprog := hydraProgs(t)
	c := netcluster.StartSSHT(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hydraOn := func(args ...string) *exec.Cmd {
		nc := c.Command("h1", hydra, append([]string{"-launcher", "ssh", "-launcher-exec", c.SSHCommand(), "-hosts", "h1,h2,h3"}, args...)...)
		cmd := exec.CommandContext(ctx, nc.Path, nc.Args[1:]...)
		cmd.Env = filterEnv(os.Environ(), EnvFD, EnvPort, EnvID, EnvRank, EnvSize, "ADIMPI_JOB_SECRET")
		return cmd
	}
	out := hydraRun(t, "mpiexec.hydra (ssh) -n 6 hostprobe", hydraOn("-n", "6", hostprobe))
	checkRoundRobin(t, "ssh bootstrap", out, 6, []string{"h1", "h2", "h3"})
	hydraRun(t, "mpiexec.hydra (ssh) -n 6 mpiprog init", hydraOn("-n", "6", mpiprog, "init"))
}

// Hydra's ssh bootstrap with -launcher-exec pointed at the command that
// enters a host (no sshd): Hydra runs in the network namespace of a fourth
// host, h4, which only launches (Hydra would start ranks of a host it
// takes for its own itself, outside that host's namespaces), and names the
// hosts by address (it does not see the hosts' /etc/hosts).
func TestHydraAcrossHostsExec(t *testing.T) {
	hydra, hostprobe, mpiprog := hydraProgs(t)
	c := netcluster.StartT(t, 4)
	agent, err := filepath.Abs("../../bench/netcluster-agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	nc := filepath.Join(t.TempDir(), "netcluster")
	if out, err := exec.Command("go", "build", "-o", nc, "../../cmd/netcluster").CombinedOutput(); err != nil {
		t.Fatalf("go build ../../cmd/netcluster: %v\n%s", err, out)
	}
	head := c.Hosts[3]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hydraOn := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=/proc/" + strconv.Itoa(head.PID) + "/ns/net", hydra,
			"-launcher", "ssh", "-launcher-exec", agent, "-localhost", head.Addr.String(),
			"-hosts", "198.18.0.1,198.18.0.2,198.18.0.3"}, args...)...)
		cmd.Env = append(filterEnv(os.Environ(), EnvFD, EnvPort, EnvID, EnvRank, EnvSize, "ADIMPI_JOB_SECRET"),
			"NETCLUSTER="+nc, "NETCLUSTER_DIR="+c.Dir)
		return cmd
	}
	out := hydraRun(t, "mpiexec.hydra (netcluster exec) -n 6 hostprobe", hydraOn("-n", "6", hostprobe))
	checkRoundRobin(t, "exec bootstrap", out, 6, []string{"h1", "h2", "h3"})
	hydraRun(t, "mpiexec.hydra (netcluster exec) -n 6 mpiprog init", hydraOn("-n", "6", mpiprog, "init"))
}
