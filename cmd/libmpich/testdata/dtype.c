/* Derived datatypes through MPICH's ABI: vector, indexed, struct with
 * MPI_Get_address and MPI_BOTTOM, resized, subarray, Pack/Unpack. */
#include "check.h"

static int type_deleted;

static int type_attr_delete(MPI_Datatype t, int key, void *val, void *extra) {
	type_deleted++;
	return MPI_SUCCESS;
}

/* same_type checks that a type made by a large-count constructor (b) is
 * the one its int form made (a): the same size, extents, and bytes packed
 * from the same buffer. Both are freed. */
static void same_type(const char *what, MPI_Datatype a, MPI_Datatype b) {
	static char src[4096], pa[4096], pb[4096];
	for (int i = 0; i < (int)sizeof src; i++)
		src[i] = (char)(i * 7 + 3);
	MPI_Type_commit(&a);
	MPI_Type_commit(&b);
	int sa, sb;
	MPI_Count sc;
	MPI_Type_size(a, &sa);
	MPI_Type_size(b, &sb);
	MPI_Type_size_c(b, &sc);
	MPI_Aint la, ea, tla, tea;
	MPI_Count lb, eb, tlb, teb;
	MPI_Type_get_extent(a, &la, &ea);
	MPI_Type_get_extent_c(b, &lb, &eb);
	MPI_Type_get_true_extent(a, &tla, &tea);
	MPI_Type_get_true_extent_c(b, &tlb, &teb);
	CHECK(sa == sb && sc == sb && la == lb && ea == eb && tla == tlb && tea == teb,
	      "%s: size %d/%d/%ld, extent %ld %ld / %ld %ld, true extent %ld %ld / %ld %ld", what, sa, sb, (long)sc, (long)la, (long)ea,
	      (long)lb, (long)eb, (long)tla, (long)tea, (long)tlb, (long)teb);
	CHECK(tla >= 0 && tla + tea <= (MPI_Aint)sizeof src, "%s: the test buffer is too small", what);
	int posa = 0;
	MPI_Count posb = 0;
	memset(pa, 0, sizeof pa);
	memset(pb, 1, sizeof pb);
	MPI_Pack(src, 1, a, pa, sizeof pa, &posa, MPI_COMM_WORLD);
	MPI_Pack_c(src, 1, b, pb, sizeof pb, &posb, MPI_COMM_WORLD);
	CHECK(posa == sa && posb == sb && memcmp(pa, pb, sa) == 0, "%s: packed %d / %ld bytes, or different ones", what, posa, (long)posb);
	MPI_Type_free(&a);
	MPI_Type_free(&b);
}

/* check_decode checks MPI_Type_get_envelope_c's and _contents_c's answer
 * for t: the combiner, ni integers, nc large counts (no addresses) and nd
 * types, the first of them old; then frees t. */
static void check_decode(const char *what, MPI_Datatype t, int comb, int ni, const int *wi, int nc, const MPI_Count *wc, int nd,
			 MPI_Datatype old) {
	MPI_Count ei, ea, ec, ed;
	int ecomb;
	MPI_Type_get_envelope_c(t, &ei, &ea, &ec, &ed, &ecomb);
	CHECK(ecomb == comb && ei == ni && ea == 0 && ec == nc && ed == nd, "%s: envelope_c %d %ld %ld %ld %ld, want %d %d 0 %d %d", what,
	      ecomb, (long)ei, (long)ea, (long)ec, (long)ed, comb, ni, nc, nd);
	int gi[32];
	MPI_Aint ga[1];
	MPI_Count gc[32];
	MPI_Datatype gt[8];
	MPI_Type_get_contents_c(t, 32, 1, 32, 8, gi, ga, gc, gt);
	for (int i = 0; i < ni; i++)
		CHECK(gi[i] == wi[i], "%s: integer %d is %d, want %d", what, i, gi[i], wi[i]);
	for (int i = 0; i < nc; i++)
		CHECK(gc[i] == wc[i], "%s: large count %d is %ld, want %ld", what, i, (long)gc[i], (long)wc[i]);
	CHECK(gt[0] == old, "%s: old type %#x, want %#x", what, gt[0], old);
	MPI_Type_free(&t);
}

static int lc_calls, lc_class;
static void lc_errh(MPI_Comm *c, int *code, ...) {
	lc_calls++;
	MPI_Error_class(*code, &lc_class);
}

/* expect_class checks that rc failed with class want through the handler
 * (lc_errh) of the communicator the call named or MPI_COMM_WORLD. */
static void expect_class(const char *what, int rc, int want) {
	int cls = MPI_SUCCESS;
	if (rc != MPI_SUCCESS)
		MPI_Error_class(rc, &cls);
	CHECK(cls == want && lc_calls == 1 && lc_class == want, "%s: class %d (handler %d calls, class %d), want %d", what, cls, lc_calls,
	      lc_class, want);
	lc_calls = 0, lc_class = 0;
}

int main(int argc, char **argv) {
	start(&argc, &argv);
	int next = (me + 1) % np, prev = (me + np - 1) % np;

	/* A column of a 4x5 row-major matrix. */
	double m[4][5], col[4];
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 5; j++)
			m[i][j] = me * 100 + i * 10 + j;
	MPI_Datatype column;
	MPI_Type_vector(4, 1, 5, MPI_DOUBLE, &column);
	MPI_Type_commit(&column);
	int size;
	MPI_Aint lb, extent;
	MPI_Type_size(column, &size);
	MPI_Type_get_extent(column, &lb, &extent);
	CHECK(size == 32 && lb == 0 && extent == (3 * 5 + 1) * 8, "size %d extent %ld", size, (long)extent);
	MPI_Sendrecv(&m[0][2], 1, column, next, 0, col, 4, MPI_DOUBLE, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	CHECK(col[3] == prev * 100 + 32, "column %g", col[3]);
	int ni, na, nt, comb, iv3[3];
	MPI_Aint av[1];
	MPI_Datatype tv[1];
	MPI_Type_get_envelope(column, &ni, &na, &nt, &comb);
	CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nt == 1, "envelope %d %d %d %d", comb, ni, na, nt);
	MPI_Type_get_contents(column, 3, 0, 1, iv3, av, tv);
	CHECK(iv3[0] == 4 && iv3[1] == 1 && iv3[2] == 5 && tv[0] == MPI_DOUBLE, "contents %d %d %d %#x", iv3[0], iv3[1], iv3[2], tv[0]);
	MPI_Type_free(&column);
	CHECK(column == MPI_DATATYPE_NULL, "type not nulled");
	OK("vector");

	int blocks[3] = {1, 2, 1}, disp[3] = {0, 3, 7};
	MPI_Datatype ind;
	MPI_Type_indexed(3, blocks, disp, MPI_INT, &ind);
	MPI_Type_commit(&ind);
	int src[8], dst[8] = {0};
	for (int i = 0; i < 8; i++)
		src[i] = me * 10 + i;
	MPI_Sendrecv(src, 1, ind, next, 1, dst, 1, ind, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	CHECK(dst[0] == prev * 10 && dst[4] == prev * 10 + 4 && dst[7] == prev * 10 + 7 && dst[1] == 0, "indexed %d %d", dst[4], dst[1]);
	MPI_Type_free(&ind);
	OK("indexed");

	/* A C struct, by addresses, sent from MPI_BOTTOM. */
	struct rec { char tag; double x; int n[3]; } r = {'a' + me, me * 1.25, {me, me + 1, me + 2}}, q;
	MPI_Aint base, addr[3];
	MPI_Get_address(&r, &base);
	MPI_Get_address(&r.tag, &addr[0]);
	MPI_Get_address(&r.x, &addr[1]);
	MPI_Get_address(&r.n, &addr[2]);
	int bl[3] = {1, 1, 3};
	MPI_Datatype tys[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT}, rect, abs_t;
	MPI_Aint rel[3] = {addr[0] - base, addr[1] - base, addr[2] - base};
	MPI_Type_create_struct(3, bl, rel, tys, &rect);
	MPI_Type_commit(&rect);
	MPI_Type_create_struct(3, bl, addr, tys, &abs_t);
	MPI_Type_commit(&abs_t);
	MPI_Sendrecv(MPI_BOTTOM, 1, abs_t, next, 2, &q, 1, rect, prev, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	CHECK(q.tag == 'a' + prev && q.x == prev * 1.25 && q.n[2] == prev + 2, "struct %c %g %d", q.tag, q.x, q.n[2]);
	OK("struct-bottom");

	/* Resized to the C struct's size: an array of them. */
	MPI_Datatype recs;
	MPI_Type_create_resized(rect, 0, sizeof(struct rec), &recs);
	MPI_Type_commit(&recs);
	struct rec arr[3], got[3];
	for (int i = 0; i < 3; i++)
		arr[i] = r, arr[i].n[0] = i;
	MPI_Sendrecv(arr, 3, recs, next, 3, got, 3, recs, prev, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	CHECK(got[2].n[0] == 2 && got[2].x == prev * 1.25, "resized %d", got[2].n[0]);
	MPI_Type_free(&recs);
	MPI_Type_free(&rect);
	MPI_Type_free(&abs_t);
	OK("resized");

	/* The middle 2x2 of a 4x4 array. */
	int sizes[2] = {4, 4}, sub[2] = {2, 2}, starts[2] = {1, 1};
	MPI_Datatype mid;
	MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_INT, &mid);
	MPI_Type_commit(&mid);
	int g[16], h[4];
	for (int i = 0; i < 16; i++)
		g[i] = i;
	MPI_Sendrecv(g, 1, mid, next, 4, h, 4, MPI_INT, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	CHECK(h[0] == 5 && h[1] == 6 && h[2] == 9 && h[3] == 10, "subarray %d %d %d %d", h[0], h[1], h[2], h[3]);
	MPI_Type_free(&mid);
	OK("subarray");

	/* Pack an int and three doubles, send MPI_PACKED, unpack. */
	char pk[64];
	int pos = 0, psize;
	int iv = me;
	double dv[3] = {me, me / 2.0, -me};
	MPI_Pack_size(3, MPI_DOUBLE, MPI_COMM_WORLD, &psize);
	CHECK(psize >= 24, "pack size %d", psize);
	MPI_Pack(&iv, 1, MPI_INT, pk, sizeof pk, &pos, MPI_COMM_WORLD);
	MPI_Pack(dv, 3, MPI_DOUBLE, pk, sizeof pk, &pos, MPI_COMM_WORLD);
	char upk[64];
	MPI_Status st;
	MPI_Sendrecv(pk, pos, MPI_PACKED, next, 5, upk, sizeof upk, MPI_PACKED, prev, 5, MPI_COMM_WORLD, &st);
	int n;
	MPI_Get_count(&st, MPI_PACKED, &n);
	int ui;
	double ud[3];
	pos = 0;
	MPI_Unpack(upk, n, &pos, &ui, 1, MPI_INT, MPI_COMM_WORLD);
	MPI_Unpack(upk, n, &pos, ud, 3, MPI_DOUBLE, MPI_COMM_WORLD);
	CHECK(ui == prev && ud[1] == prev / 2.0 && pos == n, "unpack %d %g %d/%d", ui, ud[1], pos, n);
	OK("pack");

	/* Large-count and MPI-1 forms of the same calls. */
	MPI_Count csize;
	MPI_Type_size_c(MPI_DOUBLE, &csize);
	MPI_Aint ext;
	MPI_Type_extent(MPI_INT, &ext);
	CHECK(csize == 8 && ext == 4, "size_c %ld extent %ld", (long)csize, (long)ext);
	double big[3] = {me, 2, 3}, bgot[3];
	MPI_Request rq;
	MPI_Irecv_c(bgot, 3, MPI_DOUBLE, prev, 6, MPI_COMM_WORLD, &rq);
	MPI_Send_c(big, (MPI_Count)3, MPI_DOUBLE, next, 6, MPI_COMM_WORLD);
	MPI_Wait(&rq, &st);
	MPI_Count cn;
	MPI_Get_count_c(&st, MPI_DOUBLE, &cn);
	CHECK(cn == 3 && bgot[0] == prev, "count_c %ld", (long)cn);
	OK("large-count");

	/* The large-count forms of packing: the int form's bytes and
	 * positions, a count whose bytes overflow fails with MPI_ERR_COUNT. */
	char pk2[64];
	MPI_Count cpos = 0, csz;
	MPI_Pack_size_c(3, MPI_DOUBLE, MPI_COMM_WORLD, &csz);
	CHECK(csz == psize, "pack_size_c %ld want %d", (long)csz, psize);
	pos = 0;
	MPI_Pack(&iv, 1, MPI_INT, pk, sizeof pk, &pos, MPI_COMM_WORLD);
	MPI_Pack(dv, 3, MPI_DOUBLE, pk, sizeof pk, &pos, MPI_COMM_WORLD);
	MPI_Pack_c(&iv, 1, MPI_INT, pk2, sizeof pk2, &cpos, MPI_COMM_WORLD);
	MPI_Pack_c(dv, 3, MPI_DOUBLE, pk2, sizeof pk2, &cpos, MPI_COMM_WORLD);
	CHECK(cpos == pos && memcmp(pk, pk2, pos) == 0, "pack_c: position %ld want %d, or other bytes", (long)cpos, pos);
	cpos = 0;
	ui = -1;
	MPI_Unpack_c(pk2, pos, &cpos, &ui, 1, MPI_INT, MPI_COMM_WORLD);
	MPI_Unpack_c(pk2, pos, &cpos, ud, 3, MPI_DOUBLE, MPI_COMM_WORLD);
	CHECK(ui == me && ud[2] == -me && cpos == pos, "unpack_c %d %g %ld", ui, ud[2], (long)cpos);
	MPI_Errhandler lceh;
	MPI_Comm_create_errhandler(lc_errh, &lceh);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, lceh);
	cpos = 0;
	expect_class("pack_c beyond outsize", MPI_Pack_c(dv, 3, MPI_DOUBLE, pk2, 16, &cpos, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
	CHECK(cpos == 0, "a failed pack_c moved the position to %ld", (long)cpos);
	expect_class("pack_c of 2^61 doubles", MPI_Pack_c(dv, (MPI_Count)1 << 61, MPI_DOUBLE, pk2, sizeof pk2, &cpos, MPI_COMM_WORLD),
		     MPI_ERR_COUNT);
	expect_class("pack_size_c of a negative count", MPI_Pack_size_c(-1, MPI_INT, MPI_COMM_WORLD, &csz), MPI_ERR_COUNT);
	/* MPI_Buffer_attach_c's buffer serves MPI_Bsend; detach_c gives it back. */
	static char bbuf[1024 + MPI_BSEND_OVERHEAD];
	MPI_Buffer_attach_c(bbuf, sizeof bbuf);
	MPI_Bsend(&iv, 1, MPI_INT, next, 8, MPI_COMM_WORLD);
	MPI_Recv(&ui, 1, MPI_INT, prev, 8, MPI_COMM_WORLD, &st);
	void *bback;
	MPI_Count bsize;
	MPI_Buffer_detach_c(&bback, &bsize);
	CHECK(ui == prev && bback == (void *)bbuf && bsize == sizeof bbuf, "buffer_detach_c %p %ld want %p %ld", bback, (long)bsize,
	      (void *)bbuf, (long)sizeof bbuf);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	OK("large-count-pack");

	/* Each large-count constructor against its int form. */
	{
		MPI_Datatype a, b;
		int ibl[3] = {2, 1, 3}, idp[3] = {5, 0, 9};
		MPI_Count cbl[3] = {2, 1, 3}, cdp[3] = {5, 0, 9};
		MPI_Aint adp[3] = {40, 0, 72};
		MPI_Count chdp[3] = {40, 0, 72};
		MPI_Type_indexed(3, ibl, idp, MPI_INT, &a);
		MPI_Type_indexed_c(3, cbl, cdp, MPI_INT, &b);
		same_type("indexed_c", a, b);
		MPI_Type_create_hvector(3, 2, 24, MPI_INT, &a);
		MPI_Type_create_hvector_c(3, 2, 24, MPI_INT, &b);
		same_type("hvector_c", a, b);
		MPI_Type_create_hindexed(3, ibl, adp, MPI_SHORT, &a);
		MPI_Type_create_hindexed_c(3, cbl, chdp, MPI_SHORT, &b);
		same_type("hindexed_c", a, b);
		MPI_Type_create_hindexed_block(3, 2, adp, MPI_DOUBLE, &a);
		MPI_Type_create_hindexed_block_c(3, 2, chdp, MPI_DOUBLE, &b);
		same_type("hindexed_block_c", a, b);
		MPI_Type_create_indexed_block(3, 2, idp, MPI_DOUBLE, &a);
		MPI_Type_create_indexed_block_c(3, 2, cdp, MPI_DOUBLE, &b);
		same_type("indexed_block_c", a, b);
		MPI_Datatype sts[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT};
		MPI_Type_create_struct(3, ibl, adp, sts, &a);
		MPI_Type_create_struct_c(3, cbl, chdp, sts, &b);
		same_type("struct_c", a, b);
		MPI_Type_create_resized(MPI_INT, -4, 20, &a);
		MPI_Type_create_resized_c(MPI_INT, -4, 20, &b);
		same_type("resized_c", a, b);
		int isz[3] = {4, 5, 6}, isub[3] = {2, 3, 2}, ist[3] = {1, 2, 3};
		MPI_Count csz3[3] = {4, 5, 6}, csub[3] = {2, 3, 2}, cst[3] = {1, 2, 3};
		MPI_Type_create_subarray(3, isz, isub, ist, MPI_ORDER_FORTRAN, MPI_SHORT, &a);
		MPI_Type_create_subarray_c(3, csz3, csub, cst, MPI_ORDER_FORTRAN, MPI_SHORT, &b);
		same_type("subarray_c", a, b);
		int igs[2] = {6, 8}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC}, darg[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2},
		    psz[2] = {2, 2};
		MPI_Count cgs[2] = {6, 8};
		MPI_Type_create_darray(4, 1, 2, igs, dist, darg, psz, MPI_ORDER_C, MPI_INT, &a);
		MPI_Type_create_darray_c(4, 1, 2, cgs, dist, darg, psz, MPI_ORDER_C, MPI_INT, &b);
		same_type("darray_c", a, b);
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, lceh);
		expect_class("indexed_c of a negative count", MPI_Type_indexed_c(-1, cbl, cdp, MPI_INT, &b), MPI_ERR_COUNT);
		expect_class("indexed of a negative count", MPI_Type_indexed(-1, ibl, idp, MPI_INT, &b), MPI_ERR_COUNT);
		expect_class("vector_c of a negative count", MPI_Type_vector_c(-1, 1, 1, MPI_INT, &b), MPI_ERR_COUNT);
		csub[0] = 5;
		expect_class("subarray_c of a subsize beyond the size", MPI_Type_create_subarray_c(3, csz3, csub, cst, MPI_ORDER_C, MPI_INT, &b),
			     MPI_ERR_ARG);
		expect_class("struct_c of a null type", MPI_Type_create_struct_c(1, cbl, chdp, (MPI_Datatype[]){MPI_DATATYPE_NULL}, &b),
			     MPI_ERR_TYPE);
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	}
	OK("large-count-types");

	/* Decoding: a large-count constructor's type has its counts as
	 * MPI_Counts, which only the _c forms return; an int one's are ints. */
	{
		MPI_Datatype t;
		MPI_Count c3[3] = {3, 2, 24}, cv[3] = {4, 1, 5};
		int iv3w[3] = {4, 1, 5};
		MPI_Type_vector_c(4, 1, 5, MPI_DOUBLE, &t);
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, lceh);
		int ni, na, nt, comb, iv8[8];
		MPI_Aint av1[1];
		MPI_Datatype tv1[1];
		expect_class("get_envelope of a vector_c", MPI_Type_get_envelope(t, &ni, &na, &nt, &comb), MPI_ERR_TYPE);
		expect_class("get_contents of a vector_c", MPI_Type_get_contents(t, 8, 1, 1, iv8, av1, tv1), MPI_ERR_TYPE);
		MPI_Count gc[3];
		expect_class("get_contents_c with room for 2 counts", MPI_Type_get_contents_c(t, 8, 1, 2, 1, iv8, av1, gc, tv1), MPI_ERR_ARG);
		MPI_Count ei, ea, ec, ed;
		expect_class("get_contents_c of MPI_INT", MPI_Type_get_contents_c(MPI_INT, 8, 1, 2, 1, iv8, av1, gc, tv1), MPI_ERR_TYPE);
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
		MPI_Type_get_envelope_c(MPI_INT, &ei, &ea, &ec, &ed, &comb);
		CHECK(comb == MPI_COMBINER_NAMED && ei == 0 && ea == 0 && ec == 0 && ed == 0, "envelope_c of MPI_INT: %d", comb);
		check_decode("vector_c", t, MPI_COMBINER_VECTOR, 0, NULL, 3, cv, 1, MPI_DOUBLE);
		MPI_Type_vector(4, 1, 5, MPI_DOUBLE, &t);
		check_decode("vector", t, MPI_COMBINER_VECTOR, 3, iv3w, 0, NULL, 1, MPI_DOUBLE);
		MPI_Type_create_hvector_c(3, 2, 24, MPI_INT, &t);
		check_decode("hvector_c", t, MPI_COMBINER_HVECTOR, 0, NULL, 3, c3, 1, MPI_INT);
		MPI_Count sbl[3] = {2, 1, 3}, sdp[3] = {40, 0, 72}, sw[7] = {3, 2, 1, 3, 40, 0, 72};
		MPI_Datatype sts[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT};
		MPI_Type_create_struct_c(3, sbl, sdp, sts, &t);
		check_decode("struct_c", t, MPI_COMBINER_STRUCT, 0, NULL, 7, sw, 3, MPI_CHAR);
		MPI_Count ssz[3] = {4, 5, 6}, ssub[3] = {2, 3, 2}, sst[3] = {1, 2, 3}, saw[9] = {4, 5, 6, 2, 3, 2, 1, 2, 3};
		int saiw[2] = {3, MPI_ORDER_FORTRAN};
		MPI_Type_create_subarray_c(3, ssz, ssub, sst, MPI_ORDER_FORTRAN, MPI_SHORT, &t);
		check_decode("subarray_c", t, MPI_COMBINER_SUBARRAY, 2, saiw, 9, saw, 1, MPI_SHORT);
		MPI_Count dgs[2] = {6, 8};
		int dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC}, darg[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, psz[2] = {2, 2};
		int daiw[12] = {4, 1, 2, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_DFLT_DARG, 2, 2, 2, MPI_ORDER_C};
		MPI_Type_create_darray_c(4, 1, 2, dgs, dist, darg, psz, MPI_ORDER_C, MPI_INT, &t);
		check_decode("darray_c", t, MPI_COMBINER_DARRAY, 10, daiw, 2, dgs, 1, MPI_INT);
		MPI_Count rw[2] = {-4, 20};
		MPI_Type_create_resized_c(MPI_INT, -4, 20, &t);
		check_decode("resized_c", t, MPI_COMBINER_RESIZED, 0, NULL, 2, rw, 1, MPI_INT);
	}
	MPI_Errhandler_free(&lceh);
	OK("large-count-decode");

	/* MPI_Type_match_size (ScaLAPACK's BLACS asks it): a predefined type of
	 * the class and size, usable in a transfer; no type for a size the
	 * class lacks. */
	MPI_Datatype r8, i4;
	MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &r8);
	MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 4, &i4);
	int r8size, i4size;
	MPI_Type_size(r8, &r8size);
	MPI_Type_size(i4, &i4size);
	double dsend = me + 0.5, drecv = -1;
	MPI_Sendrecv(&dsend, 1, r8, next, 7, &drecv, 1, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD, &st);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Datatype none;
	int rc = MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 3, &none), cls;
	MPI_Error_class(rc, &cls);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	CHECK(r8 == MPI_REAL8 && i4 == MPI_INTEGER4 && r8size == 8 && i4size == 4 && drecv == prev + 0.5 && cls == MPI_ERR_ARG,
	      "match_size: %#x %#x sizes %d %d recv %g class %d", r8, i4, r8size, i4size, drecv, cls);
	OK("match-size");

	/* Datatype attributes: MPI_Type_dup copies what the copy function
	 * allows, the dup's free and a delete run the delete function. */
	int tkey, tval = 42, *tgot, tflag;
	MPI_Datatype vec, vdup;
	MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
	MPI_Type_create_keyval(MPI_TYPE_DUP_FN, type_attr_delete, &tkey, NULL);
	MPI_Type_set_attr(vec, tkey, &tval);
	MPI_Type_dup(vec, &vdup);
	MPI_Type_get_attr(vdup, tkey, &tgot, &tflag);
	CHECK(tflag && tgot == &tval, "dup's attribute: flag %d", tflag);
	MPI_Type_free(&vdup);
	CHECK(type_deleted == 1, "MPI_Type_free ran %d deletes", type_deleted);
	MPI_Type_get_attr(MPI_INT, tkey, &tgot, &tflag);
	CHECK(!tflag, "MPI_INT has the vector's attribute");
	MPI_Type_delete_attr(vec, tkey);
	MPI_Type_get_attr(vec, tkey, &tgot, &tflag);
	CHECK(!tflag && type_deleted == 2, "after delete: flag %d, %d deletes", tflag, type_deleted);
	MPI_Type_free_keyval(&tkey);
	MPI_Type_free(&vec);
	OK("type-attributes");

	MPI_Finalize();
	return 0;
}
