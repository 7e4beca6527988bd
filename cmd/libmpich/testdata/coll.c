/* Collectives through MPICH's ABI: blocking, non-blocking and persistent,
 * MPI_IN_PLACE, pair types with MAXLOC, and a user operation in C. */
#include "check.h"

/* A user operation: element-wise max of absolute values, on ints. */
static int calls;
static void absmax(void *in, void *inout, int *len, MPI_Datatype *dt) {
	int *a = in, *b = inout;
	calls++;
	if (*dt != MPI_INT)
		return;
	for (int i = 0; i < *len; i++) {
		int x = abs(a[i]), y = abs(b[i]);
		b[i] = x > y ? x : y;
	}
}

/* absmax_c is absmax with MPI_User_function_c's signature; it keeps the
 * largest count it was given. */
static MPI_Count maxlen_c;
static void absmax_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt) {
	if (*len > maxlen_c)
		maxlen_c = *len;
	int n = (int)*len;
	absmax(in, inout, &n, dt);
}

int main(int argc, char **argv) {
	start(&argc, &argv);
	int root = np - 1;

	MPI_Barrier(MPI_COMM_WORLD);
	OK("barrier");

	double v[3] = {0};
	if (me == root)
		v[0] = 1.5, v[1] = 2.5, v[2] = -3;
	MPI_Bcast(v, 3, MPI_DOUBLE, root, MPI_COMM_WORLD);
	CHECK(v[1] == 2.5 && v[2] == -3, "bcast %g %g", v[1], v[2]);
	OK("bcast");

	int one = me + 1, sum = 0;
	MPI_Reduce(&one, &sum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (me == 0)
		CHECK(sum == np * (np + 1) / 2, "reduce %d", sum);
	long l = me, lmax;
	MPI_Allreduce(&l, &lmax, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
	CHECK(lmax == np - 1, "allreduce max %ld", lmax);
	float f[2] = {me, 1};
	MPI_Allreduce(MPI_IN_PLACE, f, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	CHECK(f[0] == np * (np - 1) / 2 && f[1] == np, "in place %g %g", f[0], f[1]);
	OK("reduce");

	struct { double val; int rank; } mine = {me == 1 ? 100.0 : me, me}, best;
	MPI_Allreduce(&mine, &best, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
	CHECK(best.rank == 1 && best.val == 100.0, "maxloc %g at %d", best.val, best.rank);
	OK("maxloc");

	MPI_Op op;
	MPI_Op_create(absmax, 1, &op);
	int z[2] = {me % 2 ? -me * 10 : me, 1}, zr[2];
	MPI_Allreduce(z, zr, 2, MPI_INT, op, MPI_COMM_WORLD);
	int want = 0;
	for (int i = 0; i < np; i++)
		want = (i % 2 ? i * 10 : i) > want ? (i % 2 ? i * 10 : i) : want;
	CHECK(zr[0] == want && zr[1] == 1, "user op %d want %d", zr[0], want);
	MPI_Op_free(&op);
	CHECK(op == MPI_OP_NULL, "op not nulled");
	/* The same through MPI_Op_create_c: its count is an MPI_Count. */
	MPI_Op_create_c(absmax_c, 1, &op);
	zr[0] = zr[1] = -1;
	MPI_Allreduce_c(z, zr, (MPI_Count)2, MPI_INT, op, MPI_COMM_WORLD);
	long lens = maxlen_c, maxlen;
	MPI_Allreduce(&lens, &maxlen, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD); /* some ranks may not call it */
	CHECK(zr[0] == want && zr[1] == 1 && (np == 1 || maxlen == 2), "user op _c %d want %d, count %ld", zr[0], want, maxlen);
	int commute;
	MPI_Op_commutative(op, &commute);
	CHECK(commute, "op_create_c's op is not commutative");
	MPI_Op_free(&op);
	OK("user-op");

	int *all = malloc(np * 2 * sizeof(int));
	int pair[2] = {me, me * me};
	MPI_Gather(pair, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD);
	if (me == root)
		for (int i = 0; i < np; i++)
			CHECK(all[2 * i] == i && all[2 * i + 1] == i * i, "gather %d", i);
	MPI_Allgather(pair, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
	CHECK(all[2 * (np - 1) + 1] == (np - 1) * (np - 1), "allgather");
	int back[2];
	MPI_Scatter(all, 2, MPI_INT, back, 2, MPI_INT, 0, MPI_COMM_WORLD);
	CHECK(back[0] == me && back[1] == me * me, "scatter %d %d", back[0], back[1]);
	OK("gather-scatter");

	/* Gatherv: rank i sends i+1 ints. */
	int *counts = malloc(np * sizeof(int)), *displs = malloc(np * sizeof(int)), tot = 0;
	for (int i = 0; i < np; i++)
		counts[i] = i + 1, displs[i] = tot, tot += i + 1;
	int *mineV = malloc((me + 1) * sizeof(int)), *allV = malloc(tot * sizeof(int));
	for (int i = 0; i <= me; i++)
		mineV[i] = me;
	MPI_Gatherv(mineV, me + 1, MPI_INT, allV, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
	if (me == 0)
		CHECK(allV[tot - 1] == np - 1 && allV[1] == 1, "gatherv");
	MPI_Allgatherv(mineV, me + 1, MPI_INT, allV, counts, displs, MPI_INT, MPI_COMM_WORLD);
	CHECK(allV[displs[np - 1]] == np - 1, "allgatherv");
	OK("gatherv");

	int *sa = malloc(np * sizeof(int)), *ra = malloc(np * sizeof(int));
	for (int i = 0; i < np; i++)
		sa[i] = me * 100 + i;
	MPI_Alltoall(sa, 1, MPI_INT, ra, 1, MPI_INT, MPI_COMM_WORLD);
	for (int i = 0; i < np; i++)
		CHECK(ra[i] == i * 100 + me, "alltoall %d", ra[i]);
	int *ones = malloc(np * sizeof(int)), *idx = malloc(np * sizeof(int));
	for (int i = 0; i < np; i++)
		ones[i] = 1, idx[i] = np - 1 - i;
	MPI_Alltoallv(sa, ones, idx, MPI_INT, ra, ones, idx, MPI_INT, MPI_COMM_WORLD);
	CHECK(ra[np - 1] == np - 1 - me, "alltoallv %d", ra[np - 1]); /* from rank 0: its sa[np-1-me] */
	OK("alltoall");

	int sc, ex = -1;
	MPI_Scan(&one, &sc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	CHECK(sc == (me + 1) * (me + 2) / 2, "scan %d", sc);
	MPI_Exscan(&one, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (me > 0)
		CHECK(ex == me * (me + 1) / 2, "exscan %d", ex);
	int rsb;
	MPI_Reduce_scatter_block(sa, &rsb, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	CHECK(rsb == 100 * np * (np - 1) / 2 + np * me, "reduce_scatter_block %d", rsb);
	OK("scan");

	/* Non-blocking and persistent forms. */
	MPI_Request rq;
	int ib = me == 0 ? 42 : 0;
	MPI_Ibcast(&ib, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	CHECK(ib == 42, "ibcast %d", ib);
	double d = me, dsum;
	MPI_Iallreduce(&d, &dsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq);
	int flag = 0;
	while (!flag)
		MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
	CHECK(dsum == np * (np - 1) / 2.0, "iallreduce %g", dsum);
	MPI_Ibarrier(MPI_COMM_WORLD, &rq);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	int acc, in;
	MPI_Allreduce_init(&in, &acc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq);
	for (int round = 0; round < 3; round++) {
		in = me + round;
		MPI_Start(&rq);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		CHECK(acc == np * (np - 1) / 2 + np * round, "persistent allreduce round %d: %d", round, acc);
	}
	MPI_Request_free(&rq);
	OK("nonblocking-persistent");

	/* Large-count (MPI_Count, MPI_Aint arrays) forms of the v-collectives
	 * and of the others. */
	MPI_Count *ccounts = malloc(np * sizeof *ccounts);
	MPI_Aint *cdispls = malloc(np * sizeof *cdispls);
	int *cin = malloc(np * sizeof *cin), *cout = malloc(np * np * sizeof *cout);
	for (int i = 0; i < np; i++)
		ccounts[i] = i + 1, cdispls[i] = i * (i + 1) / 2, cin[i] = 100 * me + i;
	int total = np * (np + 1) / 2;
	MPI_Allgatherv_c(cin, me + 1, MPI_INT, cout, ccounts, cdispls, MPI_INT, MPI_COMM_WORLD);
	for (int r = 0; r < np; r++)
		for (int i = 0; i <= r; i++)
			CHECK(cout[cdispls[r] + i] == 100 * r + i, "allgatherv_c [%d][%d] = %d", r, i, cout[cdispls[r] + i]);
	MPI_Gatherv_c(cin, me + 1, MPI_INT, cout, ccounts, cdispls, MPI_INT, 0, MPI_COMM_WORLD);
	if (me == 0)
		CHECK(cout[total - 1] == 100 * (np - 1) + np - 1, "gatherv_c last %d", cout[total - 1]);
	int csum = -1;
	MPI_Count cone = 1;
	MPI_Count *cones = malloc(np * sizeof *cones);
	for (int i = 0; i < np; i++)
		cones[i] = 1;
	MPI_Reduce_scatter_c(cin, &csum, cones, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	CHECK(csum == 100 * np * (np - 1) / 2 + np * me, "reduce_scatter_c %d", csum);
	free(cones);
	MPI_Request crq;
	int cb = me == 0 ? 77 : 0;
	MPI_Ibcast_c(&cb, cone, MPI_INT, 0, MPI_COMM_WORLD, &crq);
	MPI_Wait(&crq, MPI_STATUS_IGNORE);
	CHECK(cb == 77, "ibcast_c %d", cb);
	MPI_Count huge[64];
	for (int i = 0; i < np && i < 64; i++)
		huge[i] = (MPI_Count)1 << 40;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	int crc = MPI_Allgatherv_c(cin, 1, MPI_INT, cout, huge, cdispls, MPI_INT, MPI_COMM_WORLD), ccls;
	MPI_Error_class(crc, &ccls);
	CHECK(ccls == MPI_ERR_COUNT, "a count of 2^40: class %d", ccls);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	free(ccounts), free(cdispls), free(cin), free(cout);
	OK("large-count");

	free(all), free(counts), free(displs), free(mineV), free(allV), free(sa), free(ra), free(ones), free(idx);
	MPI_Finalize();
	return 0;
}
