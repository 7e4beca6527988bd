/* A C program linked against MPICH, for TestMPICHProgram: it proves that
 * MPICH's own PMI-1 client wires up through mpirun's PMI server. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, sum;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("mpich rank %d of %d sum %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
