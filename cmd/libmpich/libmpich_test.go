//go:build cgo

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
// C library), the np each runs at and the checks each must report passed
// ("ok NAME" lines from rank 0).
var cProgs = []struct {
	name, src, cc string
	np            int
	checks        []string
}{
	{"p2p", "p2p.c", "mpicc.mpich", 3, []string{"ring", "isend-irecv-waitall", "wait-test", "sendrecv", "probe", "persistent", "iprobe"}},
	{"coll", "coll.c", "mpicc.mpich", 4, []string{"barrier", "bcast", "reduce", "maxloc", "user-op", "gather-scatter", "gatherv", "alltoall", "scan", "nonblocking-persistent"}},
	{"dtype", "dtype.c", "mpicc.mpich", 2, []string{"vector", "indexed", "struct-bottom", "resized", "subarray", "pack", "large-count"}},
	{"comm", "comm.c", "mpicc.mpich", 4, []string{"split", "dup", "groups", "cart", "attributes", "info-mem", "intercomm"}},
	{"errors", "errors.c", "mpicc.mpich", 2, []string{"argument-errors", "truncate", "unsupported", "user-handler", "version"}},
	{"fortran", "fortran.f90", "mpif90.mpich", 3, []string{"collectives", "p2p", "split"}},
	{"cxx", "cxx.cxx", "mpicxx.mpich", 3, []string{"collectives", "p2p", "split"}},
}

// setup compiles the test programs with MPICH's compiler wrappers and
// builds mpirun; it returns the directory of the programs and mpirun's
// path.
func setup(t *testing.T) (string, string) {
	t.Helper()
	for _, tool := range []string{"gcc", "mpicc.mpich", "mpif90.mpich", "mpicxx.mpich"} {
		if _, err := exec.LookPath(tool); err != nil {
			testnote.Skip(t, tool+" is missing (apt-get install -y libmpich-dev, which brings gcc, g++ and gfortran): the test programs cannot be compiled")
		}
	}
	dir := t.TempDir()
	for _, p := range cProgs {
		out, err := exec.Command(p.cc, "-O1", "-o", filepath.Join(dir, p.name), filepath.Join("testdata", p.src)).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", p.cc, p.src, err, out)
		}
	}
	return dir, testbuild.Programs(t, "../mpirun")["mpirun"]
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
		out, err := runFor(t, 5*time.Minute, mpirun, []string{"XDG_CACHE_HOME=" + cache}, "-np", "2", filepath.Join(progs, "p2p"))
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
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	for _, dev := range adi.Devices() {
		for _, p := range cProgs {
			t.Run(dev+"/"+p.name, func(t *testing.T) {
				out, err := run(t, mpirun, env, "-device", dev, "-np", strconv.Itoa(p.np), filepath.Join(dir, p.name))
				if err != nil {
					t.Fatalf("mpirun -device %s -np %d %s: %v\n%s", dev, p.np, p.name, err, out)
				}
				for _, c := range p.checks {
					if !strings.Contains(out, "ok "+c+"\n") {
						t.Errorf("check %q did not pass:\n%s", c, out)
					}
				}
			})
		}
		t.Run(dev+"/fatal", func(t *testing.T) {
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
}

// TestNetPIPE runs Debian's NetPIPE (netpipe-mpich2, built against MPICH's
// libmpich12), unmodified, on every device: its integrity mode checks
// every byte of each message from 1 byte to 256 KiB, with pre-posted
// receives (-a) and with synchronous sends (-S).
func TestNetPIPE(t *testing.T) {
	const netpipe = "/usr/bin/NPmpich2"
	if _, err := os.Stat(netpipe); err != nil {
		testnote.Skip(t, netpipe+" is missing (apt-get install -y netpipe-mpich2)")
	}
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	for _, dev := range adi.Devices() {
		for _, mode := range []string{"-a", "-S"} {
			t.Run(dev+"/"+mode, func(t *testing.T) {
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

// TestBenchTwins runs the project's C benchmark programs (bench/c, the
// twins of cmd/mpibench written for MPICH and Open MPI), compiled with
// mpicc.mpich, on every device with small sizes: osu_bw-style windows of
// Isend/Irecv/Waitall, and MPI_ANY_SOURCE receives from two senders. They
// check the data they receive and print CSV rows.
func TestBenchTwins(t *testing.T) {
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	bin := filepath.Join(dir, "mpibench-c")
	if out, err := exec.Command("mpicc.mpich", "-O2", "-o", bin, filepath.Join("..", "..", "bench", "c", "mpibench.c")).CombinedOutput(); err != nil {
		t.Fatalf("mpicc.mpich bench/c/mpibench.c: %v\n%s", err, out)
	}
	for _, dev := range adi.Devices() {
		for _, b := range []struct{ name, np, row string }{{"bw", "2", "bw,"}, {"anysource", "3", "anysource_ratio,"}} {
			t.Run(dev+"/"+b.name, func(t *testing.T) {
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
	dir, mpirun := setup(t)
	env := libEnv(t, mpirun, dir)
	netcluster := testbuild.Programs(t, "../netcluster")["netcluster"]
	c := nc.StartT(t, 2)
	launcher := fmt.Sprintf("%s exec -dir %s {host} --", netcluster, c.Dir)
	for _, dev := range adi.Devices() {
		for _, p := range cProgs[:2] {
			t.Run(dev+"/"+p.name, func(t *testing.T) {
				out, err := run(t, mpirun, env, "-launcher-exec", launcher, "-hosts", "h1,h2", "-np", "4", "-l", "-device", dev, filepath.Join(dir, p.name))
				if err != nil {
					t.Fatalf("%s on %s across h1, h2: %v\n%s", p.name, dev, err, out)
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
