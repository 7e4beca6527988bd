/* Communicators, groups, topologies and attributes through MPICH's ABI. */
#include "check.h"

static int deleted, errh_calls, errh_class;
static void count_errh(MPI_Comm *c, int *code, ...) {
	errh_calls++;
	MPI_Error_class(*code, &errh_class);
}

/* expect_class checks that rc failed with class want and that the
 * communicator's handler (count_errh) saw it. */
static void expect_class(const char *what, int rc, int want) {
	int cls = MPI_SUCCESS;
	if (rc != MPI_SUCCESS)
		MPI_Error_class(rc, &cls);
	CHECK(cls == want && errh_calls == 1 && errh_class == want, "%s: class %d (handler %d calls, class %d), want %d", what, cls,
	      errh_calls, errh_class, want);
	errh_calls = 0, errh_class = 0;
}
static int del_fn(MPI_Comm c, int key, void *val, void *extra) {
	deleted += (int)(long)val;
	return MPI_SUCCESS;
}

int main(int argc, char **argv) {
	start(&argc, &argv);

	/* Split into even and odd ranks, reversed. */
	MPI_Comm half;
	MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &half);
	int hr, hs;
	MPI_Comm_rank(half, &hr);
	MPI_Comm_size(half, &hs);
	CHECK(hs == (np + 1 - me % 2) / 2, "split size %d", hs);
	int sum;
	MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, half);
	int want = 0;
	for (int i = me % 2; i < np; i += 2)
		want += i;
	CHECK(sum == want, "sum in half %d want %d", sum, want);
	CHECK((unsigned)half >> 30 == 2 && ((unsigned)half >> 26 & 0xf) == 1, "handle kind bits %#x", half);
	OK("split");

	MPI_Comm dup;
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	int res;
	MPI_Comm_compare(MPI_COMM_WORLD, dup, &res);
	CHECK(res == MPI_CONGRUENT, "compare %d", res);
	MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &res);
	CHECK(res == MPI_IDENT, "compare self %d", res);
	MPI_Comm_set_name(dup, "my-dup");
	char name[MPI_MAX_OBJECT_NAME];
	int len;
	MPI_Comm_get_name(dup, name, &len);
	CHECK(strcmp(name, "my-dup") == 0 && len == 6, "name %s", name);
	OK("dup");

	/* Groups: the first half of world, translated. */
	MPI_Group world, first;
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	int k = (np + 1) / 2, ranks[64];
	for (int i = 0; i < k; i++)
		ranks[i] = k - 1 - i;
	MPI_Group_incl(world, k, ranks, &first);
	int gs, gr;
	MPI_Group_size(first, &gs);
	MPI_Group_rank(first, &gr);
	CHECK(gs == k && gr == (me < k ? k - 1 - me : MPI_UNDEFINED), "group %d %d", gs, gr);
	int zero = 0, t;
	MPI_Group_translate_ranks(first, 1, &zero, world, &t);
	CHECK(t == k - 1, "translate %d", t);
	MPI_Comm fc;
	MPI_Comm_create(MPI_COMM_WORLD, first, &fc);
	CHECK((me < k) == (fc != MPI_COMM_NULL), "comm_create");
	if (fc != MPI_COMM_NULL) {
		int fr;
		MPI_Comm_rank(fc, &fr);
		CHECK(fr == k - 1 - me, "create rank %d", fr);
		MPI_Comm_free(&fc);
		CHECK(fc == MPI_COMM_NULL, "free");
	}
	MPI_Group empty;
	MPI_Group_excl(first, k, ranks, &empty);
	CHECK(empty == MPI_GROUP_EMPTY, "empty group %#x", empty);
	MPI_Group_free(&first);
	MPI_Group_free(&world);
	OK("groups");

	/* A periodic ring as a 1-D Cartesian topology. */
	int dims[2] = {0, 0}, periods[2] = {1, 0};
	MPI_Dims_create(np, 2, dims);
	CHECK(dims[0] * dims[1] == np, "dims %d %d", dims[0], dims[1]);
	MPI_Comm cart;
	int d1 = np;
	MPI_Cart_create(MPI_COMM_WORLD, 1, &d1, periods, 0, &cart);
	int src, dst, topo;
	MPI_Topo_test(cart, &topo);
	CHECK(topo == MPI_CART, "topo %d", topo);
	MPI_Cart_shift(cart, 0, 1, &src, &dst);
	CHECK(src == (me + np - 1) % np && dst == (me + 1) % np, "shift %d %d", src, dst);
	int coords;
	MPI_Cart_coords(cart, me, 1, &coords);
	CHECK(coords == me, "coords %d", coords);
	int nb[2];
	MPI_Neighbor_allgather(&me, 1, MPI_INT, nb, 1, MPI_INT, cart);
	CHECK(nb[0] == src && nb[1] == dst, "neighbor allgather %d %d", nb[0], nb[1]);
	/* MPI_Cart_map: ranks are kept, the ones beyond the grid left out. */
	int mapped, grid = np - 1;
	MPI_Cart_map(MPI_COMM_WORLD, 1, &grid, periods, &mapped);
	CHECK(mapped == (me < np - 1 ? me : MPI_UNDEFINED), "cart_map %d", mapped);
	MPI_Cart_map(MPI_COMM_WORLD, 1, &np, periods, &mapped);
	CHECK(mapped == me, "cart_map of all %d", mapped);
	MPI_Errhandler eh;
	MPI_Comm_create_errhandler(count_errh, &eh);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
	grid = np + 1;
	expect_class("cart_map too large", MPI_Cart_map(MPI_COMM_WORLD, 1, &grid, periods, &mapped), MPI_ERR_DIMS);
	grid = 0;
	expect_class("cart_map zero dim", MPI_Cart_map(MPI_COMM_WORLD, 1, &grid, periods, &mapped), MPI_ERR_DIMS);
	int gn, ge;
	MPI_Comm_set_errhandler(cart, eh);
	expect_class("graphdims_get of a cart", MPI_Graphdims_get(cart, &gn, &ge), MPI_ERR_TOPOLOGY);
	MPI_Comm_free(&cart);
	OK("cart");

	/* A graph in which node i has min(i+1, np-1) neighbours, the next
	 * ones round the ring: MPI_Graph_get returns exactly what
	 * MPI_Graph_create was given. */
	int gindex[64], gedges[64 * 64], ne = 0;
	for (int i = 0; i < np; i++) {
		int deg = i + 1 < np - 1 ? i + 1 : np - 1;
		for (int j = 1; j <= deg; j++)
			gedges[ne++] = (i + j) % np;
		gindex[i] = ne;
	}
	MPI_Comm graph;
	MPI_Graph_create(MPI_COMM_WORLD, np, gindex, gedges, 0, &graph);
	MPI_Graphdims_get(graph, &gn, &ge);
	CHECK(gn == np && ge == ne, "graphdims %d %d want %d %d", gn, ge, np, ne);
	int gi[64], gg[64 * 64];
	MPI_Graph_get(graph, np, ne, gi, gg);
	for (int i = 0; i < np; i++)
		CHECK(gi[i] == gindex[i], "graph_get index[%d] %d want %d", i, gi[i], gindex[i]);
	for (int i = 0; i < ne; i++)
		CHECK(gg[i] == gedges[i], "graph_get edges[%d] %d want %d", i, gg[i], gedges[i]);
	/* Short arrays get what fits, nothing beyond. */
	gi[0] = gi[1] = gg[0] = gg[1] = -7;
	MPI_Graph_get(graph, 1, 1, gi, gg);
	CHECK(gi[0] == gindex[0] && gi[1] == -7 && gg[0] == gedges[0] && gg[1] == -7, "graph_get short: %d %d %d %d", gi[0], gi[1],
	      gg[0], gg[1]);
	int nbc;
	MPI_Graph_neighbors_count(graph, me, &nbc);
	CHECK(nbc == gindex[me] - (me ? gindex[me - 1] : 0), "neighbours %d", nbc);
	/* MPI_Graph_map of rings of np-1 and np+1 nodes. */
	int rindex[65], redges[65];
	for (int i = 0; i <= np; i++)
		rindex[i] = i + 1, redges[i] = (i + 1) % (np - 1);
	MPI_Graph_map(MPI_COMM_WORLD, np - 1, rindex, redges, &mapped);
	CHECK(mapped == (me < np - 1 ? me : MPI_UNDEFINED), "graph_map %d", mapped);
	for (int i = 0; i <= np; i++)
		redges[i] = (i + 1) % (np + 1);
	expect_class("graph_map too large", MPI_Graph_map(MPI_COMM_WORLD, np + 1, rindex, redges, &mapped), MPI_ERR_ARG);
	expect_class("graph_get of world", MPI_Graph_get(MPI_COMM_WORLD, np, ne, gi, gg), MPI_ERR_TOPOLOGY);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	MPI_Comm_free(&graph);
	OK("graph");

	/* Attributes: MPI_TAG_UB, and a keyval with a delete callback. */
	int *ub, flag;
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
	CHECK(flag && *ub >= 32767, "tag ub %d", flag ? *ub : -1);
	int key;
	MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_fn, &key, NULL);
	MPI_Comm_set_attr(dup, key, (void *)7L);
	void *val;
	MPI_Comm_get_attr(dup, key, &val, &flag);
	CHECK(flag && (long)val == 7, "attr %ld", (long)val);
	MPI_Comm_free(&dup);
	CHECK(deleted == 7, "delete callback ran %d", deleted);
	MPI_Comm_free_keyval(&key);
	int *ub1;
	MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &ub1, &flag);
	CHECK(flag && *ub1 == *ub, "MPI-1 attr_get");
	OK("attributes");

	MPI_Info info;
	MPI_Info_create(&info);
	MPI_Info_set(info, "colour", "blue");
	char v[MPI_MAX_INFO_VAL];
	int nk;
	MPI_Info_get(info, "colour", MPI_MAX_INFO_VAL - 1, v, &flag);
	MPI_Info_get_nkeys(info, &nk);
	CHECK(flag && strcmp(v, "blue") == 0 && nk == 1, "info %d %s %d", flag, v, nk);
	/* MPI-4's MPI_Info_get_string: the size the value needs, truncation
	 * to the buffer, nothing touched for an absent key or a zero size. */
	int bl = sizeof v;
	MPI_Info_get_string(info, "colour", &bl, v, &flag);
	CHECK(flag && bl == 5 && strcmp(v, "blue") == 0, "get_string %d %d %s", flag, bl, v);
	memset(v, 'x', 8);
	bl = 3;
	MPI_Info_get_string(info, "colour", &bl, v, &flag);
	CHECK(flag && bl == 5 && memcmp(v, "bl\0x", 4) == 0, "get_string truncated %d %d %.4s", flag, bl, v);
	bl = 0;
	MPI_Info_get_string(info, "colour", &bl, v, &flag);
	CHECK(flag && bl == 5 && v[0] == 'b' && v[3] == 'x', "get_string of buflen 0: %d %d", flag, bl);
	bl = 7;
	MPI_Info_get_string(info, "shape", &bl, v, &flag);
	CHECK(!flag && bl == 7 && v[0] == 'b', "get_string of an absent key: %d %d", flag, bl);
	char longkey[MPI_MAX_INFO_KEY + 2];
	memset(longkey, 'k', sizeof longkey - 1);
	longkey[sizeof longkey - 1] = 0;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
	expect_class("get_string of a long key", MPI_Info_get_string(info, longkey, &bl, v, &flag), MPI_ERR_INFO_KEY);
	expect_class("get of a long key", MPI_Info_get(info, longkey, 10, v, &flag), MPI_ERR_INFO_KEY);
	expect_class("set of an empty key", MPI_Info_set(info, "", "x"), MPI_ERR_INFO_KEY);
	static char longval[MPI_MAX_INFO_VAL + 2];
	memset(longval, 'v', sizeof longval - 1);
	expect_class("set of a long value", MPI_Info_set(info, "colour", longval), MPI_ERR_INFO_VALUE);
	expect_class("nthkey beyond the keys", MPI_Info_get_nthkey(info, 5, v), MPI_ERR_ARG);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	MPI_Info_free(&info);
	CHECK(info == MPI_INFO_NULL, "info not nulled");
	MPI_Comm parent;
	MPI_Comm_get_parent(&parent);
	CHECK(parent == MPI_COMM_NULL, "parent %#x", parent);
	double *mem;
	MPI_Alloc_mem(1024 * sizeof(double), MPI_INFO_NULL, &mem);
	mem[1023] = 1;
	MPI_Free_mem(mem);
	OK("info-mem");

	/* Communicator hints: dup_with_info's, added to and replaced by
	 * set_info, copied by dup, none on world or through MPI_INFO_NULL. */
	MPI_Info hints, used;
	MPI_Info_create(&hints);
	MPI_Info_set(hints, "mpi_assert_no_any_tag", "true");
	MPI_Info_set(hints, "adimpi_test", "1");
	MPI_Comm hc, hd, hn;
	MPI_Comm_dup_with_info(MPI_COMM_WORLD, hints, &hc);
	MPI_Info_free(&hints);
	MPI_Comm_get_info(hc, &used);
	MPI_Info_get_nkeys(used, &nk);
	bl = sizeof v;
	MPI_Info_get_string(used, "adimpi_test", &bl, v, &flag);
	CHECK(nk == 2 && flag && strcmp(v, "1") == 0, "dup_with_info's hints: %d keys, %d %s", nk, flag, v);
	MPI_Info_free(&used);
	MPI_Info_create(&hints);
	MPI_Info_set(hints, "adimpi_test", "2");
	MPI_Info_set(hints, "mpi_assert_exact_length", "true");
	MPI_Comm_set_info(hc, hints);
	MPI_Info_free(&hints);
	MPI_Comm_dup(hc, &hd);
	MPI_Comm_dup_with_info(hc, MPI_INFO_NULL, &hn);
	MPI_Comm hs_[2] = {hc, hd};
	for (int i = 0; i < 2; i++) {
		MPI_Comm_get_info(hs_[i], &used);
		MPI_Info_get_nkeys(used, &nk);
		bl = sizeof v;
		MPI_Info_get_string(used, "adimpi_test", &bl, v, &flag);
		CHECK(nk == 3 && flag && strcmp(v, "2") == 0, "%s's hints: %d keys, %d %s", i ? "dup" : "set_info", nk, flag, v);
		MPI_Info_free(&used);
	}
	MPI_Comm_get_info(hn, &used);
	MPI_Info_get_nkeys(used, &nk);
	CHECK(nk == 0, "dup_with_info(MPI_INFO_NULL) has %d hints", nk);
	MPI_Info_free(&used);
	MPI_Comm_get_info(MPI_COMM_WORLD, &used);
	MPI_Info_get_string(used, "adimpi_test", &bl, v, &flag);
	CHECK(!flag, "world has the dup's hint");
	MPI_Info_free(&used);
	MPI_Comm_set_errhandler(hc, eh);
	expect_class("set_info of MPI_INFO_NULL", MPI_Comm_set_info(hc, MPI_INFO_NULL), MPI_ERR_INFO);
	MPI_Comm_free(&hn);
	MPI_Comm_free(&hd);
	MPI_Comm_free(&hc);
	MPI_Errhandler_free(&eh);
	OK("comm-info");

	/* An intercommunicator between the halves, merged back. */
	if (np >= 2) {
		MPI_Comm inter, merged;
		/* Each half's rank 0 is its highest world rank (split by -me). */
		int even = (np - 1) / 2 * 2, odd = np / 2 * 2 - 1;
		MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, me % 2 ? even : odd, 99, &inter);
		int flag2, rs;
		MPI_Comm_test_inter(inter, &flag2);
		MPI_Comm_remote_size(inter, &rs);
		CHECK(flag2 && rs == np - hs, "inter %d %d", flag2, rs);
		MPI_Intercomm_merge(inter, me % 2, &merged);
		int ms;
		MPI_Comm_size(merged, &ms);
		CHECK(ms == np, "merged %d", ms);
		MPI_Comm_free(&merged);
		MPI_Comm_free(&inter);
	}
	OK("intercomm");
	MPI_Comm_free(&half);

	MPI_Finalize();
	return 0;
}
