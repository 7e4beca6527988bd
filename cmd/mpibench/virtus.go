package main

import (
	"math"

	"github.com/spf13/pflag"

	"github.com/adimpi/adimpi/datatype"
	"github.com/adimpi/adimpi/mpi"
)

// virtusConfig holds the flags of the virtus subcommand.
type virtusConfig struct {
	total    int // data bytes per message
	blockMin int // smallest block, bytes
	blockMax int // largest block, bytes
}

var vcfg = virtusConfig{total: 1 << 20, blockMin: 128, blockMax: 8 << 10}

// addVirtusFlags registers the virtus flags on fs.
func addVirtusFlags(fs *pflag.FlagSet) {
	fs.IntVar(&vcfg.total, "total", vcfg.total, "virtus: data bytes per message (a multiple of every block size)")
	fs.IntVar(&vcfg.blockMin, "block-min", vcfg.blockMin, "virtus: smallest block size in bytes")
	fs.IntVar(&vcfg.blockMax, "block-max", vcfg.blockMax, "virtus: largest block size in bytes")
}

// tagVirtus tags virtus payloads (acks use tagAck).
const tagVirtus = 7

// virtus is the test of "MPI Derived Data Types Support in VIRTUS": streaming bandwidth, as bw measures
// it (windows of --window Isends from rank 0, Irecvs on rank 1, a 4-byte ack
// per window), of a 2-D strided array — total/block blocks of block bytes,
// one every 2×block bytes, described on both sides by
// Vector(total/block, block, 2×block, Byte) — against the same number of
// bytes sent contiguously. For every block size (powers of two from
// --block-min to --block-max) it prints virtus_strided and virtus_contig (MB/s
// of data, gaps not counted) and virtus_ratio (strided/contiguous); the size
// column is the block size. The strided and contiguous repetitions alternate,
// so that both see the same machine.
func virtus(cfg *config, c *mpi.Comm) []row {
	rank := c.Rank()
	if rank > 1 {
		return nil
	}
	if vcfg.blockMin < 1 || vcfg.blockMax < vcfg.blockMin || vcfg.total < vcfg.blockMax {
		fail("virtus: need 1 ≤ --block-min ≤ --block-max ≤ --total")
	}
	var rows []row
	reqs := make([]*mpi.Request, cfg.window)
	ack := make([]byte, 4)
	total := vcfg.total
	contig := make([]byte, total)
	for block := vcfg.blockMin; block <= vcfg.blockMax; block *= 2 {
		if total%block != 0 {
			fail("virtus: --total %d is not a multiple of the block size %d", total, block)
		}
		nblocks := total / block
		vt, err := datatype.Vector(nblocks, block, 2*block, datatype.Byte)
		check(err, "virtus: MPI_Type_vector")
		check(vt.Commit(), "virtus: MPI_Type_commit")
		strided := make([]byte, vt.Span(1))
		sbuf, cbuf := mpi.Typed(strided, 1, vt), mpi.Typed(contig, total, datatype.Byte)
		if rank == 0 {
			fill(strided, block)
			fill(contig, block)
		} else {
			clear(strided)
			clear(contig)
		}
		windows := func(b mpi.Buffer, count int) {
			for i := 0; i < count; i++ {
				var err error
				if rank == 0 {
					for w := range reqs {
						reqs[w], err = mpi.IsendBuf(c, b, 1, tagVirtus)
						check(err, "virtus isend")
					}
					_, err = mpi.Waitall(reqs)
					check(err, "virtus waitall")
					_, err = mpi.Recv(c, ack, 1, tagAck)
					check(err, "virtus ack recv")
				} else {
					for w := range reqs {
						reqs[w], err = mpi.IrecvBuf(c, b, 0, tagVirtus)
						check(err, "virtus irecv")
					}
					sts, err := mpi.Waitall(reqs)
					check(err, "virtus waitall")
					for _, st := range sts {
						if st.Bytes() != total {
							fail("virtus: message of %d bytes (block %d) brought %d bytes", total, block, st.Bytes())
						}
					}
					check(mpi.Send(c, ack, 0, tagAck), "virtus ack send")
				}
			}
		}
		runS, runC := func(n int) { windows(sbuf, n) }, func(n int) { windows(cbuf, n) }
		prefix, perMsg := "virtus_", cfg.window
		if cfg.touch {
			// One message per window: a send buffer may not change while in flight.
			wantS, wantC := patternSum(len(strided), block, 2*block, block), patternSum(total, total, total, block)
			runS = func(n int) { touchLoop(c, sbuf, strided, block, 2*block, block, wantS, n, tagVirtus) }
			runC = func(n int) { touchLoop(c, cbuf, contig, total, total, block, wantC, n, tagVirtus) }
			prefix, perMsg = "virtus_touch_", 1
		}
		warm := bwWarmup(total)
		runS(1)
		runC(1)
		if rank == 1 && cfg.checkBuf {
			virtusVerify(strided, block)
			check(verify(contig, block), "virtus: rank 1 got wrong contiguous data")
		}
		t0 := mpi.Wtime()
		runS(warm - 1)
		itersS := shareIters(cfg, c, (mpi.Wtime()-t0)/float64(warm-1))
		t0 = mpi.Wtime()
		runC(warm - 1)
		itersC := shareIters(cfg, c, (mpi.Wtime()-t0)/float64(warm-1))
		bestS, bestC := math.Inf(1), math.Inf(1)
		for r := 0; r < cfg.reps; r++ {
			t0 := mpi.Wtime()
			runS(itersS)
			bestS = min(bestS, mpi.Wtime()-t0)
			t0 = mpi.Wtime()
			runC(itersC)
			bestC = min(bestC, mpi.Wtime()-t0)
		}
		check(vt.Free(), "virtus: MPI_Type_free")
		perWindow := float64(total) * float64(perMsg)
		s := perWindow * float64(itersS) / bestS / 1e6
		k := perWindow * float64(itersC) / bestC / 1e6
		dev := mpi.DeviceName()
		rows = append(rows,
			row{prefix + "strided", dev, c.Size(), block, s, "MB/s"},
			row{prefix + "contig", dev, c.Size(), block, k, "MB/s"},
			row{prefix + "ratio", dev, c.Size(), block, s / k, "x"})
	}
	return rows
}

// virtusVerify checks a received strided buffer: every data byte holds the
// sender's pattern (the sender filled its whole strided buffer), every gap
// byte is still zero.
func virtusVerify(b []byte, block int) {
	for i := range b {
		want := byte(0)
		if (i/block)%2 == 0 {
			want = byte(i*7 + block + 1)
		}
		if b[i] != want {
			fail("virtus: block size %d: received byte %d is %#x, want %#x (gap: %v)", block, i, b[i], want, want == 0 && (i/block)%2 == 1)
		}
	}
}
