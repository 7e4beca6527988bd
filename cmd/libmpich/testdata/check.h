/* Shared by the C test programs: CHECK fails the job naming the rank and
 * the condition; OK reports a passed check from rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me, np;

#define CHECK(cond, ...)                                                        \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", me, \
				__FILE__, __LINE__, #cond);                     \
			fprintf(stderr, __VA_ARGS__);                           \
			fprintf(stderr, "\n");                                  \
			MPI_Abort(MPI_COMM_WORLD, 3);                           \
		}                                                               \
	} while (0)

#define OK(name)                                 \
	do {                                     \
		MPI_Barrier(MPI_COMM_WORLD);     \
		if (me == 0)                     \
			printf("ok %s\n", name); \
	} while (0)

static void start(int *argc, char ***argv) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	MPI_Init(argc, argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
}
