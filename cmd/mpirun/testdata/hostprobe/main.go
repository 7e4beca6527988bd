// Command hostprobe is a test program for mpirun across hosts. It uses only
// the PMI client: each rank puts its hostname, enters the barrier, reads
// every rank's hostname and prints one line
//
//	rank R host H pid P secret S hosts H0,H1,...
//
// (P its process ID on its host, S the job secret it got). With the
// argument "block" the last rank then sleeps and the others wait in a
// barrier it never enters.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/adimpi/adimpi/internal/pmi"
)

func main() {
	c, err := pmi.Connect()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostprobe:", err)
		os.Exit(1)
	}
	check := func(err error) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "hostprobe rank %d: %v\n", c.Rank(), err)
			os.Exit(1)
		}
	}
	host, err := os.Hostname()
	check(err)
	check(c.Put(fmt.Sprintf("host-%d", c.Rank()), host))
	check(c.Barrier())
	hosts := make([]string, c.Size())
	for r := range hosts {
		hosts[r], err = c.Get(fmt.Sprintf("host-%d", r))
		check(err)
	}
	fmt.Printf("rank %d host %s pid %d secret %s hosts %s\n", c.Rank(), host, os.Getpid(),
		os.Getenv("ADIMPI_JOB_SECRET"), strings.Join(hosts, ","))
	if len(os.Args) > 1 && os.Args[1] == "block" {
		if c.Rank() == c.Size()-1 {
			time.Sleep(time.Hour)
		}
		check(c.Barrier())
	}
	check(c.Finalize())
}
