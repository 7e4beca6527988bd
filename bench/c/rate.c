/*
 * rate.c: cmd/mpibench's rate benchmark (rate.go) written in C against a
 * system MPI: the message rate in the manner of osu_mbw_mr. Every sender of
 * the pattern starts windows of --window MPI_Isends of one size to its
 * receiver, which posts as many MPI_Irecvs; both MPI_Waitall, and the
 * receiver acknowledges each window with 4 bytes.
 *
 *   mpiexec -n 2 ./rate-mpich [--pattern pairs|fanin|ring] [flags]
 *
 * Patterns: pairs (rank i < np/2 sends to i+np/2), fanin (every rank sends
 * to rank 0), ring (rank i sends to i+1). Flags as in cmd/mpibench:
 * --min-size N, --max-size N, --iters N (0 = auto), --window N, --reps N,
 * --min-time SECONDS, --no-header. Rank 0 prints CSV rows
 * bench,device,np,size,value,unit: rate_PATTERN in MB/s and
 * rate_PATTERN_mmps in millions of messages per second, the job's
 * aggregate over its slowest rank's time, best of --reps.
 *
 * Build: mpicc.mpich -O2 -o rate-mpich rate.c
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { TAG_ACK = 4, TAG_RATE = 8 };

static long min_size = 1, max_size = 65536, iters_flag = 0, window = 64, reps = 3;
static double min_time = 0.05;
static int header = 1, rank, nprocs;
static const char *pattern = "pairs";

static void fail(const char *what) { die("rate", rank, what); }

static void row(const char *bench, long size, double value, const char *unit) { csv_row(bench, nprocs, size, value, unit); }

/* The pattern's peers of this rank: to[] it sends windows to, from[] it
 * receives windows from. */
static int to[1], nto, *from, nfrom;

static void roles(void)
{
    from = malloc(sizeof(int) * nprocs);
    if (!strcmp(pattern, "pairs")) {
        if (nprocs % 2)
            fail("--pattern pairs needs an even number of ranks");
        int half = nprocs / 2;
        if (rank < half)
            to[nto++] = rank + half;
        else
            from[nfrom++] = rank - half;
    } else if (!strcmp(pattern, "fanin")) {
        if (rank == 0)
            for (int s = 1; s < nprocs; s++)
                from[nfrom++] = s;
        else
            to[nto++] = 0;
    } else if (!strcmp(pattern, "ring")) {
        to[nto++] = (rank + 1) % nprocs;
        from[nfrom++] = (rank - 1 + nprocs) % nprocs;
    } else {
        fail("unknown --pattern (pairs, fanin, ring)");
    }
}

static void windows(unsigned char *sbuf, unsigned char *rbuf, long n, MPI_Request *reqs, long count)
{
    static unsigned char ack[4];
    MPI_Request acks[2 * 1024];
    for (long i = 0; i < count; i++) {
        int k = 0;
        for (int j = 0; j < nfrom; j++)
            for (long w = 0; w < window; w++)
                MPI_Irecv(rbuf + j * n, (int)n, MPI_BYTE, from[j], TAG_RATE, MPI_COMM_WORLD, &reqs[k++]);
        for (int j = 0; j < nto; j++)
            for (long w = 0; w < window; w++)
                MPI_Isend(sbuf, (int)n, MPI_BYTE, to[j], TAG_RATE, MPI_COMM_WORLD, &reqs[k++]);
        MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
        int a = 0;
        for (int j = 0; j < nto; j++)
            MPI_Irecv(ack, 4, MPI_BYTE, to[j], TAG_ACK, MPI_COMM_WORLD, &acks[a++]);
        for (int j = 0; j < nfrom; j++)
            MPI_Isend(ack, 4, MPI_BYTE, from[j], TAG_ACK, MPI_COMM_WORLD, &acks[a++]);
        MPI_Waitall(a, acks, MPI_STATUSES_IGNORE);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "rate") || !strcmp(a, "--csv"))
            continue;
        if (!strcmp(a, "--no-header")) {
            header = 0;
            continue;
        }
        if (i + 1 >= argc)
            fail("flag without a value");
        const char *v = argv[++i];
        if (!strcmp(a, "--pattern"))
            pattern = v;
        else if (!strcmp(a, "--min-size"))
            min_size = atol(v);
        else if (!strcmp(a, "--max-size"))
            max_size = atol(v);
        else if (!strcmp(a, "--iters"))
            iters_flag = atol(v);
        else if (!strcmp(a, "--window"))
            window = atol(v);
        else if (!strcmp(a, "--reps"))
            reps = atol(v);
        else if (!strcmp(a, "--min-time"))
            min_time = atof(v);
        else
            fail("unknown flag");
    }
    if (nprocs < 2 || nprocs > 1024 || window < 1 || reps < 1 || min_size < 1 || max_size < min_size)
        fail("need 2..1024 ranks, --window and --reps >= 1, 1 <= --min-size <= --max-size");
    roles();
    char name[64];
    snprintf(name, sizeof name, "rate_%s", pattern);
    int sender = nto > 0, nsend = 0;
    MPI_Allreduce(&sender, &nsend, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    long nreq = window * (nto + nfrom);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * nreq);
    if (rank == 0 && header)
        printf("bench,device,np,size,value,unit\n");
    for (long n = 1; n <= max_size; n *= 2) {
        if (n < min_size)
            continue;
        unsigned char *sbuf = calloc(n, 1), *rbuf = calloc(n * (nfrom ? nfrom : 1), 1);
        windows(sbuf, rbuf, n, reqs, 1);
        int warm = n <= 64 << 10 ? 20 : 4;
        double t0 = MPI_Wtime();
        windows(sbuf, rbuf, n, reqs, warm - 1);
        double per = (MPI_Wtime() - t0) / (warm - 1);
        long iters = iters_flag;
        if (iters <= 0) {
            iters = per > 0 ? (long)(min_time / per) + 1 : 1 << 20;
            if (iters < 1)
                iters = 1;
        }
        MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        double best = 1e300;
        for (long r = 0; r < reps; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            windows(sbuf, rbuf, n, reqs, iters);
            double el = MPI_Wtime() - t0, slowest;
            MPI_Allreduce(&el, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (slowest < best)
                best = slowest;
        }
        double msgs = (double)nsend * window * iters;
        if (rank == 0) {
            char mm[80];
            snprintf(mm, sizeof mm, "%s_mmps", name);
            row(name, n, msgs * n / best / 1e6, "MB/s");
            row(mm, n, msgs / best / 1e6, "Mmsg/s");
        }
        free(sbuf);
        free(rbuf);
    }
    MPI_Finalize();
    return 0;
}
