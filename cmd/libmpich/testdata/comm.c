/* Communicators, groups, topologies and attributes through MPICH's ABI. */
#include "check.h"

static int deleted;
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
	MPI_Comm_free(&cart);
	OK("cart");

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
