/* Ports, names and joins between groups of one job, as mpi4py's test_dynproc meets
 * them: rank 0 opens a port and accepts on MPI_COMM_SELF while the other ranks connect
 * on their own communicator, then the other way round; each time rank 0 broadcasts
 * over the new intercommunicator and the others answer with a reduction. A name is
 * published, looked up and withdrawn; two ranks join over a TCP socket they connected
 * themselves. Erroneous meetings fail at once on every rank of the group: a name that
 * is not a port's, a port that was closed, a service never published. Any number of
 * ranks >= 2; prints "ok dynproc N ranks". */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "check.h"

static int class_of(int rc) {
  int c = -1;
  MPI_Error_class(rc, &c);
  return c;
}

int main(int argc, char **argv) {
  int rank, size;
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2, "needs 2 ranks, has %d", size);
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  MPI_Comm rest;
  OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 0, rank, &rest));
  if (rest != MPI_COMM_NULL) OK(MPI_Comm_set_errhandler(rest, MPI_ERRORS_RETURN));

  for (int round = 0; round < 2; round++) {
    int opener = round == 0 ? 0 : 1;
    char port[MPI_MAX_PORT_NAME] = "";
    if (rank == opener) {
      OK(MPI_Open_port(MPI_INFO_NULL, port));
      CHECK(strncmp(port, "spools-port:", 12) == 0, "port name %s", port);
      OK(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 1 - opener, 7, MPI_COMM_WORLD));
    } else if (rank == 1 - opener) {
      OK(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, opener, 7, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE));
    }
    MPI_Comm inter = MPI_COMM_NULL;
    int accepting = (round == 0) == (rank == 0);
    MPI_Comm mine = rank == 0 ? MPI_COMM_SELF : rest;
    if (accepting)
      OK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, mine, &inter));
    else
      OK(MPI_Comm_connect(port, MPI_INFO_NULL, 0, mine, &inter));
    int rs = -1, ls = -1, r = -1;
    OK(MPI_Comm_remote_size(inter, &rs));
    OK(MPI_Comm_size(inter, &ls));
    OK(MPI_Comm_rank(inter, &r));
    if (rank == 0)
      CHECK(rs == size - 1 && ls == 1 && r == 0, "rank 0: remote %d local %d rank %d", rs,
            ls, r);
    else
      CHECK(rs == 1 && ls == size - 1 && r == rank - 1, "remote %d local %d rank %d", rs, ls,
            r);
    int v = rank == 0 ? 77 + round : -1;
    OK(MPI_Bcast(&v, 1, MPI_INT, rank == 0 ? MPI_ROOT : 0, inter));
    if (rank != 0) CHECK(v == 77 + round, "bcast over the port's intercommunicator: %d", v);
    int sum = 0;
    OK(MPI_Reduce(&rank, &sum, 1, MPI_INT, MPI_SUM, rank == 0 ? MPI_ROOT : 0, inter));
    if (rank == 0) CHECK(sum == size * (size - 1) / 2, "reduce over the port: %d", sum);
    OK(MPI_Comm_free(&inter));
    if (rank == opener) {
      OK(MPI_Close_port(port));
      int rc = MPI_Close_port(port);
      CHECK(class_of(rc) == MPI_ERR_PORT, "second close rc %d class %d", rc, class_of(rc));
    }
    /* The closed port refuses: MPI_ERR_PORT on every rank of the connecting group. */
    if (round == 1 && rank == 0) {
      MPI_Comm none;
      int rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &none);
      CHECK(class_of(rc) == MPI_ERR_PORT, "connect to a closed port: class %d", class_of(rc));
    }
  }
  /* A name that is not a port's: every rank of the group fails. */
  {
    MPI_Comm none;
    char bad[] = "tcp:127.0.0.1:1";
    int rc = MPI_Comm_connect(bad, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &none);
    CHECK(class_of(rc) == MPI_ERR_PORT, "connect to %s: class %d", bad, class_of(rc));
  }

  /* Names. */
  {
    char service[64], port[MPI_MAX_PORT_NAME], found[MPI_MAX_PORT_NAME] = "";
    snprintf(service, sizeof service, "spools-dynproc-%d-%d", (int)getpid(), rank);
    OK(MPI_Open_port(MPI_INFO_NULL, port));
    OK(MPI_Publish_name(service, MPI_INFO_NULL, port));
    int rc = MPI_Publish_name(service, MPI_INFO_NULL, port);
    CHECK(class_of(rc) == MPI_ERR_SERVICE, "published twice: class %d", class_of(rc));
    OK(MPI_Lookup_name(service, MPI_INFO_NULL, found));
    CHECK(strcmp(found, port) == 0, "looked up %s for %s", found, port);
    OK(MPI_Unpublish_name(service, MPI_INFO_NULL, port));
    rc = MPI_Lookup_name(service, MPI_INFO_NULL, found);
    CHECK(class_of(rc) == MPI_ERR_NAME, "lookup after unpublish: class %d", class_of(rc));
    rc = MPI_Unpublish_name(service, MPI_INFO_NULL, port);
    CHECK(class_of(rc) == MPI_ERR_SERVICE, "unpublish twice: class %d", class_of(rc));
    OK(MPI_Close_port(port));
  }

  /* Join: ranks 0 and 1 over a socket of their own. */
  if (rank < 2) {
    int fd = -1;
    if (rank == 0) {
      int l = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in a = {0};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0, "bind");
      CHECK(listen(l, 1) == 0, "listen");
      socklen_t len = sizeof a;
      CHECK(getsockname(l, (struct sockaddr *)&a, &len) == 0, "getsockname");
      int port = ntohs(a.sin_port);
      OK(MPI_Send(&port, 1, MPI_INT, 1, 9, MPI_COMM_WORLD));
      fd = accept(l, NULL, NULL);
      close(l);
    } else {
      int port = 0;
      OK(MPI_Recv(&port, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      fd = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in a = {0};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(port);
      CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    }
    CHECK(fd >= 0, "socket");
    MPI_Comm joined;
    OK(MPI_Comm_join(fd, &joined));
    close(fd);
    int rs = -1;
    OK(MPI_Comm_remote_size(joined, &rs));
    CHECK(rs == 1, "joined remote size %d", rs);
    int mine = 100 + rank, theirs = -1;
    OK(MPI_Sendrecv(&mine, 1, MPI_INT, 0, 5, &theirs, 1, MPI_INT, 0, 5, joined,
                    MPI_STATUS_IGNORE));
    CHECK(theirs == 101 - rank, "joined: got %d", theirs);
    OK(MPI_Comm_disconnect(&joined));
  }
  int one = 1, all = 0;
  OK(MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(all == size, "allreduce %d", all);
  if (rest != MPI_COMM_NULL) OK(MPI_Comm_free(&rest));
  if (rank == 0) printf("ok dynproc %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
