package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSizes(t *testing.T) {
	cfg := &config{minSize: 0, maxSize: 16}
	if got, want := sizes(cfg, true), []int{0, 1, 2, 4, 8, 16}; !slices.Equal(got, want) {
		t.Errorf("sizes with zero = %v, want %v", got, want)
	}
	if got, want := sizes(cfg, false), []int{1, 2, 4, 8, 16}; !slices.Equal(got, want) {
		t.Errorf("sizes without zero = %v, want %v", got, want)
	}
	cfg.minSize = 3
	if got, want := sizes(cfg, true), []int{4, 8, 16}; !slices.Equal(got, want) {
		t.Errorf("sizes from 3 = %v, want %v", got, want)
	}
}

func TestFillVerify(t *testing.T) {
	b := make([]byte, 1000)
	fill(b, len(b))
	if err := verify(b, len(b)); err != nil {
		t.Fatal(err)
	}
	b[500]++
	if err := verify(b, len(b)); err == nil {
		t.Fatal("verify missed a changed byte")
	}
}

func TestPrintRowsCSV(t *testing.T) {
	var buf bytes.Buffer
	printRows(&buf, &config{csv: true, header: true}, []row{{"bw", "netvm", 2, 4096, 1234.56, "MB/s"}, {"pingpong", "netvm", 2, 8, 0.61234, "us"}})
	want := csvHeader + "\nbw,netvm,2,4096,1234.6,MB/s\npingpong,netvm,2,8,0.6123,us\n"
	if buf.String() != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestSummarize(t *testing.T) {
	csv := csvHeader + `
pingpong,netvm,2,8,0.6,us
pingpong,mpich,2,8,0.3,us
bw,netvm,2,4194304,10000,MB/s
bw,openmpi,2,4194304,5000,MB/s
memcpy,go,1,4194304,20000,MB/s
anysource_any,netvm,4,8,1.5,us
anysource_specific,netvm,4,8,1.0,us
virtus_strided,netvm,2,128,3000,MB/s
virtus_contig,netvm,2,128,12000,MB/s
virtus_ratio,netvm,2,128,0.25,x
virtus_strided,mpich,2,128,1000,MB/s
virtus_contig,mpich,2,128,10000,MB/s
virtus_strided,openmpi,2,8192,2000,MB/s
virtus_touch_strided,netvm,2,1024,9000,MB/s
virtus_touch_contig,netvm,2,1024,6000,MB/s
virtus_touch_ratio,netvm,2,1024,1.5,x
virtus_touch_strided,mpich,2,1024,4000,MB/s
virtus_touch_contig,mpich,2,1024,5000,MB/s
bw_touch,netvm,2,1048576,11000,MB/s
bw_touch,mpich,2,1048576,7000,MB/s
` + csvHeader + "\n" // a second header, as concatenated files have
	path := filepath.Join(t.TempDir(), "results.csv")
	if err := os.WriteFile(path, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := summarize(&out, path); err != nil {
		t.Fatal(err)
	}
	// Compare with runs of spaces collapsed: tabwriter pads to the widest cell.
	s := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"latency 8 B (us) 0.6000 0.3000 n/a 2.00 n/a",
		"bandwidth 4 MiB (MB/s) 10000.0 n/a 5000.0 n/a 2.00",
		"netvm 4 1.500 1.000 1.50",
		"reused 4 MiB buffers (MB/s) 10000.0 20000.0 0.50",
		"128 B 0.25 0.10 n/a 3000.0 12000.0 1000.0 10000.0 n/a n/a",
		"8 KiB n/a n/a n/a n/a n/a n/a n/a 2000.0 n/a",
		"(--touch, one message per window)",
		"1 KiB 1.50 0.80 n/a 9000.0 6000.0 4000.0 5000.0 n/a n/a",
		"1 MiB 11000.0 7000.0 n/a 1.57",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}
