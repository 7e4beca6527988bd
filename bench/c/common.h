/* Shared by the C twins of cmd/mpibench: the CSV row every benchmark
 * prints (bench,device,np,size,value,unit, the device being the MPI
 * library the program was compiled against) and the way each gives up. */
#include <mpi.h>
#include <stdio.h>

#if defined(OMPI_MAJOR_VERSION)
#define DEVICE "openmpi"
#elif defined(MPICH_VERSION)
#define DEVICE "mpich"
#else
#define DEVICE "mpi"
#endif

/* die reports what went wrong on rank of prog and ends the job. */
static void die(const char *prog, int rank, const char *what)
{
    fprintf(stderr, "%s rank %d: %s\n", prog, rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* csv_row prints one result, with as many decimals as its size needs. */
static void csv_row(const char *bench, int np, long size, double value, const char *unit)
{
    const char *fmt = value >= 1000 ? "%s,%s,%d,%ld,%.1f,%s\n"
                    : value >= 1    ? "%s,%s,%d,%ld,%.3f,%s\n"
                                    : "%s,%s,%d,%ld,%.4f,%s\n";
    printf(fmt, bench, DEVICE, np, size, value, unit);
}
