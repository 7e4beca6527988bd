// Command rankprog is a test program for mpirun. It uses only the PMI
// client; its first argument selects a behaviour:
//
//	print N      print N lines to stdout, one to stderr, and a last partial line
//	fail-early C the last rank exits with status C at once; the others wait
//	             in a barrier (and exit 1 when it fails)
//	abort C      the last rank calls abort with code C and then blocks; the
//	             others wait in a barrier
//	hang         rank 0 ignores SIGTERM and blocks reading stdin; the others
//	             wait in a barrier that rank 0 never enters
//	ready        every rank prints "ready R" and then blocks in a barrier
//	             that rank 0 never enters (rank 0 blocks reading stdin)
//	stdin        every rank reads its stdin and reports what it got
//	nofinalize   exit 0 without finalizing
//	env          print the PMI, device and test environment and the working directory
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/adimpi/adimpi/internal/pmi"
)

func main() {
	c, err := pmi.Connect()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rankprog:", err)
		os.Exit(1)
	}
	rank, size := c.Rank(), c.Size()
	check := func(err error) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "rankprog rank %d: %v\n", rank, err)
			os.Exit(1)
		}
	}
	arg := func(i int) int {
		n, err := strconv.Atoi(os.Args[i])
		check(err)
		return n
	}
	last := rank == size-1
	switch os.Args[1] {
	case "print":
		n := arg(2)
		for i := 0; i < n; i++ {
			fmt.Printf("rank %d of %d line %d\n", rank, size, i)
		}
		fmt.Fprintf(os.Stderr, "rank %d stderr\n", rank)
		check(c.Barrier())
		fmt.Printf("rank %d partial", rank)
	case "fail-early":
		if last {
			os.Exit(arg(2))
		}
		check(c.Barrier())
	case "abort":
		if last {
			check(c.Abort(arg(2), "rankprog gave up"))
			blockForever()
		}
		check(c.Barrier())
	case "hang", "ready":
		if rank == 0 {
			if os.Args[1] == "hang" {
				signal.Ignore(syscall.SIGTERM)
			}
			fmt.Printf("ready %d\n", rank)
			io.Copy(io.Discard, os.Stdin)
			blockForever()
		}
		fmt.Printf("ready %d\n", rank)
		check(c.Barrier())
	case "stdin":
		data, err := io.ReadAll(os.Stdin)
		check(err)
		fmt.Printf("rank %d stdin %q\n", rank, strings.TrimSpace(string(data)))
		check(c.Barrier())
	case "nofinalize":
		os.Exit(0)
	case "env":
		for _, k := range []string{"PMI_FD", "PMI_RANK", "PMI_SIZE", "ADIMPI_APPNUM", "ADIMPI_DEVICE", "ADIMPI_DEVICE_OPT", "ADIMPI_ASYNC_PROGRESS", "MPIRUN_TEST_A", "MPIRUN_TEST_B", "GLIBC_TUNABLES"} {
			fmt.Printf("rank %d %s=%s\n", rank, k, os.Getenv(k))
		}
		wd, err := os.Getwd()
		check(err)
		fmt.Printf("rank %d cwd=%s\n", rank, wd)
		fmt.Printf("rank %d args=%q\n", rank, os.Args[2:])
	default:
		check(fmt.Errorf("unknown mode %q", os.Args[1]))
	}
	check(c.Finalize())
}

// blockForever waits for a signal that never comes (SIGTERM, unless
// ignored, ends the process).
func blockForever() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	for {
		<-ch
	}
}
