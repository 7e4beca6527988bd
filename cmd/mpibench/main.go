// Mpibench measures adimpi's point-to-point performance, in the manner of the
// OSU micro-benchmarks, and prints one row per measurement.
//
// Usage:
//
//	mpirun -np 2 mpibench pingpong [flags]   one-way latency, blocking Send/Recv
//	mpirun -np 2 mpibench bw [flags]         streaming bandwidth, windows of Isend/Irecv
//	mpirun -np N mpibench anysource [flags]  AnySource vs. specific-source receives, k = 1..N-1 senders
//	mpirun -np N mpibench rate [flags]       message rate (osu_mbw_mr): windows of Isend/Irecv, --pattern pairs|fanin|ring
//	mpirun -np 2 mpibench virtus [flags]     VIRTUS: strided (Vector, stride 2×block) vs. contiguous bandwidth
//	mpirun -np N mpibench rma [flags]        one-sided: put/get latency and bandwidth, accumulate and FetchAndOp rates
//	mpirun -np 2 mpibench dmcs [flags]       DMCS remote service requests: round trip, call time, rate by payload
//	mpirun -np 1 mpibench spawn [flags]      spawn time of 1, 4 and 16 children
//	mpibench spawn-compare [flags]           spawn time against Open MPI's, a Markdown table
//	mpirun -np 2 mpibench raw DEVICE         a device's own transfer API, no MPI (netvm, fm, bip, via)
//	mpibench memcpy [flags]                  single-process floor: copy() and a cache-line ping-pong
//	mpibench summarize results.csv           ratios from a CSV made by bench/compare.sh
//
// Rank 0 prints an aligned table, or with --csv the columns
// bench,device,np,size,value,unit under a header row. bench/c holds the same
// patterns written in C for MPICH and Open MPI, printing the same CSV, and
// bench/compare.sh runs them all and summarises.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/adimpi/adimpi/mpi"
)

// config holds the command-line settings shared by the subcommands.
type config struct {
	csv      bool
	header   bool
	minSize  int
	maxSize  int
	iters    int
	window   int
	reps     int
	minTime  time.Duration
	msgs     int
	senders  int
	checkBuf bool
	touch    bool
	// dist: pingpong also times every iteration of one more repetition
	// (rows pingpong_mean, pingpong_p50, pingpong_p90, pingpong_p99).
	dist bool
	// allreduceLarge is coll's large Allreduce in bytes.
	allreduceLarge int
	// winCreate: rma uses WinCreate windows rather than WinAllocate.
	winCreate bool
	// comm is the communicator coll runs on: "world" or "dup" (a Dup of it).
	comm string
	// dmcsThread: dmcs serves with the poll thread rather than Poll.
	dmcsThread bool
	// dmcsSpin is dmcs.Options.Spin.
	dmcsSpin time.Duration
	// spawnChildren: spawn starts only this many children (0: 1, 4, 16).
	spawnChildren int
	// pattern is rate's: pairs, fanin or ring (rate.go).
	pattern string
	// phases: rate also times the phases of every window of one more
	// repetition (ratePhases).
	phases bool
}

const usage = `usage: mpibench SUBCOMMAND [flags]

subcommands (run the MPI ones under mpirun):
  pingpong    one-way latency between ranks 0 and 1 (blocking Send/Recv)
  bw          streaming bandwidth from rank 0 to rank 1 (--window Isends per ack)
  anysource   rank 0 receives from k senders, AnySource vs. specific source
  rate        message rate, osu_mbw_mr-style: windows of --window Isends per
              acknowledgement, --pattern pairs (rank i to i+np/2), fanin (all
              to rank 0) or ring; MB/s, Mmsg/s and netvm's prediction hit ratio
  virtus      bw of a strided array (Vector of --block-min..--block-max blocks,
              stride 2×block, --total data bytes) vs. the same bytes contiguous
  rma         one-sided: Put/Get + Flush latency and bandwidth (rank 0 to 1),
              Accumulate rate, FetchAndOp rate with every rank on rank 0
  coll        Barrier, Allreduce 8 B / 8 MiB, Bcast 1 MiB, Alltoall 64 KiB per pair
  bcast       Bcast from rank 0, 8 B to --max-size in powers of 8 (with
              ADIMPI_NATIVE_COLL=off: the core's algorithms, not the device's)
  overlap     exchange around a fixed computation: overlap ratio, plain or with
              "iprobe" in the loop (run under mpirun -async-progress for async)
  dmcs        DMCS remote service requests, rank 0 to 1, 0 B to 8 KiB: round
              trip, call time and rate over shared memory and over MPI
  spawn       (mpirun -np 1) time of CommSpawn of 1, 4 and 16 children
  spawn-compare  spawn against Open MPI's MPI_Comm_spawn (bench/c/spawn.c),
              interleaved rounds, a Markdown table (spawn-compare --help)
  raw DEVICE  each device's own transfer API (netvm, fm, bip, via) between
              ranks 0 and 1, timed as bw: --min-size 64 KiB by default
  memcpy      single process: copy() bandwidth and a cache-line ping-pong
  summarize   read a results CSV (bench/compare.sh) and print the ratios
  summarize-coll, summarize-overlap
              the same for bench/compare-coll.sh and bench/compare-overlap.sh
  compare     run everything on every device and on MPICH / Open MPI, write
              a Markdown report with plots (mpibench compare --help)
  xdpcompare  the XDP wire against the TCP wire and Open MPI's TCP BTL across
              two simulated hosts, with the raw AF_XDP round trip (docs/xdp.md)
  xskping     echo | ping MAC: the raw AF_XDP frame round trip (xdpcompare)

flags:
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == "compare" {
		os.Exit(runCompare(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "spawn-compare" {
		os.Exit(spawnCompare(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "spawn-child" {
		runSpawnChild()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "xdpcompare" {
		os.Exit(runXDPCompare(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "xskping" {
		os.Exit(runXSKPing(os.Args[2:]))
	}
	var cfg config
	fs := pflag.NewFlagSet("mpibench", pflag.ContinueOnError)
	fs.BoolVar(&cfg.csv, "csv", false, "print CSV (bench,device,np,size,value,unit) instead of a table")
	fs.BoolVar(&cfg.header, "header", true, "with --csv, print the header row")
	fs.IntVar(&cfg.minSize, "min-size", 0, "smallest message size in bytes")
	fs.IntVar(&cfg.maxSize, "max-size", 8<<20, "largest message size in bytes")
	fs.IntVar(&cfg.iters, "iters", 0, "timed iterations per size (0 = auto, enough for --min-time)")
	fs.IntVar(&cfg.window, "window", 64, "bw: sends in flight per window")
	fs.IntVar(&cfg.reps, "reps", 3, "timed repetitions per size; the best is reported")
	fs.DurationVar(&cfg.minTime, "min-time", 50*time.Millisecond, "with --iters 0, the least time one repetition takes")
	fs.IntVar(&cfg.msgs, "msgs", 1000, "anysource: messages of 8 B per sender")
	fs.IntVar(&cfg.senders, "senders", 0, "anysource: only this many senders (0 = every k from 1 to np-1); the np column is k+1")
	fs.BoolVar(&cfg.checkBuf, "check", true, "verify the received data once per size")
	fs.BoolVar(&cfg.dist, "dist", false, "pingpong: also time every iteration of one more repetition and print the one-way latency's mean, median, 90th and 99th percentiles (rows pingpong_mean, _p50, _p90, _p99): a loaded machine makes latency bimodal, which the best repetition hides")
	fs.BoolVar(&cfg.touch, "touch", false, "bw, virtus: the sender writes every cache line of a message's data before sending it and the receiver reads every line after receiving it, as a program producing and consuming its data does; one message per window (rows bw_touch, virtus_touch_*)")
	fs.IntVar(&cfg.allreduceLarge, "allreduce-large", 8<<20, "coll: bytes of the large Allreduce (a multiple of 8)")
	fs.BoolVar(&cfg.winCreate, "win-create", false, "rma: windows of the program's memory (WinCreate; rows rma_create_*) rather than WinAllocate")
	fs.StringVar(&cfg.comm, "comm", "world", "coll: the communicator the collectives run on: world, or dup (a Dup of the world)")
	fs.BoolVar(&cfg.dmcsThread, "dmcs-thread", false, "dmcs: rank 1 serves with the poll thread (rows dmcs_thread_*) rather than Poll")
	fs.DurationVar(&cfg.dmcsSpin, "dmcs-spin", 0, "dmcs: how long a waiting process polls before it sleeps (dmcs.Options.Spin; 0: DMCS's default)")
	fs.IntVar(&cfg.spawnChildren, "spawn-children", 0, "spawn: only this many children (0: 1, 4 and 16)")
	fs.BoolVar(&cfg.phases, "phases", false, "rate: also time the phases of every window of one more repetition and print each rank's medians in ns per window: starting the Irecvs and Isends, their Waitall, the acknowledgement (rows rate_PATTERN_start_rR, _waitall_rR, _ack_rR)")
	fs.StringVar(&cfg.pattern, "pattern", "pairs", "rate: pairs (rank i sends to i+np/2), fanin (every rank to rank 0) or ring (rank i to i+1)")
	addVirtusFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(os.Stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	args := fs.Args()
	if len(args) == 0 {
		fs.Usage()
		os.Exit(2)
	}
	if cfg.reps < 1 || cfg.window < 1 || cfg.msgs < 1 || cfg.minSize < 0 || cfg.maxSize < cfg.minSize {
		fmt.Fprintln(os.Stderr, "mpibench: need --reps, --window, --msgs ≥ 1 and 0 ≤ --min-size ≤ --max-size")
		os.Exit(2)
	}
	if cfg.allreduceLarge < 8 || cfg.allreduceLarge%8 != 0 {
		fmt.Fprintln(os.Stderr, "mpibench: --allreduce-large must be a positive multiple of 8")
		os.Exit(2)
	}
	switch args[0] {
	case "summarize":
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, "usage: mpibench summarize results.csv")
			os.Exit(2)
		}
		if err := summarize(os.Stdout, args[1]); err != nil {
			fmt.Fprintln(os.Stderr, "mpibench summarize:", err)
			os.Exit(1)
		}
	case "coll":
		runColl(&cfg, false)
	case "bcast":
		runColl(&cfg, true)
	case "summarize-coll":
		runSummarizeColl(args[1:])
	case "overlap":
		runOverlap(&cfg, args[1:])
	case "summarize-overlap":
		runSummarizeOverlap(args[1:])
	case "raw":
		runRaw(&cfg, args[1:])
	case "memcpy":
		printRows(os.Stdout, &cfg, memcpyBench(&cfg))
	case "pingpong", "bw", "anysource", "virtus", "rma", "rate":
		runMPI(&cfg, args[0])
	case "dmcs":
		runDMCS(&cfg, cfg.dmcsThread)
	case "spawn":
		runSpawn(&cfg)
	default:
		fmt.Fprintf(os.Stderr, "mpibench: unknown subcommand %q\n", args[0])
		fs.Usage()
		os.Exit(2)
	}
}

// runMPI starts MPI, runs one of the MPI subcommands and prints on rank 0.
func runMPI(cfg *config, name string) {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		os.Exit(1)
	}
	world := mpi.World()
	if world.Size() < 2 {
		fail("%s needs at least 2 ranks (run it under mpirun -np 2)", name)
	}
	var rows []row
	switch name {
	case "pingpong":
		rows = pingpong(cfg, world)
	case "bw":
		rows = bandwidth(cfg, world)
	case "anysource":
		rows = anysource(cfg, world)
	case "virtus":
		rows = virtus(cfg, world)
	case "rma":
		rows = rmaBench(cfg, world)
	case "rate":
		rows = rateBench(cfg, world, ratePattern(cfg.pattern))
	}
	if world.Rank() == 0 {
		printRows(os.Stdout, cfg, rows)
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "mpibench:", err)
		os.Exit(1)
	}
}

// fail reports an error and aborts the whole job.
func fail(format string, a ...any) {
	rank := -1
	if w := mpi.World(); w != nil {
		rank = w.Rank()
	}
	fmt.Fprintf(os.Stderr, "mpibench rank %d: %s\n", rank, fmt.Sprintf(format, a...))
	if w := mpi.World(); w != nil {
		mpi.Abort(w, 1)
	}
	os.Exit(1)
}

// check aborts the job if err is not nil.
func check(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

// sizes lists 0 (if min is 0 and zero is allowed) and the powers of two from min to max.
func sizes(cfg *config, zero bool) []int {
	var out []int
	if zero && cfg.minSize == 0 {
		out = append(out, 0)
	}
	for n := 1; n <= cfg.maxSize; n *= 2 {
		if n >= cfg.minSize {
			out = append(out, n)
		}
	}
	return out
}

// autoIters is how many iterations of per seconds each fill minTime.
func autoIters(cfg *config, per float64) int {
	if cfg.iters > 0 {
		return cfg.iters
	}
	if per <= 0 {
		return 1 << 20
	}
	n := int(cfg.minTime.Seconds()/per) + 1
	return min(max(n, 1), 50_000_000)
}

// fill writes the pattern that size n's messages carry.
func fill(b []byte, n int) {
	for i := range b {
		b[i] = byte(i*7 + n + 1)
	}
}

// verify reports the first byte of b that differs from fill's pattern.
func verify(b []byte, n int) error {
	for i := range b {
		if want := byte(i*7 + n + 1); b[i] != want {
			return fmt.Errorf("size %d: byte %d is %#x, want %#x", n, i, b[i], want)
		}
	}
	return nil
}
