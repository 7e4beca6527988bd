package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// row is one measurement: a CSV line bench,device,np,size,value,unit.
type row struct {
	bench  string
	device string
	np     int
	size   int
	value  float64
	unit   string
}

// csvHeader is the first line of the CSV output.
const csvHeader = "bench,device,np,size,value,unit"

// formatValue prints a value with enough digits for µs and MB/s alike.
func formatValue(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
}

// printRows writes rows as CSV or as an aligned table.
func printRows(w io.Writer, cfg *config, rows []row) {
	if cfg.csv {
		if cfg.header {
			fmt.Fprintln(w, csvHeader)
		}
		for _, r := range rows {
			fmt.Fprintf(w, "%s,%s,%d,%d,%s,%s\n", r.bench, r.device, r.np, r.size, formatValue(r.value), r.unit)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "bench\tdevice\tnp\tsize\tvalue\tunit\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t\n", r.bench, r.device, r.np, humanSize(r.size), formatValue(r.value), r.unit)
	}
	tw.Flush()
}

// humanSize prints a byte count as B, KiB or MiB when it is a whole multiple.
func humanSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d B", n)
	}
}
