/*
 * coll.c: the collectives of "mpibench coll" written in C against a system
 * MPI, so that adimpi can be compared with MPICH and Open MPI on the same
 * machine with the same method.
 *
 *   mpiexec -n N ./coll-mpich [flags]
 *
 * Times MPI_Barrier; MPI_Allreduce (MPI_DOUBLE, MPI_SUM) of 8 B and 8 MiB;
 * MPI_Bcast of 1 MiB from rank 0; MPI_Alltoall of 64 KiB per pair of ranks.
 * Each collective is called once on fresh data and its result checked; then
 * one timed call bounds the warm-up (at most --min-time of it), and the
 * warm-up calls, timed, give rank 0 an estimate per call, from which it picks
 * an iteration count (enough for --min-time, unless --iters is given) and
 * broadcasts it; then --reps timed runs of that many calls, each after a
 * barrier, each measured as the largest over the ranks of the average time
 * per call. The best run is printed, in µs, as CSV on rank 0:
 * bench,device,np,size,value,unit.
 *
 * Flags: --iters N (0 = auto), --max-iters N, --reps N, --min-time SECONDS,
 * --device NAME, --no-header, --allreduce-large BYTES (the large Allreduce,
 * a multiple of 8; default 8 MiB), --comm world|dup (the collectives run on
 * MPI_COMM_WORLD, the default, or on a duplicate of it, whose rows are named
 * with a _dup suffix). The device column
 * defaults to "mpich" or "openmpi", from MPI_Get_library_version.
 *
 * Build: mpicc.mpich -O2 -o coll-mpich coll.c
 *        mpicc.openmpi -O2 -o coll-openmpi coll.c
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long opt_iters = 0, opt_max_iters = 50000000, opt_reps = 3;
static double opt_min_time = 0.05;
static long opt_allreduce_large = 8L << 20;
static int opt_header = 1;
static const char *device = NULL;
static int rank, nprocs;
/* comm is the communicator the collectives run on: MPI_COMM_WORLD, or
 * its duplicate with --comm dup */
static MPI_Comm comm;

/* die reports a failure on this rank and aborts the job. */
static void die(const char *what)
{
    fprintf(stderr, "coll rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* library_name names the MPI library this program runs on. */
static const char *library_name(void)
{
    static char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    if (strstr(ver, "Open MPI"))
        return "openmpi";
    if (strstr(ver, "MPICH"))
        return "mpich";
    return "mpi";
}

/* one collective benchmark; check returns 0 when the result is right */
struct bench {
    const char *name;
    long size;
    int warmup;
    void (*call)(void);
    int (*check)(void);
};

static double *ar_send, *ar_recv;
static long ar_n;
static unsigned char *bc_buf, *a2a_send, *a2a_recv;
enum { BCAST_BYTES = 1 << 20, A2A_BLOCK = 64 << 10 };

static void barrier_call(void) { MPI_Barrier(comm); }
static int barrier_check(void) { return MPI_Barrier(comm) != MPI_SUCCESS; }

/* allreduce_setup makes the buffers for an n-element allreduce: element i
 * of rank r is (i mod 13) + r, so the sums are exact integers. */
static void allreduce_setup(long n)
{
    free(ar_send);
    free(ar_recv);
    ar_n = n;
    ar_send = malloc(n * sizeof(double));
    ar_recv = malloc(n * sizeof(double));
    if (!ar_send || !ar_recv)
        die("out of memory");
    for (long i = 0; i < n; i++)
        ar_send[i] = (double)(i % 13 + rank);
}

static void allreduce_call(void)
{
    MPI_Allreduce(ar_send, ar_recv, (int)ar_n, MPI_DOUBLE, MPI_SUM, comm);
}

static int allreduce_check(void)
{
    memset(ar_recv, 0, ar_n * sizeof(double));
    allreduce_call();
    for (long i = 0; i < ar_n; i++)
        if (ar_recv[i] != (double)((long)nprocs * (i % 13) + (long)nprocs * (nprocs - 1) / 2))
            return 1;
    return 0;
}

static void bcast_call(void) { MPI_Bcast(bc_buf, BCAST_BYTES, MPI_BYTE, 0, comm); }

static int bcast_check(void)
{
    for (long i = 0; i < BCAST_BYTES; i++)
        bc_buf[i] = rank == 0 ? (unsigned char)(i * 7 + BCAST_BYTES + 1) : 0;
    bcast_call();
    for (long i = 0; i < BCAST_BYTES; i++)
        if (bc_buf[i] != (unsigned char)(i * 7 + BCAST_BYTES + 1))
            return 1;
    return 0;
}

/* the block from rank s to rank d carries byte s*31 + d*7 + i */
static unsigned char a2a_pattern(long s, long d, long i) { return (unsigned char)(s * 31 + d * 7 + i); }

static void alltoall_call(void)
{
    MPI_Alltoall(a2a_send, A2A_BLOCK, MPI_BYTE, a2a_recv, A2A_BLOCK, MPI_BYTE, comm);
}

static int alltoall_check(void)
{
    memset(a2a_recv, 0, (size_t)nprocs * A2A_BLOCK);
    alltoall_call();
    for (long s = 0; s < nprocs; s++)
        for (long i = 0; i < A2A_BLOCK; i++)
            if (a2a_recv[s * A2A_BLOCK + i] != a2a_pattern(s, rank, i))
                return 1;
    return 0;
}

/* time_calls runs iters calls after a barrier; on rank 0 it returns the
 * largest over the ranks of the average seconds per call. */
static double time_calls(const struct bench *b, long iters)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++)
        b->call();
    double per = (MPI_Wtime() - t0) / (double)iters, worst = 0;
    MPI_Reduce(&per, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return worst;
}

/* pick_iters turns rank 0's estimate per call into an iteration count. */
static long pick_iters(double per)
{
    if (opt_iters > 0)
        return opt_iters;
    long n = per > 0 ? (long)(opt_min_time / per) + 1 : opt_max_iters;
    if (n < 1)
        n = 1;
    if (n > opt_max_iters)
        n = opt_max_iters;
    return n;
}

static void run(const struct bench *b)
{
    if (b->check()) {
        char msg[128];
        snprintf(msg, sizeof msg, "%s size %ld: wrong result", b->name, b->size);
        die(msg);
    }
    /* one timed call sizes the warm-up: at most b->warmup calls, and no
     * more than fill --min-time (oversubscribed runs can take many
     * milliseconds per call) */
    double first = time_calls(b, 1);
    int64_t warm = 0;
    if (rank == 0) {
        warm = (int64_t)(opt_min_time / (first > 1e-9 ? first : 1e-9)) + 1;
        if (warm > b->warmup)
            warm = b->warmup;
    }
    MPI_Bcast(&warm, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    double est = time_calls(b, (long)warm);
    int64_t iters = rank == 0 ? pick_iters(est) : 0;
    MPI_Bcast(&iters, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    double best = 0;
    for (long r = 0; r < opt_reps; r++) {
        double t = time_calls(b, (long)iters);
        if (r == 0 || t < best)
            best = t;
    }
    if (rank == 0) {
        double us = best * 1e6;
        const char *fmt = us >= 1000 ? "%s,%s,%d,%ld,%.1f,us\n"
                        : us >= 1    ? "%s,%s,%d,%ld,%.3f,us\n"
                                     : "%s,%s,%d,%ld,%.4f,us\n";
        char name[64];
        snprintf(name, sizeof name, "%s%s", b->name, comm == MPI_COMM_WORLD ? "" : "_dup");
        printf(fmt, name, device, nprocs, b->size, us);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    int opt_dup = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--no-header"))
            opt_header = 0;
        else if (!strcmp(a, "--csv"))
            ; /* always CSV; accepted for symmetry with mpibench */
        else if (!strcmp(a, "--iters") && more)
            opt_iters = atol(argv[++i]);
        else if (!strcmp(a, "--max-iters") && more)
            opt_max_iters = atol(argv[++i]);
        else if (!strcmp(a, "--reps") && more)
            opt_reps = atol(argv[++i]);
        else if (!strcmp(a, "--min-time") && more)
            opt_min_time = atof(argv[++i]);
        else if (!strcmp(a, "--allreduce-large") && more)
            opt_allreduce_large = atol(argv[++i]);
        else if (!strcmp(a, "--comm") && more && !strcmp(argv[i + 1], "world"))
            i++;
        else if (!strcmp(a, "--comm") && more && !strcmp(argv[i + 1], "dup")) {
            i++;
            opt_dup = 1;
        } else if (!strcmp(a, "--device") && more)
            device = argv[++i];
        else {
            if (rank == 0)
                fprintf(stderr, "coll: unknown or incomplete flag %s\n", a);
            MPI_Finalize();
            return 2;
        }
    }
    if (opt_reps < 1 || opt_max_iters < 1)
        die("need --reps and --max-iters >= 1");
    if (opt_allreduce_large < 8 || opt_allreduce_large % 8)
        die("--allreduce-large must be a positive multiple of 8");
    if (!device)
        device = library_name();
    comm = MPI_COMM_WORLD;
    if (opt_dup)
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    bc_buf = malloc(BCAST_BYTES);
    a2a_send = malloc((size_t)nprocs * A2A_BLOCK);
    a2a_recv = malloc((size_t)nprocs * A2A_BLOCK);
    if (!bc_buf || !a2a_send || !a2a_recv)
        die("out of memory");
    for (long d = 0; d < nprocs; d++)
        for (long i = 0; i < A2A_BLOCK; i++)
            a2a_send[d * A2A_BLOCK + i] = a2a_pattern(rank, d, i);

    if (rank == 0 && opt_header)
        printf("bench,device,np,size,value,unit\n");
    struct bench barrier = {"coll_barrier", 0, 200, barrier_call, barrier_check};
    run(&barrier);
    struct bench allreduce = {"coll_allreduce", 8, 200, allreduce_call, allreduce_check};
    allreduce_setup(1);
    run(&allreduce);
    if (opt_allreduce_large != (1L << 20)) { /* 1 MiB: the figure issue 25 compares */
        allreduce.size = 1L << 20;
        allreduce.warmup = 3;
        allreduce_setup((1L << 20) / 8);
        run(&allreduce);
    }
    allreduce.size = opt_allreduce_large;
    allreduce.warmup = opt_allreduce_large > (64L << 10) ? 3 : 200;
    allreduce_setup(opt_allreduce_large / 8);
    run(&allreduce);
    struct bench bcast = {"coll_bcast", BCAST_BYTES, 10, bcast_call, bcast_check};
    run(&bcast);
    struct bench alltoall = {"coll_alltoall", A2A_BLOCK, 10, alltoall_call, alltoall_check};
    run(&alltoall);

    free(ar_send);
    free(ar_recv);
    free(bc_buf);
    free(a2a_send);
    free(a2a_recv);
    MPI_Finalize();
    return 0;
}
