/*
 * overlap.c: mpibench's overlap study (cmd/mpibench/overlap.go) written in C
 * against a system MPI, so that adimpi's netvm device can be compared with
 * MPICH and Open MPI on the same machine with the same method.
 *
 *   mpiexec -n 2 ./overlap-mpich [plain] [iprobe] [flags]
 *
 * Ranks 0 and 1 exchange m bytes (both send, both receive) for m in 0, 1 KiB,
 * 4 KiB, 16 KiB, 64 KiB, 256 KiB and 1 MiB, and measure per iteration, as the
 * largest over the two ranks of the best of --reps interleaved rounds:
 *
 *   t_comm  MPI_Sendrecv alone
 *   t_comp  a busy loop calibrated (on rank 0) to --compute-us (default 500 µs)
 *   t_ovl   MPI_Irecv + MPI_Isend, the busy loop, MPI_Waitall
 *
 * overlap = (t_comm + t_comp - t_ovl) / t_comm, clamped to [0, 1]. Variant
 * plain computes without MPI calls (overlap_plain); iprobe calls
 * MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG) every --poll-us (default 10 µs) of
 * work (overlap_iprobe). Also printed: overlap_tcomm, overlap_tcomp,
 * overlap_tovl_<variant> (µs) and overlap_latency (8 B one-way latency of a
 * blocking ping-pong, µs).
 *
 * Flags: --compute-us N, --poll-us N, --iters N (0 = auto), --reps N,
 * --min-time SECONDS, --no-header, --no-check. Rank 0 prints CSV rows
 * bench,device,np,size,value,unit, device "mpich" or "openmpi".
 *
 * Build: mpicc.mpich -O2 -o overlap-mpich overlap.c
 *        mpicc.openmpi -O2 -o overlap-openmpi overlap.c
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { TAG_OVERLAP = 20, TAG_PING = 21 };

static long opt_iters = 0, opt_reps = 3;
static double opt_min_time = 0.05, opt_compute_us = 500, opt_poll_us = 10;
static int opt_header = 1, opt_check = 1, do_plain = 0, do_iprobe = 0;
static int rank, peer;

static const long sizes[] = {0, 1L << 10, 4L << 10, 16L << 10, 64L << 10, 256L << 10, 1L << 20};

static void fail(const char *what) { die("overlap", rank, what); }

static void row(const char *bench, long size, double value, const char *unit) { csv_row(bench, 2, size, value, unit); }

/* The busy loop: dependent 64-bit multiply-adds, kept alive through sink. */
static volatile uint64_t sink = 1;

static void spin_work(long n)
{
    uint64_t x = sink | 1;
    for (long i = 0; i < n; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
}

/* spin_rate: rounds per second, the best of many short tries (about 0.25 ms
 * each) so that a descheduling does not spoil it. */
static double spin_rate(void)
{
    const long rounds = 1L << 18;
    double best = 0;
    spin_work(1L << 22);
    for (int i = 0; i < 20; i++) {
        double t0 = MPI_Wtime();
        spin_work(rounds);
        double dt = MPI_Wtime() - t0;
        if (dt > 0 && rounds / dt > best)
            best = rounds / dt;
    }
    return best;
}

static long work_rounds, work_chunk;

static void compute(int probe)
{
    if (!probe) {
        spin_work(work_rounds);
        return;
    }
    for (long done = 0; done < work_rounds; done += work_chunk) {
        long n = work_rounds - done < work_chunk ? work_rounds - done : work_chunk;
        int flag;
        spin_work(n);
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
}

/* The functions being timed; kind selects one, with the current buffers. */
enum { F_LATENCY, F_COMM, F_COMP, F_PLAIN, F_IPROBE };
static unsigned char *sbuf, *rbuf;
static long cur;

static void call(int kind)
{
    MPI_Request reqs[2];
    MPI_Status sts[2]; /* not MPI_STATUSES_IGNORE: gcc misreads it as a zero-size array */
    switch (kind) {
    case F_LATENCY:
        if (rank == 0) {
            MPI_Send(sbuf, 8, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD);
            MPI_Recv(rbuf, 8, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rbuf, 8, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, 8, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD);
        }
        break;
    case F_COMM:
        MPI_Sendrecv(sbuf, (int)cur, MPI_BYTE, peer, TAG_OVERLAP, rbuf, (int)cur, MPI_BYTE, peer,
                     TAG_OVERLAP, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
    case F_COMP:
        compute(0);
        break;
    default:
        MPI_Irecv(rbuf, (int)cur, MPI_BYTE, peer, TAG_OVERLAP, MPI_COMM_WORLD, &reqs[0]);
        MPI_Isend(sbuf, (int)cur, MPI_BYTE, peer, TAG_OVERLAP, MPI_COMM_WORLD, &reqs[1]);
        compute(kind == F_IPROBE);
        MPI_Waitall(2, reqs, sts);
    }
}

/* time_calls: largest over the ranks of the average seconds per call. */
static double time_calls(int kind, long iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++)
        call(kind);
    double per = (MPI_Wtime() - t0) / (double)iters, out;
    MPI_Allreduce(&per, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

static long auto_iters(double per)
{
    if (opt_iters > 0)
        return opt_iters;
    if (per <= 0)
        return 1L << 20;
    long n = (long)(opt_min_time / per) + 1;
    return n < 1 ? 1 : n > 50000000 ? 50000000 : n;
}

/* best_of: the interleaved best-of-reps timing of kinds[0..k). */
static void best_of(const int *kinds, int k, int warm, double *best)
{
    long iters[8];
    for (int i = 0; i < k; i++) {
        time_calls(kinds[i], 1);
        iters[i] = auto_iters(time_calls(kinds[i], warm));
        best[i] = INFINITY;
    }
    for (long r = 0; r < opt_reps; r++)
        for (int i = 0; i < k; i++) {
            double t = time_calls(kinds[i], iters[i]);
            if (t < best[i])
                best[i] = t;
        }
}

static double ratio(double tcomm, double tcomp, double tovl)
{
    if (tcomm <= 0)
        return 0;
    double r = (tcomm + tcomp - tovl) / tcomm;
    return r < 0 ? 0 : r > 1 ? 1 : r;
}

static void verify(long n)
{
    for (long i = 0; i < n; i++)
        if (rbuf[i] != (unsigned char)(i * 7 + n + 1))
            fail("wrong data after MPI_Irecv");
}

static void usage(void)
{
    if (rank == 0)
        fprintf(stderr, "usage: overlap [plain] [iprobe] [--compute-us N] [--poll-us N] [--iters N] "
                        "[--reps N] [--min-time S] [--no-header] [--no-check]\n");
    MPI_Finalize();
    exit(2);
}

int main(int argc, char **argv)
{
    int np;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "plain"))
            do_plain = 1;
        else if (!strcmp(a, "iprobe"))
            do_iprobe = 1;
        else if (!strcmp(a, "--no-header"))
            opt_header = 0;
        else if (!strcmp(a, "--no-check"))
            opt_check = 0;
        else if (v && !strcmp(a, "--compute-us"))
            opt_compute_us = atof(argv[++i]);
        else if (v && !strcmp(a, "--poll-us"))
            opt_poll_us = atof(argv[++i]);
        else if (v && !strcmp(a, "--iters"))
            opt_iters = atol(argv[++i]);
        else if (v && !strcmp(a, "--reps"))
            opt_reps = atol(argv[++i]);
        else if (v && !strcmp(a, "--min-time"))
            opt_min_time = atof(argv[++i]);
        else
            usage();
    }
    if (!do_plain && !do_iprobe)
        do_plain = do_iprobe = 1;
    if (np != 2)
        fail("overlap needs exactly 2 ranks");
    if (opt_reps < 1 || opt_compute_us <= 0 || opt_poll_us <= 0)
        usage();
    peer = 1 - rank;

    double rate = spin_rate();
    MPI_Bcast(&rate, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    work_rounds = (long)(rate * opt_compute_us * 1e-6);
    work_chunk = (long)(rate * opt_poll_us * 1e-6);
    if (work_rounds < 1)
        work_rounds = 1;
    if (work_chunk < 1)
        work_chunk = 1;

    long maxn = sizes[sizeof sizes / sizeof sizes[0] - 1];
    sbuf = malloc(maxn > 8 ? maxn : 8);
    rbuf = malloc(maxn > 8 ? maxn : 8);
    if (!sbuf || !rbuf)
        fail("out of memory");
    memset(sbuf, 0, 8);

    if (rank == 0 && opt_header)
        printf("bench,device,np,size,value,unit\n");
    double lat;
    int lk = F_LATENCY;
    best_of(&lk, 1, 1000, &lat);
    if (rank == 0)
        row("overlap_latency", 8, lat / 2 * 1e6, "us");

    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        long n = sizes[s];
        cur = n;
        for (long i = 0; i < n; i++)
            sbuf[i] = (unsigned char)(i * 7 + n + 1);
        if (opt_check) {
            for (int probe = 0; probe < 2; probe++) {
                MPI_Status st[2];
                MPI_Request reqs[2];
                int got;
                memset(rbuf, 0, n);
                MPI_Irecv(rbuf, (int)n, MPI_BYTE, peer, TAG_OVERLAP, MPI_COMM_WORLD, &reqs[0]);
                MPI_Isend(sbuf, (int)n, MPI_BYTE, peer, TAG_OVERLAP, MPI_COMM_WORLD, &reqs[1]);
                compute(probe);
                MPI_Waitall(2, reqs, st);
                MPI_Get_count(&st[0], MPI_BYTE, &got);
                if (got != n)
                    fail("short message");
                verify(n);
            }
        }
        int kinds[4] = {F_COMM, F_COMP}, k = 2;
        const char *names[4];
        if (do_plain) {
            names[k] = "plain";
            kinds[k++] = F_PLAIN;
        }
        if (do_iprobe) {
            names[k] = "iprobe";
            kinds[k++] = F_IPROBE;
        }
        double t[4];
        best_of(kinds, k, n >= 256L << 10 ? 5 : 20, t);
        if (rank != 0)
            continue;
        row("overlap_tcomm", n, t[0] * 1e6, "us");
        row("overlap_tcomp", n, t[1] * 1e6, "us");
        for (int i = 2; i < k; i++) {
            char bench[64];
            snprintf(bench, sizeof bench, "overlap_tovl_%s", names[i]);
            row(bench, n, t[i] * 1e6, "us");
            snprintf(bench, sizeof bench, "overlap_%s", names[i]);
            row(bench, n, ratio(t[0], t[1], t[i]), "x");
        }
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
