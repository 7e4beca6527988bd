/* Point-to-point through MPICH's ABI: blocking, non-blocking, persistent,
 * probes, statuses, wildcards, MPI_PROC_NULL and matched probes. */
#include "check.h"

int main(int argc, char **argv) {
	start(&argc, &argv);
	int next = (me + 1) % np, prev = (me + np - 1) % np;

	/* A ring of blocking sends: even ranks send first. */
	int out[4] = {me, me * 10, me * 100, -me}, in[4] = {0};
	MPI_Status st;
	if (me % 2 == 0) {
		MPI_Send(out, 4, MPI_INT, next, 7, MPI_COMM_WORLD);
		MPI_Recv(in, 4, MPI_INT, prev, 7, MPI_COMM_WORLD, &st);
	} else {
		MPI_Recv(in, 4, MPI_INT, prev, 7, MPI_COMM_WORLD, &st);
		MPI_Send(out, 4, MPI_INT, next, 7, MPI_COMM_WORLD);
	}
	CHECK(in[0] == prev && in[2] == prev * 100, "got %d %d", in[0], in[2]);
	CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 7, "status %d %d", st.MPI_SOURCE, st.MPI_TAG);
	int n;
	MPI_Get_count(&st, MPI_INT, &n);
	CHECK(n == 4, "count %d", n);
	MPI_Get_count(&st, MPI_DOUBLE, &n);
	CHECK(n == 2, "count in doubles %d", n);
	OK("ring");

	/* Isend/Irecv/Waitall in both directions, large enough for rendezvous. */
	enum { N = 100000 };
	double *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b), *c = malloc(N * sizeof *c);
	for (int i = 0; i < N; i++)
		a[i] = me + i * 0.5;
	MPI_Request rq[4];
	MPI_Irecv(b, N, MPI_DOUBLE, prev, 1, MPI_COMM_WORLD, &rq[0]);
	MPI_Irecv(c, N, MPI_DOUBLE, next, 2, MPI_COMM_WORLD, &rq[1]);
	MPI_Isend(a, N, MPI_DOUBLE, next, 1, MPI_COMM_WORLD, &rq[2]);
	MPI_Isend(a, N, MPI_DOUBLE, prev, 2, MPI_COMM_WORLD, &rq[3]);
	MPI_Status sts[4];
	MPI_Waitall(4, rq, sts);
	for (int i = 0; i < 4; i++)
		CHECK(rq[i] == MPI_REQUEST_NULL, "request %d not freed: %#x", i, rq[i]);
	CHECK(b[N - 1] == prev + (N - 1) * 0.5 && c[7] == next + 3.5, "got %g %g", b[N - 1], c[7]);
	CHECK(sts[0].MPI_SOURCE == prev && sts[1].MPI_SOURCE == next, "sources %d %d", sts[0].MPI_SOURCE, sts[1].MPI_SOURCE);
	OK("isend-irecv-waitall");

	/* Wait and Test with MPI_STATUS_IGNORE; Waitany. */
	int x = me, y = -1;
	MPI_Request r, s;
	MPI_Irecv(&y, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r);
	MPI_Issend(&x, 1, MPI_INT, next, 3, MPI_COMM_WORLD, &s);
	int flag = 0;
	while (!flag)
		MPI_Test(&r, &flag, &st);
	CHECK(y == prev && st.MPI_TAG == 3 && r == MPI_REQUEST_NULL, "y %d tag %d", y, st.MPI_TAG);
	MPI_Wait(&s, MPI_STATUS_IGNORE);
	MPI_Wait(&s, &st); /* on MPI_REQUEST_NULL: an empty status */
	CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG, "empty status %d %d", st.MPI_SOURCE, st.MPI_TAG);
	MPI_Request two[2];
	MPI_Irecv(&y, 1, MPI_INT, prev, 4, MPI_COMM_WORLD, &two[0]);
	two[1] = MPI_REQUEST_NULL;
	MPI_Send(&x, 1, MPI_INT, next, 4, MPI_COMM_WORLD);
	int idx;
	MPI_Waitany(2, two, &idx, &st);
	CHECK(idx == 0 && y == prev, "waitany %d %d", idx, y);
	OK("wait-test");

	/* Sendrecv, Sendrecv_replace, PROC_NULL. */
	int v = me * 3, w = -1;
	MPI_Sendrecv(&v, 1, MPI_INT, next, 5, &w, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, &st);
	CHECK(w == prev * 3, "sendrecv %d", w);
	MPI_Sendrecv_replace(&v, 1, MPI_INT, next, 6, prev, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	CHECK(v == prev * 3, "replace %d", v);
	int a1 = me, b1 = -1;
	MPI_Request rq1;
	MPI_Isendrecv(&a1, 1, MPI_INT, next, 12, &b1, 1, MPI_INT, prev, 12, MPI_COMM_WORLD, &rq1);
	MPI_Wait(&rq1, MPI_STATUS_IGNORE);
	CHECK(b1 == prev, "isendrecv %d", b1);
	MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
	MPI_Recv(&v, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
	CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "proc null source %d", st.MPI_SOURCE);
	OK("sendrecv");

	/* Probe, then receive what it saw; Mprobe/Mrecv. */
	long big[10];
	for (int i = 0; i < 10; i++)
		big[i] = me * 1000 + i;
	MPI_Send(big, 1 + me % 5, MPI_LONG, next, 8, MPI_COMM_WORLD);
	MPI_Probe(prev, 8, MPI_COMM_WORLD, &st);
	MPI_Get_count(&st, MPI_LONG, &n);
	CHECK(n == 1 + prev % 5, "probe count %d", n);
	long got[10];
	MPI_Recv(got, n, MPI_LONG, prev, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	CHECK(got[n - 1] == prev * 1000 + n - 1, "probed recv %ld", got[n - 1]);
	MPI_Message msg;
	MPI_Send(big, 3, MPI_LONG, next, 9, MPI_COMM_WORLD);
	MPI_Mprobe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &msg, &st);
	MPI_Mrecv(got, 3, MPI_LONG, &msg, &st);
	CHECK(msg == MPI_MESSAGE_NULL && got[2] == prev * 1000 + 2, "mrecv %ld", got[2]);
	OK("probe");

	/* Persistent requests, reused. */
	int ps = 0, pr = -1;
	MPI_Request pq[2];
	MPI_Send_init(&ps, 1, MPI_INT, next, 10, MPI_COMM_WORLD, &pq[0]);
	MPI_Recv_init(&pr, 1, MPI_INT, prev, 10, MPI_COMM_WORLD, &pq[1]);
	for (int round = 0; round < 3; round++) {
		ps = me + round;
		MPI_Startall(2, pq);
		MPI_Waitall(2, pq, MPI_STATUSES_IGNORE);
		CHECK(pr == prev + round, "round %d got %d", round, pr);
		CHECK(pq[0] != MPI_REQUEST_NULL, "persistent request freed by Wait");
	}
	MPI_Request_free(&pq[0]);
	MPI_Request_free(&pq[1]);
	OK("persistent");

	/* Iprobe until a message shows. */
	MPI_Send(&x, 1, MPI_INT, next, 11, MPI_COMM_WORLD);
	flag = 0;
	while (!flag)
		MPI_Iprobe(prev, 11, MPI_COMM_WORLD, &flag, &st);
	MPI_Recv(&y, 1, MPI_INT, prev, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	OK("iprobe");

	double t0 = MPI_Wtime();
	CHECK(t0 > 0 && MPI_Wtick() > 0, "wtime %g", t0);
	free(a), free(b), free(c);
	MPI_Finalize();
	return 0;
}
