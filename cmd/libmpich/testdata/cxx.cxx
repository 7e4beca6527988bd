// MPICH's C++ bindings (libmpichcxx.so.12, which calls the C library) on
// adimpi.
#include <mpi.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

static void check(bool cond, const char *what) {
	if (!cond) {
		std::fprintf(stderr, "rank %d: check failed: %s\n", MPI::COMM_WORLD.Get_rank(), what);
		MPI::COMM_WORLD.Abort(3);
	}
}

static void ok(const char *what) {
	MPI::COMM_WORLD.Barrier();
	if (MPI::COMM_WORLD.Get_rank() == 0)
		std::printf("ok %s\n", what), std::fflush(stdout);
}

int main(int argc, char **argv) {
	MPI::Init(argc, argv);
	int me = MPI::COMM_WORLD.Get_rank(), np = MPI::COMM_WORLD.Get_size();
	char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	int len;
	MPI_Get_library_version(lib, &len);
	check(std::strstr(lib, "adimpi") != nullptr, "the library is not adimpi's");
	int x = me + 1, s = 0;
	MPI::COMM_WORLD.Allreduce(&x, &s, 1, MPI::INT, MPI::SUM);
	check(s == np * (np + 1) / 2, "allreduce");
	ok("collectives");
	int y = -1;
	MPI::Status st;
	MPI::COMM_WORLD.Sendrecv(&me, 1, MPI::INT, (me + 1) % np, 7, &y, 1, MPI::INT, (me + np - 1) % np, 7, st);
	check(y == (me + np - 1) % np && st.Get_source() == y && st.Get_count(MPI::INT) == 1, "sendrecv");
	ok("p2p");
	MPI::Intracomm half = MPI::COMM_WORLD.Split(me % 2, me);
	check(half.Get_size() == (np + 1 - me % 2) / 2, "split");
	half.Free();
	ok("split");
	MPI::Finalize();
	return 0;
}
