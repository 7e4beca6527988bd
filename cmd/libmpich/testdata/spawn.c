/* Dynamic processes through MPICH's ABI: MPI_Comm_spawn of this program
 * (the children talk to their parents over the intercommunicator and
 * disconnect), ports with the name service between the two halves of the
 * job, and MPI_Comm_join over a TCP socket. */
#include "check.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static void child(MPI_Comm parent) {
	int rsize, value, appnum, *ap, flag;
	MPI_Comm_remote_size(parent, &rsize);
	MPI_Bcast(&value, 1, MPI_INT, 0, parent); /* from the parents' root */
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &ap, &flag);
	appnum = flag ? *ap : -1;
	int reply = value + 10 * np + me + 100 * appnum;
	if (me == 0)
		MPI_Send(&reply, 1, MPI_INT, 0, 5, parent);
	MPI_Comm_disconnect(&parent);
	CHECK(parent == MPI_COMM_NULL, "disconnect left %#x", parent);
	MPI_Finalize();
}

int main(int argc, char **argv) {
	start(&argc, &argv);
	MPI_Comm parent;
	MPI_Comm_get_parent(&parent);
	if (parent != MPI_COMM_NULL) {
		child(parent);
		return 0;
	}

	/* Spawn two children running this program. */
	char *args[] = {"child", NULL};
	int codes[2] = {-1, -1};
	MPI_Comm inter;
	MPI_Comm_spawn(argv[0], args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, codes);
	int test, rsize;
	MPI_Comm_test_inter(inter, &test);
	MPI_Comm_remote_size(inter, &rsize);
	CHECK(test && rsize == 2 && codes[0] == MPI_SUCCESS && codes[1] == MPI_SUCCESS, "spawn: inter %d, remote size %d, codes %d %d",
	      test, rsize, codes[0], codes[1]);
	int value = 7;
	MPI_Bcast(&value, 1, MPI_INT, me == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
	if (me == 0) {
		int reply;
		MPI_Recv(&reply, 1, MPI_INT, 0, 5, inter, MPI_STATUS_IGNORE);
		CHECK(reply == 7 + 20, "child's reply %d want %d", reply, 27);
	}
	MPI_Comm_disconnect(&inter);
	OK("spawn");

	/* Ports and names: the even ranks accept, the odd ranks connect. */
	if (np >= 2) {
		MPI_Comm half, pair;
		MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half);
		char port[MPI_MAX_PORT_NAME] = "", found[MPI_MAX_PORT_NAME] = "", service[64];
		snprintf(service, sizeof service, "adimpi-c-spawn-%d", (int)getppid());
		if (me == 0) {
			MPI_Open_port(MPI_INFO_NULL, port);
			MPI_Publish_name(service, MPI_INFO_NULL, port);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		if (me % 2 == 0) {
			MPI_Comm_accept(port, MPI_INFO_NULL, 0, half, &pair);
		} else {
			if (me == 1)
				MPI_Lookup_name(service, MPI_INFO_NULL, found);
			MPI_Comm_connect(found, MPI_INFO_NULL, 0, half, &pair);
		}
		int lsize, psize, hsize;
		MPI_Comm_size(half, &hsize);
		MPI_Comm_remote_size(pair, &psize);
		MPI_Comm_size(pair, &lsize);
		CHECK(lsize == hsize && psize == np - hsize, "accept/connect: sizes %d %d", lsize, psize);
		int mine = 1000 + me, theirs = -1;
		if (me < 2)
			MPI_Sendrecv(&mine, 1, MPI_INT, 0, 9, &theirs, 1, MPI_INT, 0, 9, pair, MPI_STATUS_IGNORE);
		if (me < 2)
			CHECK(theirs == 1000 + 1 - me, "over the port: %d", theirs);
		MPI_Comm_disconnect(&pair);
		MPI_Barrier(MPI_COMM_WORLD);
		if (me == 0) {
			MPI_Unpublish_name(service, MPI_INFO_NULL, port);
			MPI_Close_port(port);
		}
		MPI_Comm_free(&half);
		OK("ports-names");

		/* MPI_Comm_join between ranks 0 and 1 over a loopback socket. */
		if (me < 2) {
			int fd;
			struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
			socklen_t alen = sizeof a;
			if (me == 0) {
				int ln = socket(AF_INET, SOCK_STREAM, 0);
				CHECK(bind(ln, (void *)&a, sizeof a) == 0 && listen(ln, 1) == 0, "listen");
				getsockname(ln, (void *)&a, &alen);
				int p = ntohs(a.sin_port);
				MPI_Send(&p, 1, MPI_INT, 1, 3, MPI_COMM_WORLD);
				fd = accept(ln, NULL, NULL);
				close(ln);
			} else {
				int p;
				MPI_Recv(&p, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				a.sin_port = htons(p);
				fd = socket(AF_INET, SOCK_STREAM, 0);
				CHECK(connect(fd, (void *)&a, sizeof a) == 0, "connect");
			}
			MPI_Comm joined;
			MPI_Comm_join(fd, &joined);
			int got = -1, rs;
			MPI_Comm_remote_size(joined, &rs);
			MPI_Sendrecv(&me, 1, MPI_INT, 0, 4, &got, 1, MPI_INT, 0, 4, joined, MPI_STATUS_IGNORE);
			CHECK(rs == 1 && got == 1 - me, "join: remote size %d, got %d", rs, got);
			MPI_Comm_disconnect(&joined);
			close(fd);
		}
		OK("join");
	}
	MPI_Finalize();
	return 0;
}
