//go:build cgo

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adimpi/adimpi/adi"
	nc "github.com/adimpi/adimpi/internal/netcluster"
	"github.com/adimpi/adimpi/internal/testbuild"
	"github.com/adimpi/adimpi/internal/testnote"
	"github.com/adimpi/adimpi/mpi"
)

// cProgs are the test programs of testdata, the MPICH compiler wrapper
// that builds each (C, and MPICH's Fortran and C++ bindings, which call the
// C library), the np each runs at, the checks each must report passed
// ("ok NAME" lines from rank 0), whether it runs on every device (the
// Fortran and C++ programs test the bindings, not the devices: one device),
// and lines the output must hold exactly once per rank.
var cProgs = []struct {
	name, src, cc string
	np            int
	checks        []string
	everyDevice   bool
	perRank       []string
}{
	{"p2p", "p2p.c", "mpicc.mpich", 3, []string{"ring", "isend-irecv-waitall", "wait-test", "sendrecv", "probe", "persistent", "iprobe"}, true, nil},
	{"coll", "coll.c", "mpicc.mpich", 4, []string{"barrier", "bcast", "reduce", "maxloc", "user-op", "gather-scatter", "gatherv", "alltoall", "scan", "nonblocking-persistent", "large-count"}, true, nil},
	{"dtype", "dtype.c", "mpicc.mpich", 2, []string{"vector", "indexed", "struct-bottom", "resized", "subarray", "pack", "large-count", "large-count-pack", "large-count-types", "large-count-decode", "match-size", "type-attributes"}, true, nil},
	{"comm", "comm.c", "mpicc.mpich", 3, []string{"split", "dup", "groups", "cart", "graph", "attributes", "info-mem", "comm-info", "intercomm"}, true, nil},
	{"errors", "errors.c", "mpicc.mpich", 2, []string{"argument-errors", "truncate", "unsupported", "user-handler", "version"}, true,
		[]string{"adimpi libmpich: MPI_File_delete is not implemented; it returns MPI_ERR_UNSUPPORTED_OPERATION (docs/c-abi.md lists what is)"}},
	{"rma", "rma.c", "mpicc.mpich", 3, []string{"fence-put-get", "attributes", "lock-unlock", "accumulate", "fetch-and-op-counter", "compare-and-swap", "pscw", "dynamic-rget", "errors", "win-errhandler-attributes", "shared-query-c"}, true, nil},
	{"spawn", "spawn.c", "mpicc.mpich", 2, []string{"spawn", "ports-names", "join"}, true, nil},
	{"fastpath", "fastpath.c", "mpicc.mpich", 3, fastChecks, true, nil},
	{"fortran", "fortran.f90", "mpif90.mpich", 2, []string{"collectives", "p2p", "split"}, false, nil},
	{"cxx", "cxx.cxx", "mpicxx.mpich", 2, []string{"collectives", "p2p", "split"}, false, nil},
}

// progs holds the compiled test programs and mpirun, built once for all
// the tests of the package.
var progs struct {
	once        sync.Once
	dir, mpirun string
	err         error
}

// setup compiles the test programs with MPICH's compiler wrappers and
// builds mpirun (once for the package); it returns the directory of the
// programs and mpirun's path.
func setup(t *testing.T) (string, string) {
	t.Helper()
	for _, tool := range []string{"gcc", "mpicc.mpich", "mpif90.mpich", "mpicxx.mpich"} {
		if _, err := exec.LookPath(tool); err != nil {
			testnote.Skip(t, tool+" is missing (apt-get install -y libmpich-dev, which brings gcc, g++ and gfortran): the test programs cannot be compiled")
		}
	}
	progs.once.Do(func() {
		dir, err := os.MkdirTemp("", "libmpich-progs-")
		if err != nil {
			progs.err = err
			return
		}
		progs.dir = dir
		var wg sync.WaitGroup
		errs := make([]error, len(cProgs)+1)
		for i, p := range cProgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := exec.Command(p.cc, "-O1", "-o", filepath.Join(dir, p.name), filepath.Join("testdata", p.src)).CombinedOutput()
				if err != nil {
					errs[i] = fmt.Errorf("%s %s: %v\n%s", p.cc, p.src, err, out)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := filepath.Join("..", "..", "bench", "c", "mpibench.c")
			if out, err := exec.Command("mpicc.mpich", "-O2", "-o", filepath.Join(dir, "mpibench-c"), src).CombinedOutput(); err != nil {
				errs[len(cProgs)] = fmt.Errorf("mpicc.mpich bench/c/mpibench.c: %v\n%s", err, out)
			}
		}()
		// mpirun is built here, not by testbuild, whose directory would go
		// with the first test that asked for it.
		progs.mpirun = filepath.Join(dir, "mpirun")
		var merr error
		if out, err := exec.Command("go", "build", "-o", progs.mpirun, "../mpirun").CombinedOutput(); err != nil {
			merr = fmt.Errorf("go build ../mpirun: %v\n%s", err, out)
		}
		wg.Wait()
		progs.err = errors.Join(append(errs, merr)...)
	})
	if progs.err != nil {
		t.Fatal(progs.err)
	}
	return progs.dir, progs.mpirun
}

// slots bounds the mpirun jobs the parallel tests run at once: the
// programs are small, so two or three jobs share the two cores of CI
// without slowing each other much, and the package takes a third of the
// time it would take one job at a time.
var slots = make(chan struct{}, 3)

// parallel marks t parallel and holds a job slot until it ends.
func parallel(t *testing.T) {
	t.Parallel()
	slots <- struct{}{}
	t.Cleanup(func() { <-slots })
}

// run starts mpirun with args and the extra environment, under a time
// limit, in the test's directory (inside the adimpi module, where mpirun
// can build the library), and returns its combined output and error.
func run(t *testing.T, mpirun string, env []string, args ...string) (string, error) {
	t.Helper()
	return runFor(t, 90*time.Second, mpirun, env, args...)
}

// runFor is run with a time limit of d.
func runFor(t *testing.T, d time.Duration, mpirun string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, mpirun, append([]string{"-timeout", "60s"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// lib is the directory of the libmpich.so.12 the tests share, built by
// the first mpirun run of a C program (libEnv).
var lib struct {
	once sync.Once
	dir  string
	err  error
}

// TestMain removes the shared library build, and finalizes the singleton
// MPI that the in-process tests started.
func TestMain(m *testing.M) {
	code := m.Run()
	if lib.dir != "" {
		os.RemoveAll(lib.dir)
	}
	if progs.dir != "" {
		os.RemoveAll(progs.dir)
	}
	if mpi.Initialized() && !mpi.Finalized() {
		if rc := MPI_Finalize(); rc != 0 {
			fmt.Fprintf(os.Stderr, "MPI_Finalize: %s\n", errorString(int32(rc)))
			code = 1
		}
	}
	os.Exit(code)
}

// libEnv returns the environment that gives mpirun the shared library.
// The first call lets mpirun build it into a fresh cache
// (XDG_CACHE_HOME), the path a user takes, by running the p2p program;
// later runs reuse it through ADIMPI_LIBMPICH_DIR, so the tests link the
// library once.
func libEnv(t *testing.T, mpirun, progs string) []string {
	t.Helper()
	lib.once.Do(func() {
		cache, err := os.MkdirTemp("", "libmpich-test-")
		if err != nil {
			lib.err = err
			return
		}
		lib.dir = cache
		// Linking the library takes 15-30 s; on a machine busy with other
		// jobs, minutes.
		out, err := runFor(t, 8*time.Minute, mpirun, []string{"XDG_CACHE_HOME=" + cache}, "-np", "2", filepath.Join(progs, "p2p"))
		if err != nil {
			lib.err = fmt.Errorf("first C program, which has mpirun build libmpich.so.12: %v\n%s", err, out)
			return
		}
		d := filepath.Join(cache, "adimpi", "mpirun", "libmpich")
		if _, err := os.Stat(filepath.Join(d, "libmpich.so.12")); err != nil {
			lib.err = fmt.Errorf("mpirun did not build libmpich.so.12 into its cache: %v\n%s", err, out)
		}
	})
	if lib.err != nil {
		t.Fatal(lib.err)
	}
	return []string{"ADIMPI_LIBMPICH_DIR=" + filepath.Join(lib.dir, "adimpi", "mpirun", "libmpich")}
}

// TestCPrograms runs programs compiled with Debian's mpicc.mpich (and
// mpif90.mpich, mpicxx.mpich), unmodified, on every device: mpirun sees
// that they link MPICH's libraries and gives them adimpi's libmpich.so.12.
func TestCPrograms(t *testing.T) {
	t.Parallel()
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	for _, dev := range adi.Devices() {
		for _, p := range cProgs {
			if !p.everyDevice && dev != adi.Devices()[0] {
				continue
			}
			t.Run(dev+"/"+p.name, func(t *testing.T) {
				parallel(t)
				out, err := run(t, mpirun, env, "-device", dev, "-np", strconv.Itoa(p.np), filepath.Join(dir, p.name))
				if err != nil {
					t.Fatalf("mpirun -device %s -np %d %s: %v\n%s", dev, p.np, p.name, err, out)
				}
				for _, c := range p.checks {
					if !strings.Contains(out, "ok "+c+"\n") {
						t.Errorf("check %q did not pass:\n%s", c, out)
					}
				}
				for _, l := range p.perRank {
					if n := strings.Count(out, l+"\n"); n != p.np {
						t.Errorf("%d lines %q, want one per rank (%d):\n%s", n, l, p.np, out)
					}
				}
			})
		}
		t.Run(dev+"/fatal", func(t *testing.T) {
			parallel(t)
			// MPI_ERRORS_ARE_FATAL, C's default, stops the job with the
			// call, the class and the bad value.
			out, err := run(t, mpirun, env, "-device", dev, "-np", "2", filepath.Join(dir, "errors"), "fatal")
			if err == nil {
				t.Fatalf("an invalid rank under MPI_ERRORS_ARE_FATAL did not fail the job:\n%s", out)
			}
			if !regexp.MustCompile(`MPI_Send: MPI_ERR_RANK: dest 7 .*MPI_ERRORS_ARE_FATAL`).MatchString(out) {
				t.Errorf("the fatal error does not say what failed:\n%s", out)
			}
		})
	}
	t.Run("win-fatal", func(t *testing.T) {
		parallel(t)
		// A window without its own handler raises through MPI_COMM_WORLD's
		// (MPICH's rule): MPI_ERRORS_ARE_FATAL stops the job.
		out, err := run(t, mpirun, env, "-np", "2", filepath.Join(dir, "rma"), "fatal")
		if err == nil {
			t.Fatalf("an invalid target rank of MPI_Put under world's MPI_ERRORS_ARE_FATAL did not fail the job:\n%s", out)
		}
		if !regexp.MustCompile(`MPI_Put: MPI_ERR_RANK: target rank 5 .*MPI_ERRORS_ARE_FATAL on MPI_COMM_WORLD`).MatchString(out) {
			t.Errorf("the fatal error does not say what failed:\n%s", out)
		}
	})
}

// TestCProgramWrapped runs a C program behind a wrapper that passes its
// environment on (env(1), as strace, perf or valgrind would be): mpirun
// sees the program among the wrapper's arguments and gives the ranks
// adimpi's library, so the program's version check (which wants adimpi's
// MPI_Get_library_version) passes; without it the program would load
// Debian's MPICH. A wrapper naming the program by its bare name, found in
// $PATH, gets the library too.
func TestCProgramWrapped(t *testing.T) {
	t.Parallel()
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	for name, args := range map[string][]string{
		"path":      {"env", "ADIMPI_WRAPPED=1", filepath.Join(dir, "errors")},
		"bare-name": {"env", "errors"},
	} {
		t.Run(name, func(t *testing.T) {
			parallel(t)
			cmdEnv := env
			if name == "bare-name" {
				cmdEnv = append(slices.Clone(env), "PATH="+dir+":"+os.Getenv("PATH"))
			}
			out, err := run(t, mpirun, cmdEnv, append([]string{"-np", "2"}, args...)...)
			if err != nil {
				t.Fatalf("mpirun -np 2 %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			if !strings.Contains(out, "ok version\n") {
				t.Errorf("the wrapped program did not run on adimpi's library:\n%s", out)
			}
		})
	}
}

// fastChecks are the checks of testdata/fastpath.c.
var fastChecks = []string{"in-order", "unexpected-first", "any-source", "posted-first", "truncate-count", "ping-pong", "sizes"}

// TestCFastPath runs testdata/fastpath.c on netvm, bip, fm and via with the C
// fast path of MPI_Send and MPI_Recv on, off (ADIMPI_CFAST=off), and on but with
// MPI_THREAD_MULTIPLE asked for, which must keep it off: every run must
// pass the program's order and content checks, and the fast path must
// have moved messages in the runs with it on only (the program prints the
// library's counters), so that the checks ran against it. With it on,
// MPI_Init provides MPI_THREAD_SINGLE (MPI_Query_thread says so). fm runs
// once more with regions of two packets (slots=2): a sender then runs out
// of credits every other message, so the C side and the Go side return,
// take and spend each other's credits all the time, and a credit lost
// (a hang) or returned twice (an overwritten packet: a wrong value) fails.
// via runs once more with 8 credits per peer: a receive then leaves every
// fourth message to the Go side (which sends the credit message), and a
// sender runs short of credits often, so that the C side and the Go side
// hand the receive queues and the credits back and forth all the time.
func TestCFastPath(t *testing.T) {
	t.Parallel()
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	counts := regexp.MustCompile(`rank (\d) fast sent (\d+) received (\d+)`)
	for _, run1 := range []string{"netvm/on", "netvm/off", "netvm/multiple", "bip/on", "bip/off", "bip/multiple", "fm/on", "fm/off", "fm/multiple", "fm/slots2", "via/on", "via/off", "via/multiple", "via/credits8"} {
		dev, mode, _ := strings.Cut(run1, "/")
		t.Run(run1, func(t *testing.T) {
			parallel(t)
			args := []string{"-device", dev, "-np", "3", filepath.Join(dir, "fastpath")}
			cfast := mode
			switch mode {
			case "multiple":
				args, cfast = append(args, "multiple"), "on"
			case "slots2":
				args, cfast, mode = append([]string{"-device-opt", "slots=2"}, args...), "on", "on"
			case "credits8":
				args, cfast, mode = append([]string{"-device-opt", "credits=8"}, args...), "on", "on"
			}
			// A receive polls the ring longer than by default (about 0.5 ms
			// here), so that on a loaded machine a partner's message still
			// reaches it there rather than through Go.
			out, err := run(t, mpirun, append(env, "ADIMPI_CFAST="+cfast, "ADIMPI_CFAST_SPIN=20000"), args...)
			if err != nil {
				t.Fatalf("fastpath with ADIMPI_CFAST=%s: %v\n%s", mode, err, out)
			}
			for _, c := range fastChecks {
				if !strings.Contains(out, "ok "+c+"\n") {
					t.Errorf("check %q did not pass:\n%s", c, out)
				}
			}
			sent, received := map[string]int{}, map[string]int{}
			for _, m := range counts.FindAllStringSubmatch(out, -1) {
				sent[m[1]], _ = strconv.Atoi(m[2])
				received[m[1]], _ = strconv.Atoi(m[3])
			}
			if len(sent) != 3 {
				t.Fatalf("want the counters of 3 ranks:\n%s", out)
			}
			level := "3" // MPI_THREAD_MULTIPLE: adimpi's level without the fast path
			if mode == "on" {
				level = "0" // MPI_THREAD_SINGLE
			}
			if n := strings.Count(out, "thread level "+level+"\n"); n != 3 {
				t.Errorf("%d ranks report thread level %s, want 3:\n%s", n, level, out)
			}
			if mode != "on" {
				for r := range sent {
					if sent[r]+received[r] != 0 {
						t.Errorf("rank %s: the fast path moved messages (%s):\n%s", r, mode, out)
					}
				}
			} else if sent["0"] == 0 || received["1"] == 0 || sent["1"] == 0 || received["0"] == 0 {
				t.Errorf("the fast path moved no messages one way:\n%s", out)
			}
		})
	}
}

// TestNetPIPE runs Debian's NetPIPE (netpipe-mpich2, built against MPICH's
// libmpich12), unmodified, on every device: its integrity mode checks
// every byte of each message from 1 byte to 256 KiB, with pre-posted
// receives (-a) on every device and with synchronous sends (-S) on one.
func TestNetPIPE(t *testing.T) {
	const netpipe = "/usr/bin/NPmpich2"
	if _, err := os.Stat(netpipe); err != nil {
		testnote.Skip(t, netpipe+" is missing (apt-get install -y netpipe-mpich2)")
	}
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	t.Parallel()
	for _, dev := range adi.Devices() {
		for _, mode := range []string{"-a", "-S"} {
			if mode == "-S" && dev != adi.Devices()[0] {
				continue // synchronous sends: one device
			}
			t.Run(dev+"/"+mode, func(t *testing.T) {
				parallel(t)
				out, err := run(t, mpirun, env, "-device", dev, "-np", "2", netpipe, "-i", "-n", "3", "-u", "262144", "-o", "/dev/null", mode)
				if err != nil {
					t.Fatalf("NPmpich2 %s on %s: %v\n%s", mode, dev, err, out)
				}
				if n := strings.Count(out, "Integrity check passed"); n < 30 || strings.Contains(out, "failed") {
					t.Errorf("NPmpich2 %s on %s: %d sizes passed the integrity check, want ≥ 30:\n%s", mode, dev, n, out)
				}
			})
		}
	}
}

// scalapackTests is where Debian's scalapack-mpi-test puts the ScaLAPACK
// test programs built against MPICH.
const scalapackTests = "/usr/lib/x86_64-linux-gnu/scalapack/mpich-tests"

// TestScaLAPACK runs Debian's ScaLAPACK test programs built against
// MPICH's libmpich12 (scalapack-mpi-test), unmodified, on every device: the
// LU (xdlu) and the QR, LQ and pivoted QR (xdqr) factorizations of small
// double-precision matrices on a 1×2 process grid, with the inputs of
// testdata/scalapack. Each program checks its residuals; the test wants
// every check passed.
func TestScaLAPACK(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(filepath.Join(scalapackTests, "xdlu")); err != nil {
		testnote.Skip(t, scalapackTests+"/xdlu is missing (apt-get install -y scalapack-mpi-test)")
	}
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	wdir := t.TempDir() // the programs read LU.dat and QR.dat from their working directory
	for _, f := range []string{"LU.dat", "QR.dat"} {
		b, err := os.ReadFile(filepath.Join("testdata", "scalapack", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(wdir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, dev := range adi.Devices() {
		for _, x := range []struct {
			prog string
			n    int
		}{{"xdlu", 1}, {"xdqr", 3}} {
			t.Run(dev+"/"+x.prog, func(t *testing.T) {
				parallel(t)
				out, err := run(t, mpirun, env, "-device", dev, "-np", "2", "-wdir", wdir, filepath.Join(scalapackTests, x.prog))
				if err != nil {
					t.Fatalf("%s on %s: %v\n%s", x.prog, dev, err, out)
				}
				want := fmt.Sprintf("%d tests completed and passed residual checks", x.n)
				if !strings.Contains(out, want) || !strings.Contains(out, "0 tests completed and failed residual checks") {
					t.Errorf("%s on %s: want %q and no failed check:\n%s", x.prog, dev, want, out)
				}
			})
		}
	}
}

// nwchem is Debian's NWChem built against MPICH (nwchem-mpich): Global
// Arrays over ARMCI-MPI, that is MPI-3 RMA (MPI_Win_allocate, passive-target
// locks, accumulates), plus collectives and ScaLAPACK.
const nwchem = "/usr/bin/nwchem.mpich"

// TestNWChem runs an NWChem RHF energy of water (testdata/nwchem/h2o.nw) at
// np 2 on every device and wants NWChem's own answer for it, the energy it
// prints under Open MPI at np 2 and under MPICH at np 1, to 9 decimals.
func TestNWChem(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(nwchem); err != nil {
		testnote.Skip(t, nwchem+" is missing (apt-get install -y nwchem-mpich)")
	}
	input, err := filepath.Abs(filepath.Join("testdata", "nwchem", "h2o.nw"))
	if err != nil {
		t.Fatal(err)
	}
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	const want = "Total SCF energy =    -74.963063120"
	for _, dev := range adi.Devices() {
		t.Run(dev, func(t *testing.T) {
			parallel(t)
			out, err := run(t, mpirun, env, "-device", dev, "-np", "2", "-wdir", t.TempDir(), nwchem, input)
			if err != nil || !strings.Contains(out, want) {
				t.Fatalf("NWChem on %s: %v; want %q in its output:\n%s", dev, err, want, out)
			}
		})
	}
}

// TestBenchTwins runs the project's C benchmark programs (bench/c, the
// twins of cmd/mpibench written for MPICH and Open MPI), compiled with
// mpicc.mpich, on every device with small sizes: osu_bw-style windows of
// Isend/Irecv/Waitall on every device, and MPI_ANY_SOURCE receives from
// two senders on one. They check the data they receive and print CSV rows.
func TestBenchTwins(t *testing.T) {
	t.Parallel()
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	bin := filepath.Join(dir, "mpibench-c")
	for _, dev := range adi.Devices() {
		for _, b := range []struct{ name, np, row string }{{"bw", "2", "bw,"}, {"anysource", "3", "anysource_ratio,"}} {
			if b.name == "anysource" && dev != adi.Devices()[0] {
				continue // the receive side's matching: one device
			}
			t.Run(dev+"/"+b.name, func(t *testing.T) {
				parallel(t)
				out, err := run(t, mpirun, env, "-device", dev, "-np", b.np, bin, b.name,
					"--max-size", "262144", "--iters", "3", "--reps", "1", "--msgs", "50", "--window", "8", "--no-header")
				if err != nil {
					t.Fatalf("mpibench-c %s on %s: %v\n%s", b.name, dev, err, out)
				}
				if !strings.Contains(out, b.row) {
					t.Errorf("mpibench-c %s on %s printed no %s row:\n%s", b.name, dev, b.row, out)
				}
			})
		}
	}
}

// TestCProgramsAcrossHosts runs the p2p and collective programs with their
// four ranks in blocks on two simulated hosts (internal/netcluster: network
// namespaces, root only) on every device, started by mpirun's
// -launcher-exec; the library reaches the remote ranks through the
// environment mpirun passes.
func TestCProgramsAcrossHosts(t *testing.T) {
	if os.Geteuid() != 0 {
		testnote.Skip(t, fmt.Sprintf("simulated hosts need root to create namespaces (running as uid %d)", os.Geteuid()))
	}
	t.Parallel()
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	netcluster := testbuild.Programs(t, "../netcluster")["netcluster"]
	c := nc.StartT(t, 2)
	launcher := fmt.Sprintf("%s exec -dir %s {host} --", netcluster, c.Dir)
	for _, dev := range adi.Devices() {
		for _, p := range cProgs[:2] {
			// np 4, and the collectives at np 16 too (8 ranks a host).
			nps := []int{4}
			if p.name == "coll" {
				nps = append(nps, 16)
			}
			for _, np := range nps {
				t.Run(fmt.Sprintf("%s/%s/np%d", dev, p.name, np), func(t *testing.T) {
					parallel(t)
					out, err := run(t, mpirun, env, "-launcher-exec", launcher, "-hosts", "h1,h2", "-np", strconv.Itoa(np), "-l", "-device", dev, filepath.Join(dir, p.name))
					if err != nil {
						t.Fatalf("%s on %s at np %d across h1, h2: %v\n%s", p.name, dev, np, err, out)
					}
					if !strings.Contains(out, "[0@h1] ok ") {
						t.Errorf("rank 0's lines are not labelled as coming from h1:\n%s", out)
					}
					for _, ch := range p.checks {
						if !strings.Contains(out, "ok "+ch+"\n") {
							t.Errorf("check %q did not pass:\n%s", ch, out)
						}
					}
				})
			}
		}
	}
}

// TestCProgramsNP16 runs the p2p and collective programs at np 16 on one
// host, on every device: 16 processes, each with the Go runtime of the
// library, on a machine of 2 cores.
func TestCProgramsNP16(t *testing.T) {
	t.Parallel()
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	for _, dev := range adi.Devices() {
		for _, p := range cProgs[:2] {
			t.Run(dev+"/"+p.name, func(t *testing.T) {
				parallel(t)
				out, err := run(t, mpirun, env, "-device", dev, "-np", "16", filepath.Join(dir, p.name))
				if err != nil {
					t.Fatalf("mpirun -device %s -np 16 %s: %v\n%s", dev, p.name, err, out)
				}
				for _, c := range p.checks {
					if !strings.Contains(out, "ok "+c+"\n") {
						t.Errorf("check %q did not pass:\n%s", c, out)
					}
				}
			})
		}
	}
}
