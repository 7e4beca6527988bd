/*
 * mpibench.c: the patterns of cmd/mpibench written in C against a system
 * MPI, so that adimpi's netvm device can be compared with MPICH and Open MPI
 * on the same machine, in the same run, with the same method.
 *
 *   mpiexec -n 2 ./mpibench-mpich pingpong [flags]   one-way latency (round trip / 2)
 *   mpiexec -n 2 ./mpibench-mpich bw [flags]         osu_bw-style streaming bandwidth
 *   mpiexec -n N ./mpibench-mpich anysource [flags]  MPI_ANY_SOURCE vs. specific-source receives
 *   mpiexec -n 2 ./mpibench-mpich virtus [flags]     VIRTUS: strided (MPI_Type_vector) vs. contiguous bw
 *   mpiexec -n N ./mpibench-mpich rma [flags]        one-sided: put/get latency and bw, accumulate and fetch-and-op rates
 *
 * Flags (as in cmd/mpibench): --min-size N, --max-size N, --iters N (0 = auto),
 * --window N, --reps N, --min-time SECONDS, --msgs N, --senders K,
 * --total N, --block-min N, --block-max N, --touch, --no-header. Rank 0 prints CSV: bench,device,np,size,value,unit, where
 * device is "mpich" or "openmpi" (from the MPI header the program was built
 * with).
 *
 * Build: mpicc.mpich -O2 -o mpibench-mpich mpibench.c
 *        mpicc.openmpi -O2 -o mpibench-openmpi mpibench.c
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { TAG_PING = 1, TAG_CTL = 2, TAG_BW = 3, TAG_ACK = 4, TAG_DATA = 5, TAG_GO = 6, TAG_VIRTUS = 7 };

struct config {
    long min_size, max_size;
    long iters, window, reps, msgs, senders;
    double min_time;
    int header;
    int touch; /* bw, virtus: produce and consume every message, one per window (cmd/mpibench/touch.go) */
    long total, block_min, block_max; /* virtus */
};

static struct config cfg = {0, 8L << 20, 0, 64, 3, 1000, 0, 0.05, 1, 0, 1L << 20, 128, 8L << 10};
static int rank, nprocs;

static void fail(const char *what) { die("mpibench", rank, what); }

#define row csv_row

static void fill(unsigned char *b, long n)
{
    for (long i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 7 + n + 1);
}

static void verify(const unsigned char *b, long n, const char *what)
{
    for (long i = 0; i < n; i++)
        if (b[i] != (unsigned char)(i * 7 + n + 1))
            fail(what);
}

/* produce, consume, pattern_sum, touch_loop: --touch, as in cmd/mpibench/touch.go.
 * produce stores fill's pattern for size n into the first byte of every cache
 * line of the data (blocks of block bytes, one every stride bytes, in size bytes). */
static void produce(unsigned char *b, long size, long block, long stride, long n)
{
    for (long o = 0; o < size; o += stride)
        for (long k = o; k < o + block && k < size; k += 64)
            b[k] = (unsigned char)(k * 7 + n + 1);
}

/* consume sums the first byte of every cache line of the data. */
static uint64_t consume(const unsigned char *b, long size, long block, long stride)
{
    uint64_t sum = 0;
    for (long o = 0; o < size; o += stride)
        for (long k = o; k < o + block && k < size; k += 64)
            sum += b[k];
    return sum;
}

/* pattern_sum is what consume returns for data holding fill's pattern for size n. */
static uint64_t pattern_sum(long size, long block, long stride, long n)
{
    uint64_t sum = 0;
    for (long o = 0; o < size; o += stride)
        for (long k = o; k < o + block && k < size; k += 64)
            sum += (unsigned char)(k * 7 + n + 1);
    return sum;
}

/* touch_loop: count produce-send-receive-consume rounds of one message
 * (mem, count, type), each acknowledged with 4 bytes; the receiver checks
 * every message's line sum. */
static void touch_loop(unsigned char *mem, int count, MPI_Datatype type, long size, long block, long stride, long n,
                       long rounds, int tag)
{
    char ack[4] = {0};
    uint64_t want = pattern_sum(size, block, stride, n);
    for (long i = 0; i < rounds; i++) {
        if (rank == 0) {
            produce(mem, size, block, stride, n);
            MPI_Send(mem, count, type, 1, tag, MPI_COMM_WORLD);
            MPI_Recv(ack, 4, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(mem, count, type, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (consume(mem, size, block, stride) != want)
                fail("touch: a received message's line sum is wrong");
            MPI_Send(ack, 4, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
        }
    }
}

/* auto_iters: iterations of per seconds that fill min_time. */
static long auto_iters(double per)
{
    if (cfg.iters > 0)
        return cfg.iters;
    if (per <= 0)
        return 1L << 20;
    long n = (long)(cfg.min_time / per) + 1;
    if (n < 1)
        n = 1;
    if (n > 50000000)
        n = 50000000;
    return n;
}

/* share_iters: rank 0 picks the count and sends it to rank 1. */
static long share_iters(double per)
{
    int64_t v = 0;
    if (rank == 0) {
        v = auto_iters(per);
        MPI_Send(&v, 1, MPI_INT64_T, 1, TAG_CTL, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&v, 1, MPI_INT64_T, 0, TAG_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    return (long)v;
}

static int ping_warmup(long n)
{
    return n <= 8 << 10 ? 1000 : n <= 64 << 10 ? 200 : n <= 1 << 20 ? 20 : 4;
}

static int bw_warmup(long n)
{
    return n <= 64 << 10 ? 20 : n <= 1 << 20 ? 4 : 2;
}

static void ping_rounds(unsigned char *sbuf, unsigned char *rbuf, long n, long iters)
{
    for (long i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(sbuf, (int)n, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)n, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, (int)n, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, (int)n, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD);
        }
    }
}

/* Ranks 0 and 1 exchange untimed one-byte round trips for 30 ms before the
   first size, as cmd/mpibench does: a process's first milliseconds pay for
   its start, which would otherwise land on the smallest size alone. The byte
   says whether another round trip follows. */
static void job_warmup(void)
{
    unsigned char b = 1;
    if (rank == 0) {
        double t0 = MPI_Wtime();
        while (b == 1) {
            if (MPI_Wtime() - t0 >= 0.03)
                b = 0;
            MPI_Send(&b, 1, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(&b, 1, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        return;
    }
    while (b == 1) {
        MPI_Recv(&b, 1, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&b, 1, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD);
    }
}

static void pingpong(void)
{
    if (rank > 1)
        return;
    job_warmup();
    for (long n = 0; n <= cfg.max_size; n = n ? 2 * n : 1) {
        if (n < cfg.min_size)
            continue;
        unsigned char *sbuf = malloc(n ? n : 1), *rbuf = calloc(n ? n : 1, 1);
        if (!sbuf || !rbuf)
            fail("out of memory");
        fill(sbuf, n);
        /* check round: the pattern goes over and comes back whole */
        if (rank == 0) {
            MPI_Send(sbuf, (int)n, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)n, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            verify(rbuf, n, "pingpong: wrong data back on rank 0");
        } else {
            MPI_Recv(rbuf, (int)n, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            verify(rbuf, n, "pingpong: wrong data on rank 1");
            MPI_Send(rbuf, (int)n, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD);
        }
        int warm = ping_warmup(n);
        ping_rounds(sbuf, rbuf, n, 1);
        double t0 = MPI_Wtime();
        ping_rounds(sbuf, rbuf, n, warm - 1);
        long iters = share_iters((MPI_Wtime() - t0) / (warm - 1));
        double best = 1e300;
        for (long r = 0; r < cfg.reps; r++) {
            t0 = MPI_Wtime();
            ping_rounds(sbuf, rbuf, n, iters);
            double d = MPI_Wtime() - t0;
            if (d < best)
                best = d;
        }
        if (rank == 0)
            row("pingpong", nprocs, n, best / iters / 2 * 1e6, "us");
        free(sbuf);
        free(rbuf);
    }
}

static void bw_windows(unsigned char *buf, long n, MPI_Request *reqs, MPI_Status *sts, long count)
{
    char ack[4] = {0};
    if (cfg.touch) {
        touch_loop(buf, (int)n, MPI_BYTE, n, n, n, n, count, TAG_BW);
        return;
    }
    for (long i = 0; i < count; i++) {
        if (rank == 0) {
            for (long w = 0; w < cfg.window; w++)
                MPI_Isend(buf, (int)n, MPI_BYTE, 1, TAG_BW, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall((int)cfg.window, reqs, sts);
            MPI_Recv(ack, 4, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (long w = 0; w < cfg.window; w++)
                MPI_Irecv(buf, (int)n, MPI_BYTE, 0, TAG_BW, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall((int)cfg.window, reqs, sts);
            MPI_Send(ack, 4, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
        }
    }
}

static void bw(void)
{
    if (rank > 1)
        return;
    MPI_Request *reqs = malloc(cfg.window * sizeof *reqs);
    MPI_Status *sts = malloc(cfg.window * sizeof *sts);
    if (!reqs || !sts)
        fail("out of memory");
    for (long n = 1; n <= cfg.max_size; n *= 2) {
        if (n < cfg.min_size)
            continue;
        unsigned char *buf = calloc(n, 1);
        if (!buf)
            fail("out of memory");
        if (rank == 0)
            fill(buf, n);
        int warm = bw_warmup(n);
        bw_windows(buf, n, reqs, sts, 1);
        if (rank == 1)
            verify(buf, n, "bw: wrong data on rank 1");
        double t0 = MPI_Wtime();
        bw_windows(buf, n, reqs, sts, warm - 1);
        long iters = share_iters((MPI_Wtime() - t0) / (warm - 1));
        double best = 1e300;
        for (long r = 0; r < cfg.reps; r++) {
            t0 = MPI_Wtime();
            bw_windows(buf, n, reqs, sts, iters);
            double d = MPI_Wtime() - t0;
            if (d < best)
                best = d;
        }
        if (rank == 0)
            row(cfg.touch ? "bw_touch" : "bw", nprocs, n, (double)n * (cfg.touch ? 1 : cfg.window) * iters / best / 1e6,
                "MB/s");
        free(buf);
    }
    free(reqs);
    free(sts);
}

/* any_run: one round with k senders; rank 0 returns its time to receive all. */
static double any_run(int k, int use_any, int64_t *next)
{
    int64_t msg = 0, go = 1;
    if (rank != 0) {
        MPI_Recv(&go, 1, MPI_INT64_T, 0, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (long i = 0; i < cfg.msgs; i++) {
            msg = i;
            MPI_Send(&msg, 1, MPI_INT64_T, 0, TAG_DATA, MPI_COMM_WORLD);
        }
        return 0;
    }
    memset(next, 0, (k + 1) * sizeof *next);
    double t0 = MPI_Wtime();
    for (int s = 1; s <= k; s++)
        MPI_Send(&go, 1, MPI_INT64_T, s, TAG_GO, MPI_COMM_WORLD);
    if (use_any) {
        for (long j = 0; j < k * cfg.msgs; j++) {
            MPI_Status st;
            MPI_Recv(&msg, 1, MPI_INT64_T, MPI_ANY_SOURCE, TAG_DATA, MPI_COMM_WORLD, &st);
            if (st.MPI_SOURCE < 1 || st.MPI_SOURCE > k || msg != next[st.MPI_SOURCE])
                fail("anysource: ANY_SOURCE receive out of order or from a wrong rank");
            next[st.MPI_SOURCE]++;
        }
    } else {
        for (long i = 0; i < cfg.msgs; i++)
            for (int s = 1; s <= k; s++) {
                MPI_Recv(&msg, 1, MPI_INT64_T, s, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (msg != i)
                    fail("anysource: specific receive out of order");
            }
    }
    return MPI_Wtime() - t0;
}

static void anysource(void)
{
    int64_t *next = malloc(nprocs * sizeof *next);
    if (!next)
        fail("out of memory");
    int kmin = 1, kmax = nprocs - 1;
    if (cfg.senders > 0) {
        if (cfg.senders > nprocs - 1)
            fail("anysource: --senders needs more ranks");
        kmin = kmax = (int)cfg.senders;
    }
    for (int k = kmin; k <= kmax; k++) {
        if (rank > k)
            continue;
        any_run(k, 1, next);
        any_run(k, 0, next);
        double best_any = 1e300, best_spec = 1e300;
        for (long r = 0; r < cfg.reps; r++) {
            double a = any_run(k, 1, next), s = any_run(k, 0, next);
            if (a < best_any)
                best_any = a;
            if (s < best_spec)
                best_spec = s;
        }
        if (rank == 0) {
            double total = (double)k * cfg.msgs;
            double a = best_any / total * 1e6, s = best_spec / total * 1e6;
            row("anysource_any", k + 1, 8, a, "us");
            row("anysource_specific", k + 1, 8, s, "us");
            row("anysource_ratio", k + 1, 8, a / s, "x");
        }
    }
    free(next);
}

/* virtus_windows: bw's windows of count messages of (buf, count, type), or
 * with --touch touch_loop's rounds; the data lie in blocks of block bytes, one
 * every stride bytes (fill's pattern for size pat). */
static void virtus_windows(void *buf, int count, MPI_Datatype type, long total, MPI_Request *reqs, MPI_Status *sts,
                           long windows, long block, long stride, long pat)
{
    char ack[4] = {0};
    if (cfg.touch) {
        touch_loop(buf, count, type, stride == block ? total : 2 * total - block, block, stride, pat, windows, TAG_VIRTUS);
        return;
    }
    for (long i = 0; i < windows; i++) {
        if (rank == 0) {
            for (long w = 0; w < cfg.window; w++)
                MPI_Isend(buf, count, type, 1, TAG_VIRTUS, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall((int)cfg.window, reqs, sts);
            MPI_Recv(ack, 4, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (long w = 0; w < cfg.window; w++)
                MPI_Irecv(buf, count, type, 0, TAG_VIRTUS, MPI_COMM_WORLD, &reqs[w]);
            MPI_Waitall((int)cfg.window, reqs, sts);
            for (long w = 0; w < cfg.window; w++) {
                int n = 0;
                MPI_Get_count(&sts[w], MPI_BYTE, &n);
                if (n != total)
                    fail("virtus: a message brought the wrong number of bytes");
            }
            MPI_Send(ack, 4, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
        }
    }
}

/*
 * virtus: the VIRTUS test. Streaming bandwidth (as bw) of a 2-D strided
 * array, total/block blocks of block bytes one every 2*block bytes, described
 * on both sides by MPI_Type_vector(total/block, block, 2*block, MPI_BYTE),
 * against the same bytes sent contiguously; the strided and contiguous
 * repetitions alternate. Rows virtus_strided, virtus_contig (MB/s of data) and
 * virtus_ratio (strided/contiguous), the size column being the block size.
 */
static void virtus(void)
{
    if (rank > 1)
        return;
    long total = cfg.total;
    if (cfg.block_min < 1 || cfg.block_max < cfg.block_min || total < cfg.block_max)
        fail("virtus: need 1 <= --block-min <= --block-max <= --total");
    MPI_Request *reqs = malloc(cfg.window * sizeof *reqs);
    MPI_Status *sts = malloc(cfg.window * sizeof *sts);
    unsigned char *contig = calloc(total, 1), *strided = calloc(2 * total, 1);
    if (!reqs || !sts || !contig || !strided)
        fail("out of memory");
    for (long block = cfg.block_min; block <= cfg.block_max; block *= 2) {
        if (total % block)
            fail("virtus: --total is not a multiple of a block size");
        long nblocks = total / block, span = (2 * nblocks - 1) * block;
        MPI_Datatype vt;
        MPI_Type_vector((int)nblocks, (int)block, (int)(2 * block), MPI_BYTE, &vt);
        MPI_Type_commit(&vt);
        if (rank == 0) {
            /* the pattern of Go's fill(b, block), as cmd/mpibench's virtus uses */
            for (long i = 0; i < span; i++)
                strided[i] = (unsigned char)(i * 7 + block + 1);
            for (long i = 0; i < total; i++)
                contig[i] = (unsigned char)(i * 7 + block + 1);
        } else {
            memset(strided, 0, span);
            memset(contig, 0, total);
        }
        int warm = bw_warmup(total);
        virtus_windows(strided, 1, vt, total, reqs, sts, 1, block, 2 * block, block);
        virtus_windows(contig, (int)total, MPI_BYTE, total, reqs, sts, 1, total, total, block);
        if (rank == 1) {
            for (long i = 0; i < span; i++) {
                unsigned char want = (i / block) % 2 ? 0 : (unsigned char)(i * 7 + block + 1);
                if (strided[i] != want)
                    fail("virtus: wrong strided data on rank 1");
            }
            for (long i = 0; i < total; i++)
                if (contig[i] != (unsigned char)(i * 7 + block + 1))
                    fail("virtus: wrong contiguous data on rank 1");
        }
        double t0 = MPI_Wtime();
        virtus_windows(strided, 1, vt, total, reqs, sts, warm - 1, block, 2 * block, block);
        long iters_s = share_iters((MPI_Wtime() - t0) / (warm - 1));
        t0 = MPI_Wtime();
        virtus_windows(contig, (int)total, MPI_BYTE, total, reqs, sts, warm - 1, total, total, block);
        long iters_c = share_iters((MPI_Wtime() - t0) / (warm - 1));
        double best_s = 1e300, best_c = 1e300;
        for (long r = 0; r < cfg.reps; r++) {
            t0 = MPI_Wtime();
            virtus_windows(strided, 1, vt, total, reqs, sts, iters_s, block, 2 * block, block);
            double d = MPI_Wtime() - t0;
            if (d < best_s)
                best_s = d;
            t0 = MPI_Wtime();
            virtus_windows(contig, (int)total, MPI_BYTE, total, reqs, sts, iters_c, total, total, block);
            d = MPI_Wtime() - t0;
            if (d < best_c)
                best_c = d;
        }
        MPI_Type_free(&vt);
        if (rank == 0) {
            double per_window = (double)total * (cfg.touch ? 1 : cfg.window);
            double s = per_window * iters_s / best_s / 1e6, c = per_window * iters_c / best_c / 1e6;
            row(cfg.touch ? "virtus_touch_strided" : "virtus_strided", nprocs, block, s, "MB/s");
            row(cfg.touch ? "virtus_touch_contig" : "virtus_contig", nprocs, block, c, "MB/s");
            row(cfg.touch ? "virtus_touch_ratio" : "virtus_ratio", nprocs, block, s / c, "x");
        }
    }
    free(reqs);
    free(sts);
    free(contig);
    free(strided);
}

/* rma: one-sided communication, as cmd/mpibench/rma.go. Rank 0 accesses
 * rank 1's window in a passive-target epoch (rank 1 waits in a barrier):
 * rma_put_lat/rma_get_lat (µs per Put/Get + Flush, up to 64 KiB),
 * rma_put_bw/rma_get_bw (MB/s of --window operations per Flush, from 4 KiB),
 * rma_acc_rate (Mops/s of 8-byte Accumulates, --window per Flush); then
 * rma_fop_rate (Mops/s of MPI_Fetch_and_op on rank 0 by every rank),
 * rma_halo (µs per step of a fence-based halo exchange, 1 KiB to each ring
 * neighbour). The
 * window is MPI_Win_allocate's, or with --win-create MPI_Win_create's over
 * malloc'ed memory (rows rma_create_*). */
static MPI_Win rma_win;
static unsigned char *rma_buf;
static long rma_n;
static int rma_kind; /* 0 put, 1 get, 2 accumulate */
static long rma_batch;
static int rma_create; /* --win-create: MPI_Win_create over malloc'ed memory (rows rma_create_*) */

static void rma_rounds(long iters)
{
    int64_t one = 1;
    for (long i = 0; i < iters; i++) {
        for (long k = 0; k < rma_batch; k++) {
            if (rma_kind == 0)
                MPI_Put(rma_buf, (int)rma_n, MPI_BYTE, 1, 0, (int)rma_n, MPI_BYTE, rma_win);
            else if (rma_kind == 1)
                MPI_Get(rma_buf, (int)rma_n, MPI_BYTE, 1, 0, (int)rma_n, MPI_BYTE, rma_win);
            else
                MPI_Accumulate(&one, 1, MPI_INT64_T, 1, 0, 1, MPI_INT64_T, MPI_SUM, rma_win);
        }
        MPI_Win_flush(1, rma_win);
    }
}

static double rma_best(long iters);

/* rma_time: seconds per round, best of reps, after up to warm untimed
 * rounds: warming stops once it has taken min_time, since a round may take
 * milliseconds where the target's progress is slow (MPICH's passive target
 * on a loaded machine), and warm of those would outlast the run's limit. */
static double rma_time(long warm)
{
    double t0 = MPI_Wtime();
    long done = 0;
    while (done < warm) {
        rma_rounds(1);
        done++;
        if (MPI_Wtime() - t0 >= cfg.min_time)
            break;
    }
    long iters = auto_iters((MPI_Wtime() - t0) / (double)done);
    return rma_best(iters);
}

/* rma_best: the best over reps of seconds per round of iters rounds, each
 * run in chunks of iters/64 and cut short once it has taken 4 × min_time:
 * where rounds take 1 µs or 30 ms at the scheduler's whim, the count sized
 * from a fast warm-up would otherwise run for minutes. */
static double rma_best(long iters)
{
    long chunk = iters / 64 > 0 ? iters / 64 : 1;
    double best = 1e30;
    for (long r = 0; r < cfg.reps; r++) {
        double t0 = MPI_Wtime(), took = 0;
        long done = 0;
        while (done < iters) {
            long k = iters - done < chunk ? iters - done : chunk;
            rma_rounds(k);
            done += k;
            took = MPI_Wtime() - t0;
            if (cfg.iters == 0 && took >= 4 * cfg.min_time)
                break;
        }
        double per = took / (double)done;
        if (per < best)
            best = per;
    }
    return best;
}

static void rma(void)
{
    long max_n = cfg.max_size < 2048 ? 2048 : cfg.max_size;
    unsigned char *mem;
    if (rma_create) {
        mem = calloc(max_n, 1);
        MPI_Win_create(mem, max_n, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &rma_win);
    } else {
        MPI_Win_allocate(max_n, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &rma_win);
        memset(mem, 0, max_n);
    }
    const char *pre = rma_create ? "rma_create_" : "rma_";
    char name[64];
#define RMA_ROW(what, np, n, v, unit) (snprintf(name, sizeof name, "%s%s", pre, what), row(name, np, n, v, unit))
    if (rank == 0) {
        rma_buf = malloc(max_n);
        fill(rma_buf, max_n);
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, rma_win);
        for (long n = 8; n <= cfg.max_size; n *= 2) {
            if (n < cfg.min_size)
                continue;
            rma_n = n;
            if (n <= 64 << 10) {
                rma_batch = 1;
                rma_kind = 0;
                RMA_ROW("put_lat", 2, n, 1e6 * rma_time(50), "us");
                rma_kind = 1;
                RMA_ROW("get_lat", 2, n, 1e6 * rma_time(50), "us");
            }
            if (n >= 4 << 10) {
                long warm = 2;
                rma_batch = cfg.window;
                rma_kind = 0;
                RMA_ROW("put_bw", 2, n, (double)(n * cfg.window) / rma_time(warm) / 1e6, "MB/s");
                rma_kind = 1;
                RMA_ROW("get_bw", 2, n, (double)(n * cfg.window) / rma_time(warm) / 1e6, "MB/s");
            }
        }
        rma_batch = cfg.window;
        rma_kind = 2;
        RMA_ROW("acc_rate", 2, 8, (double)cfg.window / rma_time(20) / 1e6, "Mops/s");
        MPI_Win_unlock(1, rma_win);
        free(rma_buf);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long ops = cfg.msgs < 100 ? 100 : cfg.msgs;
    MPI_Win_lock_all(0, rma_win);
    double best = 1e30;
    for (long r = 0; r < cfg.reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        int64_t one = 1, old;
        for (long i = 0; i < ops; i++) {
            MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 0, MPI_SUM, rma_win);
            MPI_Win_flush(0, rma_win);
        }
        MPI_Barrier(MPI_COMM_WORLD); /* to the last rank's end: ranks may take turns on the cores */
        double took = MPI_Wtime() - t0, all;
        MPI_Allreduce(&took, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (all < best)
            best = all;
    }
    MPI_Win_unlock_all(rma_win);
    if (rank == 0)
        RMA_ROW("fop_rate", nprocs, 8, (double)(ops * nprocs) / best / 1e6, "Mops/s");
    /* fence-based halo exchange: 1 KiB Put to each ring neighbour, then Fence */
    {
        enum { HALO = 1 << 10 };
        static unsigned char edge[HALO];
        int left = (rank + nprocs - 1) % nprocs, right = (rank + 1) % nprocs;
        int64_t iters = cfg.iters;
        MPI_Win_fence(0, rma_win);
        for (int pass = 0; pass < 2; pass++) {
            double t0 = MPI_Wtime();
            for (int i = 0; i < 20; i++) {
                MPI_Put(edge, HALO, MPI_BYTE, left, HALO, HALO, MPI_BYTE, rma_win);
                MPI_Put(edge, HALO, MPI_BYTE, right, 0, HALO, MPI_BYTE, rma_win);
                MPI_Win_fence(0, rma_win);
            }
            if (pass == 1 && cfg.iters == 0)
                iters = auto_iters((MPI_Wtime() - t0) / 20);
        }
        MPI_Bcast(&iters, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
        best = 1e30;
        for (long r = 0; r < cfg.reps; r++) {
            double t0 = MPI_Wtime();
            for (int64_t i = 0; i < iters; i++) {
                MPI_Put(edge, HALO, MPI_BYTE, left, HALO, HALO, MPI_BYTE, rma_win);
                MPI_Put(edge, HALO, MPI_BYTE, right, 0, HALO, MPI_BYTE, rma_win);
                MPI_Win_fence(0, rma_win);
            }
            double per = (MPI_Wtime() - t0) / (double)iters;
            if (per < best)
                best = per;
        }
        MPI_Win_fence(MPI_MODE_NOSUCCEED, rma_win);
        if (rank == 0)
            RMA_ROW("halo", nprocs, HALO, 1e6 * best, "us");
    }
    MPI_Win_free(&rma_win);
    if (rma_create)
        free(mem);
#undef RMA_ROW
}

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr, "usage: mpibench pingpong|bw|anysource|virtus|rma [--min-size N] [--max-size N] [--iters N] "
                        "[--window N] [--reps N] [--min-time S] [--msgs N] [--senders K] [--total N] [--block-min N] "
                        "[--block-max N] [--touch] [--no-header]\n");
    MPI_Finalize();
    exit(2);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    const char *cmd = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long *field = NULL;
        if (!strcmp(a, "--no-header")) {
            cfg.header = 0;
            continue;
        }
        if (!strcmp(a, "--csv"))
            continue; /* always CSV */
        if (!strcmp(a, "--win-create")) {
            rma_create = 1;
            continue;
        }
        if (!strcmp(a, "--touch")) {
            cfg.touch = 1;
            continue;
        }
        if (a[0] != '-') {
            if (cmd)
                usage();
            cmd = a;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        if (!strcmp(a, "--min-time")) {
            cfg.min_time = atof(argv[++i]);
            continue;
        }
        if (!strcmp(a, "--min-size"))
            field = &cfg.min_size;
        else if (!strcmp(a, "--max-size"))
            field = &cfg.max_size;
        else if (!strcmp(a, "--iters"))
            field = &cfg.iters;
        else if (!strcmp(a, "--window"))
            field = &cfg.window;
        else if (!strcmp(a, "--reps"))
            field = &cfg.reps;
        else if (!strcmp(a, "--msgs"))
            field = &cfg.msgs;
        else if (!strcmp(a, "--senders"))
            field = &cfg.senders;
        else if (!strcmp(a, "--total"))
            field = &cfg.total;
        else if (!strcmp(a, "--block-min"))
            field = &cfg.block_min;
        else if (!strcmp(a, "--block-max"))
            field = &cfg.block_max;
        else
            usage();
        *field = atol(argv[++i]);
    }
    if (!cmd || cfg.window < 1 || cfg.reps < 1 || cfg.msgs < 1 || cfg.max_size < cfg.min_size)
        usage();
    if (nprocs < 2)
        fail("needs at least 2 ranks");
    if (rank == 0 && cfg.header)
        printf("bench,device,np,size,value,unit\n");
    if (!strcmp(cmd, "pingpong"))
        pingpong();
    else if (!strcmp(cmd, "bw"))
        bw();
    else if (!strcmp(cmd, "anysource"))
        anysource();
    else if (!strcmp(cmd, "virtus"))
        virtus();
    else if (!strcmp(cmd, "rma"))
        rma();
    else
        usage();
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
