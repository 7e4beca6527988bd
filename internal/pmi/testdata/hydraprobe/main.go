// Command hydraprobe exercises the pmi client under a real launcher: each
// rank puts a value, enters the barrier, reads every rank's value and
// prints one line summarising what it saw.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/adimpi/adimpi/internal/pmi"
)

func main() {
	c, err := pmi.Connect()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hydraprobe:", err)
		os.Exit(1)
	}
	check := func(err error) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "hydraprobe rank %d: %v\n", c.Rank(), err)
			os.Exit(1)
		}
	}
	check(c.Put(fmt.Sprintf("probe-%d", c.Rank()), fmt.Sprintf("v%d:%s", c.Rank(), strings.Repeat("x", c.Rank()+1))))
	check(c.Barrier())
	vals := make([]string, c.Size())
	for r := range vals {
		v, err := c.Get(fmt.Sprintf("probe-%d", r))
		check(err)
		vals[r] = v
	}
	_, err = c.Get("no-such-key")
	missing := err != nil
	check(c.Barrier())
	fmt.Printf("hydraprobe rank=%d size=%d singleton=%t kvsname_set=%t missing_key_error=%t values=%s\n",
		c.Rank(), c.Size(), c.Singleton(), c.KVSName() != "", missing, strings.Join(vals, ","))
	check(c.Finalize())
}
