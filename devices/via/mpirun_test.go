package via_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// progs are built once for every test here: mpirun and the programs it runs.
var (
	buildOnce sync.Once
	buildErr  error
	bins      = map[string]string{}
)

func build(t *testing.T) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "adimpi-via-test-")
		if err != nil {
			buildErr = err
			return
		}
		pkgs := map[string]string{
			"mpirun":      "github.com/adimpi/adimpi/cmd/mpirun",
			"p2p":         "github.com/adimpi/adimpi/conformance/p2p",
			"datatypes":   "github.com/adimpi/adimpi/conformance/datatypes",
			"collectives": "github.com/adimpi/adimpi/conformance/collectives",
			"viaping":     "github.com/adimpi/adimpi/devices/via/testdata/viaping",
			"viaprocs":    "github.com/adimpi/adimpi/devices/via/testdata/viaprocs",
			"netcluster":  "github.com/adimpi/adimpi/cmd/netcluster",
			"stress":      "github.com/adimpi/adimpi/conformance/stress",
			"rma":         "github.com/adimpi/adimpi/conformance/rma",
		}
		for name, pkg := range pkgs {
			out := filepath.Join(dir, name)
			if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
				return
			}
			bins[name] = out
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// run starts prog under mpirun with the via device, the given -device-opt
// key=value options and np ranks, and fails unless the output holds want.
func run(t *testing.T, np int, opts []string, want string, prog string, args ...string) {
	t.Helper()
	a := []string{"-np", fmt.Sprint(np), "-device", "via", "-timeout", "120s"}
	for _, o := range opts {
		a = append(a, "-device-opt", o)
	}
	a = append(append(a, bins[prog]), args...)
	cmd := exec.Command(bins["mpirun"], a...)
	cmd.Env = jobEnv()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("mpirun %s: %v (want %q)\n%s", strings.Join(a, " "), err, want, out)
	}
}

// TestViaping runs the standalone API program (via.Open through PMI, VIs
// connected across processes, send with immediate data, RDMA write with
// immediate data, RDMA read, a protection error, an unregistered post).
func TestViaping(t *testing.T) {
	build(t)
	for _, np := range []int{1, 3} {
		run(t, np, nil, fmt.Sprintf("viaping ok np=%d", np), "viaping")
	}
	run(t, 2, []string{"doorbell=d2", "at=at2", "desccache=off", "cq=cq2"}, "viaping ok np=2 doorbell=d2,at=at2", "viaping")
}

// optionSets is every combination of the seed's design choices, as
// -device-opt values (at3 with a 16-entry cache, so that it misses).
func optionSets() [][]string {
	var sets [][]string
	for _, db := range []string{"d1", "d2"} {
		for _, at := range []string{"at1", "at2", "at3"} {
			for _, dc := range []string{"on", "off"} {
				for _, cq := range []string{"cq1", "cq2"} {
					s := []string{"doorbell=" + db, "at=" + at, "desccache=" + dc, "cq=" + cq}
					if at == "at3" {
						s = append(s, "tlbsize=16")
					}
					sets = append(sets, s)
				}
			}
		}
	}
	return sets
}

// TestOptionCombinations runs MPI over every combination of the design
// options at np=4: a subset of the p2p and datatype conformance checks
// (ordering with eager and rendezvous sizes, truncation, synchronous mode,
// a strided datatype) and every check of conformance/collectives -short. With -short it keeps the
// combinations that put every option value into play at least once with
// each other value of another option (6 of 24).
func TestOptionCombinations(t *testing.T) {
	build(t)
	sets := optionSets()
	if testing.Short() {
		sets = [][]string{sets[0], sets[5], sets[10], sets[15], sets[18], sets[23]}
	}
	checks := []struct{ prog, check string }{
		{"p2p", "order"}, {"p2p", "truncate"}, {"p2p", "ssend"}, {"datatypes", "column"},
	}
	sem := make(chan struct{}, 2) // two jobs at a time: the machine has 2 cores
	for _, s := range sets {
		t.Run(strings.Join(s, ","), func(t *testing.T) {
			t.Parallel()
			for _, c := range checks {
				sem <- struct{}{}
				run(t, 4, s, "PASS "+c.check, c.prog, c.check)
				<-sem
			}
			sem <- struct{}{}
			run(t, 4, s, "PASS errors", "collectives", "-short", "all")
			<-sem
		})
	}
}

// TestFewCredits runs the flow-control-heavy checks with 4 credits per peer
// and a 1 KiB eager limit, so that senders run out of credits all the time
// and credits come back both piggybacked and in credit messages; and with
// the registration cache off (every rendezvous registers and deregisters).
func TestFewCredits(t *testing.T) {
	build(t)
	opts := []string{"credits=4", "eager=1024", "regcache=0"}
	for _, c := range []struct{ prog, check string }{
		{"stress", "thresholds"}, {"stress", "flood"}, {"stress", "progress-rule"}, {"p2p", "many-pending"},
	} {
		np := 4
		if c.check == "flood" {
			np = 8
		}
		run(t, np, opts, "PASS "+c.check, c.prog, c.check)
	}
}

// jobEnv is this process's environment without the variables of an
// enclosing job (ADIMPI_, PMI_) and those named in drop ("GOMAXPROCS="),
// for an mpirun the test starts.
func jobEnv(drop ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range append([]string{"ADIMPI_", "PMI_"}, drop...) {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}
