/* spawn: the C twin of adimpi's dynprog "spawntime" mode, for comparing
 * the time of MPI_Comm_spawn (from the call until the intercommunicator is
 * usable, the children's MPI_Init included) with Open MPI's or MPICH's.
 *
 *   mpiexec -n 1 ./spawn N ROUNDS    prints "spawn N children: T ms" per round
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Comm parent, inter;
    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        MPI_Comm_disconnect(&parent);
        MPI_Finalize();
        return 0;
    }
    int n = argc > 1 ? atoi(argv[1]) : 1;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    for (int r = 0; r < rounds; r++) {
        double t0 = MPI_Wtime();
        MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, n, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter, MPI_ERRCODES_IGNORE);
        double t1 = MPI_Wtime();
        MPI_Comm_disconnect(&inter);
        printf("spawn %d children: %.1f ms\n", n, (t1 - t0) * 1e3);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
