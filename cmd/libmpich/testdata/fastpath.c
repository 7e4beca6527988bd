/* The C fast path of MPI_Send and MPI_Recv (fastpath.c) mixed with
 * everything that must keep it off or send it back to the Go side:
 * non-blocking calls, unexpected messages, ANY_SOURCE and ANY_TAG
 * receives, tags that do not match the head of the ring, truncation, a
 * ring that wraps and fills. Every message carries its sender's sequence
 * number, and every receive checks it: a fast path that overtook, lost or
 * duplicated a message fails a check. Rank 1 receives, ranks 0 and 2 send.
 * At the end every rank prints how many messages its fast path moved (the
 * library's adimpi_fast counters; 0 with another MPI or device). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include "check.h"
#include "../fastpath.h"

/* recv1 receives one int from src with tag and checks value and status. */
static void recv1(int src, int tag, int want, int want_src, int want_tag) {
	int v = -1, n = -1;
	MPI_Status st;
	CHECK(MPI_Recv(&v, 1, MPI_INT, src, tag, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "recv from %d tag %d", src, tag);
	MPI_Get_count(&st, MPI_INT, &n);
	CHECK(v == want && n == 1 && st.MPI_SOURCE == want_src && st.MPI_TAG == want_tag,
	      "src %d tag %d: got %d (count %d, source %d, tag %d), want %d from %d tag %d", src, tag, v, n, st.MPI_SOURCE,
	      st.MPI_TAG, want, want_src, want_tag);
}

static void send1(int v, int dest, int tag) { CHECK(MPI_Send(&v, 1, MPI_INT, dest, tag, MPI_COMM_WORLD) == MPI_SUCCESS, "send"); }

int main(int argc, char **argv) {
	int level;
	if (argc > 1 && strcmp(argv[1], "multiple") == 0) {
		/* Threads may call at once: the fast path must stay off. */
		setvbuf(stdout, NULL, _IOLBF, 0);
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
		MPI_Comm_rank(MPI_COMM_WORLD, &me);
		MPI_Comm_size(MPI_COMM_WORLD, &np);
		CHECK(level == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE asked, %d provided", level);
	} else
		start(&argc, &argv);
	MPI_Query_thread(&level);
	printf("rank %d thread level %d\n", me, level);
	CHECK(np == 3, "run me with 3 ranks, not %d", np);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	const int N = 1000;

	/* In order, with status and count, through a ring that wraps many
	 * times; every 7th send and every 5th receive non-blocking. */
	if (me == 0) {
		for (int i = 0; i < N; i++) {
			if (i % 7 == 3) {
				MPI_Request r;
				MPI_Isend(&i, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &r);
				MPI_Wait(&r, MPI_STATUS_IGNORE);
			} else
				send1(i, 1, 1);
		}
	} else if (me == 1) {
		for (int i = 0; i < N; i++) {
			if (i % 5 == 4) {
				int v = -1;
				MPI_Request r;
				MPI_Irecv(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r);
				MPI_Wait(&r, MPI_STATUS_IGNORE);
				CHECK(v == i, "irecv got %d, want %d", v, i);
			} else
				recv1(0, 1, i, 0, 1);
		}
	}
	OK("in-order");

	/* A tag that does not match the ring's head: the Go side takes the
	 * head as an unexpected message, which the next receive of its tag
	 * must get before the later message of that tag still in the ring. */
	if (me == 0) {
		send1(100, 1, 7);
		send1(101, 1, 8);
		send1(102, 1, 7);
		send1(103, 1, 7);
	} else if (me == 1) {
		recv1(0, 8, 101, 0, 8);
		recv1(0, 7, 100, 0, 7);
		recv1(0, MPI_ANY_TAG, 102, 0, 7);
		recv1(0, 7, 103, 0, 7);
	}
	OK("unexpected-first");

	/* Two senders: ANY_SOURCE receives (the Go side's) between specific
	 * ones (the fast path's, when nothing waits): each sender's messages
	 * still arrive in its order. */
	if (me != 1) {
		for (int i = 0; i < N; i++)
			send1(i, 1, 3);
	} else {
		int next[3] = {0, 0, 0};
		for (int i = 0; i < 2 * N; i++) {
			int v = -1, src = i % 3 == 0 ? MPI_ANY_SOURCE : (i % 3 == 1 ? 0 : 2);
			if (src >= 0 && next[src] == N)
				src = 2 - src;
			MPI_Status st;
			CHECK(MPI_Recv(&v, 1, MPI_INT, src, 3, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "recv %d", i);
			CHECK(st.MPI_SOURCE == 0 || st.MPI_SOURCE == 2, "source %d", st.MPI_SOURCE);
			CHECK(v == next[st.MPI_SOURCE], "from %d got %d, want %d", st.MPI_SOURCE, v, next[st.MPI_SOURCE]);
			next[st.MPI_SOURCE]++;
		}
	}
	OK("any-source");

	/* A pre-posted receive keeps the fast path off: the send after it
	 * matches the posted receive, not the blocking one. */
	if (me == 0) {
		MPI_Barrier(MPI_COMM_WORLD);
		send1(200, 1, 4);
		send1(201, 1, 4);
	} else if (me == 1) {
		int v = -1;
		MPI_Request r;
		MPI_Irecv(&v, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, &r);
		MPI_Barrier(MPI_COMM_WORLD);
		recv1(0, 4, 201, 0, 4);
		MPI_Wait(&r, MPI_STATUS_IGNORE);
		CHECK(v == 200, "posted receive got %d", v);
	} else
		MPI_Barrier(MPI_COMM_WORLD);
	OK("posted-first");

	/* Truncation, a zero-byte message, a byte count, a signature the fast
	 * path does not take: errors and statuses as on the Go side. */
	if (me == 0) {
		int two[2] = {300, 301};
		MPI_Send(two, 2, MPI_INT, 1, 5, MPI_COMM_WORLD);
		send1(302, 1, 5);
		MPI_Send(NULL, 0, MPI_INT, 1, 5, MPI_COMM_WORLD);
		MPI_Send(two, 2, MPI_INT, 1, 5, MPI_COMM_WORLD);
		double d = 1.5;
		MPI_Send(&d, 1, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD);
		send1(303, 1, 5);
	} else if (me == 1) {
		int one = -1, n = -1, cls = -1, len;
		char msg[MPI_MAX_ERROR_STRING];
		MPI_Status st;
		int rc = MPI_Recv(&one, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, &st);
		MPI_Error_class(rc, &cls);
		MPI_Error_string(rc, msg, &len);
		CHECK(cls == MPI_ERR_TRUNCATE && strstr(msg, "MPI_Recv") && strstr(msg, "MPI_ERR_TRUNCATE"), "truncation: class %d, %s", cls, msg);
		recv1(0, 5, 302, 0, 5);
		int buf[2] = {-1, -1};
		MPI_Recv(buf, 2, MPI_INT, 0, 5, MPI_COMM_WORLD, &st);
		MPI_Get_count(&st, MPI_INT, &n);
		CHECK(n == 0 && buf[0] == -1, "empty message: count %d", n);
		MPI_Recv(buf, 2, MPI_INT, 0, 5, MPI_COMM_WORLD, &st);
		MPI_Get_count(&st, MPI_BYTE, &n);
		CHECK(n == 8 && buf[0] == 300 && buf[1] == 301, "two ints: %d bytes, %d %d", n, buf[0], buf[1]);
		double d = 0;
		MPI_Recv(&d, 1, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, &st);
		CHECK(d == 1.5, "double %g", d);
		recv1(0, 5, 303, 0, 5);
	}
	OK("truncate-count");

	/* Ping-pong: the latency path, both ways. */
	for (int i = 0; i < N; i++) {
		if (me == 0) {
			send1(i, 1, 6);
			recv1(1, 6, i + 1, 1, 6);
		} else if (me == 1) {
			int v = -1;
			MPI_Recv(&v, 1, MPI_INT, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			CHECK(v == i, "ping %d", v);
			send1(v + 1, 0, 6);
		}
	}
	OK("ping-pong");

	/* Every size the fast path moves, 0 to 8 bytes, both ways, into a
	 * larger buffer: each byte of the message arrives, the count is the
	 * message's, and the bytes past it stay as they were (a device may
	 * write a whole word into the peer's receive buffer; only n bytes may
	 * reach the program's). */
	for (int i = 0; i < 200 && me < 2; i++) {
		for (int n = 0; n <= 8; n++) {
			unsigned char out[8], in[16];
			for (int round = 0; round < 2; round++) {
				int sender = (me == round);
				for (int k = 0; k < 8; k++)
					out[k] = (unsigned char)(i * 31 + n * 7 + k * 13 + round + 1);
				if (sender)
					CHECK(MPI_Send(out, n, MPI_BYTE, 1 - me, 7, MPI_COMM_WORLD) == MPI_SUCCESS, "send %d bytes", n);
				else {
					MPI_Status st;
					int got = -1;
					memset(in, 0xee, sizeof in);
					CHECK(MPI_Recv(in, sizeof in, MPI_BYTE, 1 - me, 7, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "recv %d bytes", n);
					MPI_Get_count(&st, MPI_BYTE, &got);
					CHECK(got == n && st.MPI_SOURCE == 1 - me && st.MPI_TAG == 7, "size %d: count %d source %d tag %d", n, got,
					      st.MPI_SOURCE, st.MPI_TAG);
					for (int k = 0; k < (int)sizeof in; k++)
						CHECK(in[k] == (k < n ? out[k] : 0xee), "size %d round %d: byte %d is %#x", n, i, k, in[k]);
				}
			}
		}
	}
	OK("sizes");

	adimpi_fast_state *f = dlsym(RTLD_DEFAULT, "adimpi_fast");
	printf("rank %d fast sent %llu received %llu\n", me, f ? (unsigned long long)f->sent : 0ULL,
	       f ? (unsigned long long)f->received : 0ULL);
	MPI_Finalize();
	return 0;
}
