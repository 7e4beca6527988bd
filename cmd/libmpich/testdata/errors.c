/* Error returns through MPICH's ABI: classes, messages, user handlers,
 * unsupported functions; with argument "fatal", the default handler. */
#include "check.h"

static int handled, handled_class;
static MPI_Comm handled_comm;
static void handler(MPI_Comm *c, int *code, ...) {
	handled++;
	handled_comm = *c;
	MPI_Error_class(*code, &handled_class);
}

static void expect(int rc, int class, const char *what, const char *word) {
	int got;
	char msg[MPI_MAX_ERROR_STRING];
	int len;
	MPI_Error_class(rc, &got);
	MPI_Error_string(rc, msg, &len);
	CHECK(rc != MPI_SUCCESS && got == class, "%s: class %d, want %d (%s)", what, got, class, msg);
	CHECK(strstr(msg, word) != NULL && (int)strlen(msg) == len, "%s: message %s lacks %s", what, msg, word);
}

int main(int argc, char **argv) {
	int early_rank, early = MPI_Comm_rank(MPI_COMM_WORLD, &early_rank); /* before MPI_Init: an error, not a crash */
	start(&argc, &argv);
	CHECK(early != MPI_SUCCESS, "MPI_Comm_rank before MPI_Init succeeded");
	if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
		int x = 0;
		if (me == 0)
			MPI_Send(&x, 1, MPI_INT, np + 5, 0, MPI_COMM_WORLD); /* MPI_ERRORS_ARE_FATAL aborts */
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Finalize();
		return 0;
	}
	MPI_Errhandler eh;
	MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
	CHECK(eh == MPI_ERRORS_ARE_FATAL, "default handler %#x", eh);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

	int x[4] = {1, 2, 3, 4}, y[2];
	expect(MPI_Send(x, 1, MPI_INT, np + 5, 0, MPI_COMM_WORLD), MPI_ERR_RANK, "bad rank", "MPI_Send");
	expect(MPI_Send(x, 1, MPI_INT, 0, -7, MPI_COMM_WORLD), MPI_ERR_TAG, "bad tag", "MPI_ERR_TAG");
	expect(MPI_Send(x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "null type", "MPI_DATATYPE_NULL");
	expect(MPI_Send(x, 1, MPI_INT, 0, 0, (MPI_Comm)0x84001234), MPI_ERR_COMM, "bad comm", "0x84001234");
	expect(MPI_Send(x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "negative count", "MPI_ERR_COUNT");
	expect(MPI_Reduce(x, y, 1, MPI_INT, MPI_OP_NULL, 0, MPI_COMM_WORLD), MPI_ERR_OP, "null op", "MPI_OP_NULL");
	OK("argument-errors");

	/* Truncation: 4 ints into room for 2. */
	int next = (me + 1) % np, prev = (me + np - 1) % np;
	MPI_Request r;
	MPI_Isend(x, 4, MPI_INT, next, 1, MPI_COMM_WORLD, &r);
	MPI_Status st;
	expect(MPI_Recv(y, 2, MPI_INT, prev, 1, MPI_COMM_WORLD, &st), MPI_ERR_TRUNCATE, "truncate", "MPI_ERR_TRUNCATE");
	MPI_Wait(&r, MPI_STATUS_IGNORE);
	/* In Waitall: MPI_ERR_IN_STATUS, the class in the failed request's status. */
	MPI_Request two[2];
	MPI_Status sts[2];
	int z = 0;
	MPI_Irecv(y, 2, MPI_INT, prev, 2, MPI_COMM_WORLD, &two[0]);
	MPI_Irecv(&z, 1, MPI_INT, prev, 3, MPI_COMM_WORLD, &two[1]);
	MPI_Send(x, 4, MPI_INT, next, 2, MPI_COMM_WORLD);
	MPI_Send(x, 1, MPI_INT, next, 3, MPI_COMM_WORLD);
	int rc2 = MPI_Waitall(2, two, sts), c0, c1;
	MPI_Error_class(rc2, &c0);
	MPI_Error_class(sts[0].MPI_ERROR, &c1);
	CHECK(c0 == MPI_ERR_IN_STATUS && c1 == MPI_ERR_TRUNCATE && sts[1].MPI_ERROR == MPI_SUCCESS && z == 1,
	      "waitall classes %d %d, second %d, z %d", c0, c1, sts[1].MPI_ERROR, z);
	OK("truncate");

	/* Functions adimpi lacks fail cleanly, under both names. */
	expect(MPI_File_delete("x", MPI_INFO_NULL), MPI_ERR_UNSUPPORTED_OPERATION, "unsupported", "MPI_File_delete");
	expect(MPI_File_delete("x", MPI_INFO_NULL), MPI_ERR_UNSUPPORTED_OPERATION, "unsupported again", "MPI_File_delete");
	int cls;
	expect(PMPI_Add_error_class(&cls), MPI_ERR_UNSUPPORTED_OPERATION, "unsupported pmpi", "MPI_Add_error_class");
	OK("unsupported");

	/* A user error handler on a duplicate of world. */
	MPI_Comm dup;
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Errhandler mine;
	MPI_Comm_create_errhandler(handler, &mine);
	MPI_Comm_set_errhandler(dup, mine);
	int rc = MPI_Send(x, 1, MPI_INT, np + 1, 0, dup);
	CHECK(rc != MPI_SUCCESS && handled == 1 && handled_comm == dup && handled_class == MPI_ERR_RANK,
	      "handler ran %d times, comm %#x (dup %#x), class %d", handled, handled_comm, dup, handled_class);
	/* A bad handle among the arguments runs the communicator's handler. */
	rc = MPI_Send(x, 1, MPI_DATATYPE_NULL, 0, 0, dup);
	CHECK(rc != MPI_SUCCESS && handled == 2 && handled_class == MPI_ERR_TYPE, "bad type on dup: handler ran %d times, class %d", handled, handled_class);
	MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER);
	CHECK(handled == 3 && handled_class == MPI_ERR_OTHER, "call_errhandler %d %d", handled, handled_class);
	MPI_Errhandler_free(&mine);
	MPI_Comm_free(&dup);
	OK("user-handler");

	int ver, sub;
	MPI_Get_version(&ver, &sub);
	char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	int len;
	MPI_Get_library_version(lib, &len);
	CHECK(ver >= 3 && strstr(lib, "adimpi") != NULL, "version %d %s", ver, lib);
	OK("version");
	MPI_Finalize();
	return 0;
}
