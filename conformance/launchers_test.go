package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/slurmcluster"
	"github.com/adimpi/adimpi/internal/testnote"
)

// launchSuite is the short suite that runs under every way of launching
// across hosts: TestCrossHostShaped's programs and checks (every protocol
// of p2p, the collectives at their small sizes, stress's thresholds), one
// job per program.
var launchSuite = shapedPrograms

// launchRuns are the launchers and the device each runs the suite with:
// one device per launcher, every device covered across them (mpirun, the
// launcher adimpi owns, takes two).
var launchRuns = []struct {
	launcher string // srun, hydra-ssh, mpirun-hostfile
	device   string
}{
	{"srun", "netvm"},
	{"hydra-ssh", "fm"},
	{"mpirun-hostfile", "via"},
	{"mpirun-hostfile", "bip"},
}

// launchNP is the ranks of each job: two on each of the three hosts.
const launchNP = 6

// TestLaunchers runs launchSuite on three simulated hosts, each running
// sshd, a slurmd and (h1) slurmctld, under each launcher of launchRuns,
// started from h1 as a user logged in to a cluster's node would: srun
// --mpi=pmi2 (PMI-2 from slurmstepd), MPICH's mpiexec.hydra with its ssh
// bootstrap (PMI-1 from Hydra's proxies), and adimpi's mpirun -hostfile
// with its ssh launcher. Every check must pass, and no process of a job
// may be left on any host once its launcher has exited.
func TestLaunchers(t *testing.T) {
	c := startLaunchCluster(t)
	hydra, err := exec.LookPath("mpiexec.hydra")
	if err != nil {
		testnote.Skip(t, "conformance: mpiexec.hydra is not on PATH: install the Debian package mpich (apt-get install -y mpich) to run TestLaunchers")
	}
	hostfile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostfile, []byte("h1 slots=2\nh2:2\nh3 slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, lr := range launchRuns {
		t.Run(lr.launcher+"/"+lr.device, func(t *testing.T) {
			t.Parallel()
			for _, sp := range launchSuite {
				t.Run(sp.prog.name, func(t *testing.T) {
					args := append([]string(nil), sp.checks...)
					if sp.prog.short {
						args = append([]string{"-short"}, args...)
					}
					var argv, env []string
					switch lr.launcher {
					case "srun":
						argv = append([]string{"srun", "--mpi=pmi2", "-N", "3", "-n", fmt.Sprint(launchNP), "--ntasks-per-node=2", sp.prog.bin}, args...)
						env = []string{"ADIMPI_DEVICE=" + lr.device, "SLURM_CONF=" + c.slurm.Conf}
					case "hydra-ssh":
						argv = append([]string{hydra, "-launcher", "ssh", "-launcher-exec", c.net.SSHCommand(),
							"-hosts", "h1,h2,h3", "-n", fmt.Sprint(launchNP), sp.prog.bin}, args...)
						env = []string{"ADIMPI_DEVICE=" + lr.device}
					default:
						argv = append([]string{mpirunBin, "-hostfile", hostfile, "-np", fmt.Sprint(launchNP), "-device", lr.device,
							"-timeout", mpirunTimeout.String(), sp.prog.bin}, args...)
						env = []string{"PATH=" + c.net.SSHDir() + ":" + os.Getenv("PATH")}
					}
					jobs <- struct{}{}
					j := runOnHost(c.net, "h1", argv, env)
					<-jobs
					for _, check := range sp.checks {
						judgeLaunched(t, j, check)
					}
				})
			}
		})
	}
}

// launchCluster is TestLaunchers' cluster: its hosts (with sshd) and Slurm
// on them.
type launchCluster struct {
	net   *netcluster.Cluster
	slurm *slurmcluster.Cluster
}

// startLaunchCluster starts three hosts with sshd and a Slurm cluster on
// them, torn down when the test ends. Without root, sshd or Slurm the
// test is skipped loudly (and fails under CI, which installs them).
func startLaunchCluster(t *testing.T) launchCluster {
	t.Helper()
	if why := slurmcluster.Missing(); why != "" {
		testnote.Skip(t, "conformance: "+why)
	}
	if err := netcluster.CheckSSH(); err != nil {
		testnote.Skip(t, fmt.Sprintf("conformance: %v", err))
	}
	// Slurm's Unix sockets live below the directory: a short one.
	dir, err := os.MkdirTemp("", "lch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	net, err := netcluster.Start(netcluster.Options{Hosts: crossHosts, Dir: filepath.Join(dir, "net"), SSH: true})
	if err != nil {
		t.Fatalf("cannot create %d simulated hosts with sshd: %v", crossHosts, err)
	}
	t.Cleanup(func() {
		if err := net.Close(); err != nil {
			t.Errorf("tearing down the simulated hosts: %v", err)
		}
	})
	sc, err := slurmcluster.StartOn(net, dir, 0)
	if err != nil {
		t.Fatalf("cannot start Slurm on the simulated hosts: %v", err)
	}
	t.Cleanup(func() {
		if err := sc.Close(); err != nil {
			t.Errorf("tearing down Slurm: %v", err)
		}
	})
	return launchCluster{net: net, slurm: sc}
}

// runOnHost runs argv on host of c with env added to the test's (less any
// MPI or PMI settings), as runJob runs mpirun, and returns the job: what
// it printed, how it ended, and the processes of it left on any host.
func runOnHost(c *netcluster.Cluster, host string, argv, env []string) *job {
	j := &job{args: argv}
	ctx, cancel := context.WithTimeout(context.Background(), mpirunTimeout+killGrace)
	defer cancel()
	nc := c.Command(host, argv[0], argv[1:]...)
	cmd := exec.CommandContext(ctx, nc.Path, nc.Args[1:]...)
	marker := fmt.Sprintf("ADIMPI_CONFORMANCE_JOB=%d-%d", os.Getpid(), runSeq.Add(1))
	cmd.Env = append(append(cleanEnv(), env...), marker)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	j.err = cmd.Run()
	j.elapsed = time.Since(start)
	j.killed = ctx.Err() != nil
	j.stdout, j.stderr = stdout.String(), stderr.String()
	j.leftover = leftoverOf(marker)
	return j
}

// leftoverOf waits up to 3 s for the processes whose environment holds
// marker to go, then kills and returns those still there.
func leftoverOf(marker string) []int {
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := processesWith(marker)
		if len(left) == 0 || time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// judgeLaunched is judge for a job of any launcher: it must have exited 0,
// within its time, leaving nothing behind, with check passed (or
// unsupported) and nothing failed.
func judgeLaunched(t *testing.T, j *job, check string) {
	t.Helper()
	fail := func(format string, a ...any) {
		t.Errorf("%s: %s\ncommand: %s\nexit: %v, %.2fs\nstdout:\n%s\nstderr:\n%s", check, fmt.Sprintf(format, a...),
			strings.Join(j.args, " "), j.err, j.elapsed.Seconds(), indent(j.stdout), indent(j.stderr))
	}
	switch {
	case len(j.leftover) > 0:
		fail("the launcher exited but left %d processes of the job running (pids %v; killed now)", len(j.leftover), j.leftover)
	case j.killed:
		fail("the job did not end within %v", mpirunTimeout+killGrace)
	case j.err != nil:
		fail("the launcher failed")
	case strings.Contains(j.stdout, "FAIL") || strings.Contains(j.stderr, "FAIL "+check):
		fail("a rank reported FAIL")
	case hasLine(j.stdout, "PASS "+check):
	case hasLine(j.stdout, "UNSUPPORTED "+check):
		t.Logf("%s: UNSUPPORTED", check)
	default:
		fail("no rank printed PASS %s", check)
	}
}
