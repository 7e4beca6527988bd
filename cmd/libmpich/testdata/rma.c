/* One-sided communication through MPICH's ABI: fence epochs with put and
 * get, passive-target locks, accumulate, a shared counter with
 * MPI_Fetch_and_op, compare-and-swap, post-start-complete-wait, allocated
 * and dynamic windows, the window attributes and MPICH's error rule. */
#include "check.h"

static int errh_calls, errh_code, deleted;
static MPI_Win errh_win;
static void *last_deleted;

static void win_errh(MPI_Win *w, int *code, ...) {
	errh_calls++;
	errh_win = *w;
	errh_code = *code;
}

static int win_attr_delete(MPI_Win w, int key, void *val, void *extra) {
	deleted++;
	last_deleted = val;
	return MPI_SUCCESS;
}

int main(int argc, char **argv) {
	start(&argc, &argv);
	int next = (me + 1) % np, prev = (me + np - 1) % np;

	/* Fence: each rank puts its rank into its right neighbour's window and
	 * gets its left neighbour's slot 1. */
	int mem[4] = {-1, 100 + me, -1, -1}, got = -1;
	MPI_Win win;
	MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	MPI_Win_fence(MPI_MODE_NOPRECEDE, win);
	MPI_Put(&me, 1, MPI_INT, next, 0, 1, MPI_INT, win);
	MPI_Get(&got, 1, MPI_INT, prev, 1, 1, MPI_INT, win);
	MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
	CHECK(mem[0] == prev && got == 100 + prev, "fence: mem[0] %d want %d, got %d want %d", mem[0], prev, got, 100 + prev);
	OK("fence-put-get");

	/* Window attributes: MPICH's keys, pointers to the values. */
	void *base;
	MPI_Aint *size;
	int *unit, *flavor, *model, flag;
	MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag);
	CHECK(flag && base == mem, "MPI_WIN_BASE %p want %p", base, (void *)mem);
	MPI_Win_get_attr(win, MPI_WIN_SIZE, &size, &flag);
	MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &unit, &flag);
	MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag);
	MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag);
	CHECK(*size == sizeof mem && *unit == sizeof(int) && *flavor == MPI_WIN_FLAVOR_CREATE && *model == MPI_WIN_UNIFIED,
	      "attributes size %ld unit %d flavor %d model %d", (long)*size, *unit, *flavor, *model);
	MPI_Group wg, cg;
	int cmp;
	MPI_Win_get_group(win, &wg);
	MPI_Comm_group(MPI_COMM_WORLD, &cg);
	MPI_Group_compare(wg, cg, &cmp);
	CHECK(cmp == MPI_IDENT, "window group compares %d", cmp);
	MPI_Group_free(&wg);
	OK("attributes");

	/* Passive target: exclusive locks around a put to rank 0; then shared
	 * locks to read it back. */
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
	int v = 1000 + me;
	MPI_Put(&v, 1, MPI_INT, 0, 2 + (me % 2), 1, MPI_INT, win);
	MPI_Win_unlock(0, win);
	MPI_Barrier(MPI_COMM_WORLD);
	int back[2];
	MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
	MPI_Get(back, 2, MPI_INT, 0, 2, 2, MPI_INT, win);
	MPI_Win_unlock(0, win);
	CHECK(back[0] >= 1000 && back[0] < 1000 + np && back[0] % 2 == 0, "lock: slot 2 holds %d", back[0]);
	OK("lock-unlock");

	/* Accumulate: everyone adds rank+1 into rank 0's slot 1 (twice, in two
	 * calls), under a fence. */
	MPI_Win_fence(0, win);
	if (me == 0)
		mem[1] = 0;
	MPI_Win_fence(0, win);
	int add = me + 1;
	MPI_Accumulate(&add, 1, MPI_INT, 0, 1, 1, MPI_INT, MPI_SUM, win);
	MPI_Accumulate(&add, 1, MPI_INT, 0, 1, 1, MPI_INT, MPI_SUM, win);
	MPI_Win_fence(0, win);
	if (me == 0)
		CHECK(mem[1] == np * (np + 1), "accumulate: %d want %d", mem[1], np * (np + 1));
	OK("accumulate");

	/* A shared counter: each rank takes 5 tickets with MPI_Fetch_and_op
	 * under MPI_Win_lock_all; every ticket is taken once. */
	long *counter;
	MPI_Win cw;
	MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &counter, &cw);
	*counter = 0;
	MPI_Win_fence(0, cw);
	long one = 1, tickets[5];
	MPI_Win_lock_all(0, cw);
	for (int i = 0; i < 5; i++) {
		MPI_Fetch_and_op(&one, &tickets[i], MPI_LONG, 0, 0, MPI_SUM, cw);
		MPI_Win_flush(0, cw);
	}
	MPI_Win_unlock_all(cw);
	long all[5 * 64];
	CHECK(np <= 64, "np %d", np);
	MPI_Allgather(tickets, 5, MPI_LONG, all, 5, MPI_LONG, MPI_COMM_WORLD);
	for (int t = 0; t < 5 * np; t++) {
		int seen = 0;
		for (int i = 0; i < 5 * np; i++)
			seen += all[i] == t;
		CHECK(seen == 1, "ticket %d taken %d times", t, seen);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (me == 0)
		CHECK(*counter == 5 * np, "counter %ld want %d", *counter, 5 * np);
	OK("fetch-and-op-counter");

	/* Compare-and-swap: one rank wins the slot. */
	MPI_Win_fence(0, cw);
	if (me == 0)
		*counter = -1;
	MPI_Win_fence(0, cw);
	long mine = me, expect = -1, old = 99;
	MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, cw);
	MPI_Compare_and_swap(&mine, &expect, &old, MPI_LONG, 0, 0, cw);
	MPI_Win_unlock(0, cw);
	int won = old == -1, winners;
	MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	CHECK(winners == 1, "%d ranks won the compare-and-swap", winners);
	OK("compare-and-swap");

	/* Post-start-complete-wait: odd ranks expose, even ranks access. */
	MPI_Group world, peers;
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	int partner = me % 2 ? me - 1 : me + 1;
	if (partner < np) {
		MPI_Group_incl(world, 1, &partner, &peers);
		if (me % 2) {
			mem[3] = -1;
			MPI_Win_post(peers, 0, win);
			MPI_Win_wait(win);
			CHECK(mem[3] == 7000 + partner, "pscw: %d want %d", mem[3], 7000 + partner);
		} else {
			int x = 7000 + me;
			MPI_Win_start(peers, 0, win);
			MPI_Put(&x, 1, MPI_INT, partner, 3, 1, MPI_INT, win);
			MPI_Win_complete(win);
		}
		MPI_Group_free(&peers);
	}
	MPI_Group_free(&world);
	OK("pscw");

	/* Request-based operations and a dynamic window. */
	MPI_Win dw;
	int dmem[2] = {me, -me};
	MPI_Aint addr, addrs[64];
	MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &dw);
	MPI_Win_attach(dw, dmem, sizeof dmem);
	MPI_Get_address(dmem, &addr);
	MPI_Allgather(&addr, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD);
	int pair[2] = {0, 0};
	MPI_Request rq;
	MPI_Win_lock(MPI_LOCK_SHARED, next, 0, dw);
	MPI_Rget(pair, 2, MPI_INT, next, addrs[next], 2, MPI_INT, dw, &rq);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	MPI_Win_unlock(next, dw);
	CHECK(pair[0] == next && pair[1] == -next, "rget on a dynamic window: %d %d", pair[0], pair[1]);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_detach(dw, dmem);
	MPI_Win_free(&dw);
	OK("dynamic-rget");

	/* MPICH's rule: a window without its own handler raises through
	 * MPI_COMM_WORLD's; with MPI_ERRORS_RETURN there, the code returns. */
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	int rc = MPI_Put(&me, 1, MPI_INT, np + 3, 0, 1, MPI_INT, win), cls;
	MPI_Error_class(rc, &cls);
	CHECK(cls == MPI_ERR_RANK, "put to rank %d: class %d", np + 3, cls);
	rc = MPI_Win_lock(99, 0, 0, win);
	MPI_Error_class(rc, &cls);
	CHECK(cls == MPI_ERR_LOCKTYPE, "lock type 99: class %d", cls);
	rc = MPI_Win_fence(0, MPI_WIN_NULL);
	MPI_Error_class(rc, &cls);
	CHECK(cls == MPI_ERR_WIN, "fence on MPI_WIN_NULL: class %d", cls);
	MPI_Errhandler eh;
	MPI_Win_get_errhandler(win, &eh);
	CHECK(eh == MPI_ERRORS_RETURN, "window handler %#x follows world's", eh);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
	rc = MPI_Put(&me, 1, MPI_INT, np + 3, 0, 1, MPI_INT, win);
	MPI_Error_class(rc, &cls);
	CHECK(cls == MPI_ERR_RANK, "with the window's own MPI_ERRORS_RETURN: class %d", cls);
	OK("errors");

	/* A window's own error handler and user attributes: the handler gets
	 * the window and the code; a replaced value and the window's free run
	 * the keyval's delete function. */
	MPI_Errhandler weh;
	MPI_Win_create_errhandler(win_errh, &weh);
	MPI_Win_set_errhandler(cw, weh);
	rc = MPI_Put(&me, 1, MPI_INT, np + 3, 0, 1, MPI_INT, cw);
	MPI_Error_class(rc, &cls);
	int hcls;
	MPI_Error_class(errh_code, &hcls);
	CHECK(errh_calls == 1 && errh_win == cw && hcls == MPI_ERR_RANK && cls == MPI_ERR_RANK,
	      "window handler: %d calls, window %#x (want %#x), class %d, returned class %d", errh_calls, errh_win, cw, hcls, cls);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, weh);
	MPI_Error_class(rc, &cls);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	CHECK(cls == MPI_ERR_ARG, "a window's handler on a communicator: class %d", cls);
	MPI_Errhandler_free(&weh);
	int key, v1 = 1, v2 = 2, *agot, aflag;
	MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, win_attr_delete, &key, NULL);
	MPI_Win_set_attr(cw, key, &v1);
	MPI_Win_set_attr(cw, key, &v2);
	MPI_Win_get_attr(cw, key, &agot, &aflag);
	CHECK(aflag && agot == &v2 && deleted == 1 && last_deleted == &v1, "win attr: flag %d, %d deletes", aflag, deleted);
	OK("win-errhandler-attributes");

	MPI_Win_free(&cw);
	CHECK(deleted == 2 && last_deleted == &v2, "MPI_Win_free ran %d deletes", deleted);
	MPI_Win_free_keyval(&key);
	char msg[MPI_MAX_ERROR_STRING];
	int len;
	MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
	rc = MPI_Win_free(&win);
	MPI_Error_string(rc, msg, &len);
	CHECK(rc == MPI_SUCCESS && win == MPI_WIN_NULL, "MPI_Win_free left %#x: %s", win, msg);

	/* MPI_Win_shared_query_c: the int form's answer, in MPI_Aints. */
	double *sbase, *q;
	MPI_Win sw;
	MPI_Win_allocate_shared(5 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_SELF, &sbase, &sw);
	MPI_Aint qsize, csize, cdisp;
	int qdisp;
	MPI_Win_shared_query(sw, 0, &qsize, &qdisp, &q);
	double *cq = NULL;
	MPI_Win_shared_query_c(sw, 0, &csize, &cdisp, &cq);
	CHECK(csize == qsize && csize == 5 * sizeof(double) && cdisp == qdisp && cdisp == sizeof(double) && cq == q && cq == sbase,
	      "shared_query_c: size %ld disp %ld base %p, want %ld %d %p", (long)csize, (long)cdisp, (void *)cq, (long)qsize, qdisp,
	      (void *)sbase);
	MPI_Win_free(&sw);
	OK("shared-query-c");
	if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
		MPI_Win w2;
		MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w2);
		MPI_Win_fence(0, w2);
		if (me == 0)
			MPI_Put(&me, 1, MPI_INT, np + 3, 0, 1, MPI_INT, w2); /* world is MPI_ERRORS_ARE_FATAL */
		MPI_Win_fence(0, w2);
	}
	MPI_Finalize();
	return 0;
}
