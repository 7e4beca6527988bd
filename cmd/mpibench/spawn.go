package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/adimpi/adimpi/mpi"
)

// spawnCounts are the numbers of children the spawn subcommand starts.
var spawnCounts = []int{1, 4, 16}

// runSpawn is the spawn subcommand, run on one process (mpirun -np 1): the
// time of CommSpawn of N copies of mpibench ("spawn-child", which
// disconnects at once) on MPI_COMM_SELF, from the call until it returns
// with a working intercommunicator (the children's Init included), then a
// CommDisconnect, for N = 1, 4, 16 (or --spawn-children). Rows:
// spawn_time, ms, size = N, median of --reps rounds in which the counts
// take turns.
func runSpawn(cfg *config) {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		os.Exit(1)
	}
	self, err := os.Executable()
	check(err, "os.Executable")
	counts := spawnCounts
	if cfg.spawnChildren > 0 {
		counts = []int{cfg.spawnChildren}
	}
	times := map[int][]float64{}
	for r := 0; r < cfg.reps; r++ {
		for _, n := range counts {
			t0 := time.Now()
			inter, _, err := mpi.CommSpawn(self, []string{"spawn-child"}, n, nil, 0, mpi.Self())
			check(err, "MPI_Comm_spawn")
			el := time.Since(t0)
			check(mpi.CommDisconnect(inter), "MPI_Comm_disconnect")
			times[n] = append(times[n], float64(el.Microseconds())/1e3)
		}
	}
	if mpi.World().Rank() == 0 {
		var rows []row
		for _, n := range counts {
			rows = append(rows, row{bench: "spawn_time", device: mpi.DeviceName(), np: 1, size: n, value: median(times[n]), unit: "ms"})
		}
		printRows(os.Stdout, cfg, rows)
	}
	check(mpi.Finalize(), "MPI_Finalize")
}

// runSpawnChild is a spawned child: it meets its parent and leaves.
func runSpawnChild() {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench spawn-child:", err)
		os.Exit(1)
	}
	if p := mpi.CommGetParent(); p != nil {
		check(mpi.CommDisconnect(p), "MPI_Comm_disconnect")
	}
	check(mpi.Finalize(), "MPI_Finalize")
}

// spawnCompare is "mpibench spawn-compare": spawn times of adimpi (this
// mpibench's spawn subcommand under adimpi's mpirun) against Open MPI's
// MPI_Comm_spawn (bench/c/spawn.c, built with mpicc.openmpi and run with
// mpirun.openmpi), the two taking turns within each round, one spawn of
// each count per turn. It prints a Markdown table of the medians and the
// load before and after.
func spawnCompare(args []string) int {
	fs := pflag.NewFlagSet("mpibench spawn-compare", pflag.ContinueOnError)
	reps := fs.Int("reps", 5, "rounds; each runs both sides once per count of children")
	mpirun := fs.String("mpirun", "", "adimpi's mpirun (default: built from ./cmd/mpirun)")
	device := fs.String("device", "netvm", "adimpi's device")
	src := fs.String("c-source", "bench/c/spawn.c", "the C twin")
	ompiRun := fs.String("ompi-run", "mpirun.openmpi", "Open MPI's launcher")
	ompiCC := fs.String("ompi-cc", "mpicc.openmpi", "Open MPI's compiler wrapper")
	children := fs.IntSlice("children", spawnCounts, "the numbers of children")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	tmp, err := os.MkdirTemp("", "mpibench-spawn")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mpibench spawn-compare:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "mpibench spawn-compare:", err)
		return 1
	}
	if *mpirun == "" {
		*mpirun = filepath.Join(tmp, "mpirun")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", *mpirun, "./cmd/mpirun").CombinedOutput(); err != nil {
			return fail(fmt.Errorf("building mpirun (run from the source tree, or give --mpirun): %v\n%s", err, out))
		}
	}
	cbin := filepath.Join(tmp, "spawn")
	if out, err := exec.CommandContext(ctx, *ompiCC, "-O2", "-o", cbin, *src).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("%s %s: %v\n%s", *ompiCC, *src, err, out))
	}
	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	load0 := loadAvg()
	ours, theirs := map[int][]float64{}, map[int][]float64{}
	for r := 0; r < *reps; r++ {
		for _, n := range *children {
			v, err := spawnOnce(ctx, exec.CommandContext(ctx, *mpirun, "-device", *device, "-np", "1", self, "spawn", "--spawn-children", strconv.Itoa(n), "--reps", "1", "--csv", "--header=false"), n)
			if err != nil {
				return fail(err)
			}
			ours[n] = append(ours[n], v)
			v, err = spawnOnce(ctx, exec.CommandContext(ctx, *ompiRun, "--allow-run-as-root", "--oversubscribe", "-n", "1", cbin, strconv.Itoa(n), "1"), n)
			if err != nil {
				return fail(err)
			}
			theirs[n] = append(theirs[n], v)
		}
	}
	fmt.Printf("Spawn time (ms, median of %d interleaved rounds; load %s before, %s after; adimpi on %s):\n\n", *reps, load0, loadAvg(), *device)
	fmt.Println("| children | adimpi | Open MPI | adimpi per child | Open MPI per child | Open MPI / adimpi |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, n := range *children {
		a, o := median(ours[n]), median(theirs[n])
		fmt.Printf("| %d | %.1f | %.1f | %.2f | %.2f | %.1f× |\n", n, a, o, a/float64(n), o/float64(n), o/a)
	}
	return 0
}

// spawnOnce runs one spawn program and reads its time: a CSV row of the
// spawn subcommand, or the C twin's "spawn N children: T ms".
func spawnOnce(ctx context.Context, cmd *exec.Cmd, n int) (float64, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%v: %v\n%s", cmd.Args, err, out.String())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Split(line, ","); len(f) == 6 && f[0] == "spawn_time" && f[3] == strconv.Itoa(n) {
			return strconv.ParseFloat(f[4], 64)
		}
		var k int
		var t float64
		if _, err := fmt.Sscanf(line, "spawn %d children: %f ms", &k, &t); err == nil && k == n {
			return t, nil
		}
	}
	return 0, fmt.Errorf("%v printed no time:\n%s", cmd.Args, out.String())
}
