package main

// raw: each device's own transfer API between ranks 0 and 1, with no MPI
// above it, timed the way bw times MPI (a window of --window messages of
// one size from one buffer into one buffer, then a 4-byte acknowledgement,
// the best of --reps repetitions), so that the two tables set MPI's large
// messages against the mechanism they travel by (the DMPI comparison,
// docs/performance.md):
//
//	mpirun -np 2 mpibench raw netvm|fm|bip|via [--min-size 65536] [--max-size 8388608] [--csv]
//
// The rows are bench raw_bw, device "<device>-raw". What each device's raw
// transfer is: raw_netvm.go, raw_fm.go, raw_bip.go, raw_via.go.

import (
	"fmt"
	"math"
	"os"
	"time"
)

// rawLink is one device's raw transfer between ranks 0 and 1.
type rawLink interface {
	// rank is this process's rank.
	rank() int
	// windows moves count windows of w messages of buf (rank 0 sends,
	// rank 1 receives into buf), each window acknowledged by rank 1.
	windows(buf []byte, w, count int) error
	// share gives rank 1 rank 0's v (rank 1's argument is ignored).
	share(v int) (int, error)
	close() error
}

// rawOpeners open each device's raw link.
var rawOpeners = map[string]func(maxSize int) (rawLink, error){
	"netvm": openRawNetvm,
	"fm":    openRawFM,
	"bip":   openRawBIP,
	"via":   openRawVIA,
}

// runRaw is "mpibench raw DEVICE".
func runRaw(cfg *config, args []string) {
	if len(args) != 1 || rawOpeners[args[0]] == nil {
		fmt.Fprintln(os.Stderr, "usage: mpirun -np 2 mpibench raw netvm|fm|bip|via [flags]")
		os.Exit(2)
	}
	dev := args[0]
	if cfg.minSize == 0 {
		cfg.minSize = 64 << 10
	}
	l, err := rawOpeners[dev](cfg.maxSize)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mpibench raw %s: %v\n", dev, err)
		os.Exit(1)
	}
	var rows []row
	for _, n := range sizes(cfg, false) {
		buf := make([]byte, n)
		if l.rank() == 0 {
			fill(buf, n)
		}
		// Timed as bw: warm-up windows, then repetitions of enough windows
		// for --min-time each (rank 0's count, shared), the best kept.
		fail := func(err error) {
			fmt.Fprintf(os.Stderr, "mpibench raw %s: %d bytes: %v\n", dev, n, err)
			os.Exit(1)
		}
		warm := bwWarmup(n)
		if err := l.windows(buf, cfg.window, 1); err != nil {
			fail(err)
		}
		t0 := time.Now()
		if err := l.windows(buf, cfg.window, warm-1); err != nil {
			fail(err)
		}
		count, err := l.share(autoIters(cfg, time.Since(t0).Seconds()/float64(warm-1)))
		if err != nil {
			fail(err)
		}
		best := math.Inf(1)
		for r := 0; r < cfg.reps; r++ {
			t0 := time.Now()
			if err := l.windows(buf, cfg.window, count); err != nil {
				fail(err)
			}
			best = min(best, time.Since(t0).Seconds())
		}
		if l.rank() == 1 && cfg.checkBuf {
			if err := verify(buf, n); err != nil {
				fmt.Fprintf(os.Stderr, "mpibench raw %s: rank 1 got wrong data at %d bytes: %v\n", dev, n, err)
				os.Exit(1)
			}
		}
		rows = append(rows, row{"raw_bw", dev + "-raw", 2, n, float64(n) * float64(cfg.window*count) / best / 1e6, "MB/s"})
	}
	if l.rank() == 0 {
		printRows(os.Stdout, cfg, rows)
	}
	if err := l.close(); err != nil {
		fmt.Fprintf(os.Stderr, "mpibench raw %s: %v\n", dev, err)
		os.Exit(1)
	}
}
