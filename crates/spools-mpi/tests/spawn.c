/* Dynamic processes: the parents (every rank of MPI_COMM_WORLD) spawn 3 copies of this
 * program, which find their parents with MPI_Comm_get_parent. Both sides check the
 * intercommunicator's sizes and groups, send along it both ways, run a collective on
 * it, merge it into one intracommunicator and reduce over that; the children check
 * their own MPI_COMM_WORLD and MPI_APPNUM. Then each rank of the parents spawns one
 * child alone on MPI_COMM_SELF (several spawns at once), a spawn_multiple of two
 * commands follows, and a command that cannot be started fails with MPI_ERR_SPAWN on
 * every parent (nobody waits). Every spawned job is left by MPI_Comm_disconnect.
 * Prints "ok spawn N ranks" on rank 0 of the parents.
 * With argument "killed": the parents spawn 2 children, child 1 kills itself (SIGKILL)
 * once it has joined, and the parents' receive from it must end the job (the test
 * checks the job's exit and that nothing is left in /dev/shm); with "stopped" child 1
 * stops itself (SIGSTOP) instead, and the launcher's liveness timeout ends the job.
 * With arguments "hosts HOST": the parents spawn 4 children, which say hello (output the
 * launcher forwards) and send their host names to parent 0, which prints them in child
 * order ("spawned on A,B,C,D"); then one child on HOST (the info key "host"), whose host
 * parent 0 prints ("named host: H"); a host that is not the job's fails with
 * MPI_ERR_SPAWN on every parent.
 * With argument "once": round 1 and the missing command only (one launcher spawn).
 * With argument "refused" (a launcher that cannot spawn): the spawn fails with
 * MPI_ERR_SPAWN on every parent, and each prints "refused: MESSAGE". */
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

static int class_of(int rc) {
  int c = -1;
  MPI_Error_class(rc, &c);
  return c;
}

/* The child's side: argv[1] says which round spawned it. */
static int child(MPI_Comm parent, const char *round) {
  int rank, size, psize, appnum = -1, flag = 0, *ap;
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  OK(MPI_Comm_remote_size(parent, &psize));
  int inter = 0;
  OK(MPI_Comm_test_inter(parent, &inter));
  CHECK(inter, "the parent communicator is not an intercommunicator");
  OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &ap, &flag));
  if (flag) appnum = *ap;
  if (strcmp(round, "killedchild") == 0 || strcmp(round, "stoppedchild") == 0) {
    int x;
    if (rank == 1) raise(round[0] == 'k' ? SIGKILL : SIGSTOP);
    /* Never sent: the job ends around this receive. */
    MPI_Recv(&x, 1, MPI_INT, 0, 9, parent, MPI_STATUS_IGNORE);
    return 1;
  }
  if (strcmp(round, "where") == 0) {
    char host[64] = {0};
    gethostname(host, sizeof host - 1);
    printf("hello from child %d\n", rank);
    fflush(stdout);
    OK(MPI_Send(host, 64, MPI_CHAR, 0, 5, parent));
  } else if (strcmp(round, "world") == 0) {
    CHECK(size == 3, "children's world has %d", size);
    /* From every parent, its rank; to every parent, this child's rank * 10. */
    for (int p = 0; p < psize; p++) {
      int got = -1;
      OK(MPI_Recv(&got, 1, MPI_INT, p, 1, parent, MPI_STATUS_IGNORE));
      CHECK(got == p, "from parent %d got %d", p, got);
      int v = rank * 10;
      OK(MPI_Send(&v, 1, MPI_INT, p, 2, parent));
    }
    /* A broadcast from parent 0 to the children. */
    int b = -1;
    OK(MPI_Bcast(&b, 1, MPI_INT, 0, parent));
    CHECK(b == 4242, "bcast from the parents got %d", b);
    /* Merged, children high: the parents come first. */
    MPI_Comm merged;
    OK(MPI_Intercomm_merge(parent, 1, &merged));
    int mr, ms, sum = 0;
    OK(MPI_Comm_rank(merged, &mr));
    OK(MPI_Comm_size(merged, &ms));
    CHECK(ms == psize + 3 && mr == psize + rank, "merged rank %d of %d", mr, ms);
    OK(MPI_Allreduce(&mr, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK(sum == ms * (ms - 1) / 2, "merged sum %d", sum);
    OK(MPI_Comm_free(&merged));
    /* The children's own world works on its own. */
    int wsum = 0;
    OK(MPI_Allreduce(&rank, &wsum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(wsum == 3, "children's world sum %d", wsum);
    CHECK(appnum == 0, "MPI_APPNUM %d", appnum);
  } else if (strcmp(round, "self") == 0) {
    CHECK(size == 1 && psize == 1, "self round: world %d parents %d", size, psize);
    int got = -1;
    OK(MPI_Recv(&got, 1, MPI_INT, 0, 3, parent, MPI_STATUS_IGNORE));
    OK(MPI_Send(&got, 1, MPI_INT, 0, 4, parent));
  } else {
    /* spawn_multiple: commands "a" (1 process) and "b" (2). */
    CHECK(size == 3, "multiple: world %d", size);
    int want = rank == 0 ? 0 : 1;
    CHECK(appnum == want, "rank %d: MPI_APPNUM %d, want %d", rank, appnum, want);
    CHECK(strcmp(round, want ? "b" : "a") == 0, "rank %d runs %s", rank, round);
    int one = 1, n = 0;
    OK(MPI_Reduce(&one, &n, 1, MPI_INT, MPI_SUM, rank == 0 ? MPI_ROOT : MPI_PROC_NULL,
                  parent));
    (void)n;
  }
  OK(MPI_Comm_disconnect(&parent));
  MPI_Comm again;
  OK(MPI_Comm_get_parent(&again));
  CHECK(again == MPI_COMM_NULL, "get_parent after disconnect");
  OK(MPI_Finalize());
  return 0;
}

int main(int argc, char **argv) {
  OK(MPI_Init(&argc, &argv));
  MPI_Comm parent;
  OK(MPI_Comm_get_parent(&parent));
  if (parent != MPI_COMM_NULL) return child(parent, argc > 1 ? argv[1] : "");
  int rank, size;
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (argc > 1 && (strcmp(argv[1], "killed") == 0 || strcmp(argv[1], "stopped") == 0)) {
    char *args_killed[] = {argv[1][0] == 'k' ? "killedchild" : "stoppedchild", NULL};
    MPI_Comm kids;
    int x;
    /* The job's id (the spawned children join it): the test looks for what the job
     * leaves in /dev/shm by it, not by whatever else runs on the machine. */
    const char *job = getenv("SPOOLS_JOB");
    if (rank == 0) printf("job %s\n", job ? job : "?");
    fflush(stdout);
    OK(MPI_Comm_spawn(argv[0], args_killed, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &kids,
                      MPI_ERRCODES_IGNORE));
    /* Child 1 died: this fails, and MPI_ERRORS_ARE_FATAL ends the job. */
    MPI_Recv(&x, 1, MPI_INT, 1, 9, kids, MPI_STATUS_IGNORE);
    printf("FAIL the receive from a dead child returned\n");
    return 1;
  }

  if (argc > 1 && strcmp(argv[1], "refused") == 0) {
    MPI_Comm kids = MPI_COMM_NULL;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                            &kids, MPI_ERRCODES_IGNORE);
    CHECK(class_of(rc) == MPI_ERR_SPAWN, "refused spawn: rc %d class %d", rc, class_of(rc));
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    printf("refused: %s\n", msg);
    fflush(stdout);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    return 0;
  }
  if (argc > 2 && strcmp(argv[1], "hosts") == 0) {
    char *args_where[] = {"where", NULL};
    MPI_Comm kids;
    char host[64];
    OK(MPI_Comm_spawn(argv[0], args_where, 4, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &kids,
                      MPI_ERRCODES_IGNORE));
    if (rank == 0) {
      printf("spawned on");
      for (int c = 0; c < 4; c++) {
        OK(MPI_Recv(host, 64, MPI_CHAR, c, 5, kids, MPI_STATUS_IGNORE));
        printf("%s%s", c ? "," : " ", host);
      }
      printf("\n");
    }
    OK(MPI_Comm_disconnect(&kids));
    MPI_Info info;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "host", argv[2]));
    OK(MPI_Comm_spawn(argv[0], args_where, 1, info, 0, MPI_COMM_WORLD, &kids,
                      MPI_ERRCODES_IGNORE));
    if (rank == 0) {
      OK(MPI_Recv(host, 64, MPI_CHAR, 0, 5, kids, MPI_STATUS_IGNORE));
      printf("named host: %s\n", host);
    }
    OK(MPI_Comm_disconnect(&kids));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Info_set(info, "host", "spools-no-such-host"));
    int rc = MPI_Comm_spawn(argv[0], args_where, 1, info, 0, MPI_COMM_WORLD, &kids,
                            MPI_ERRCODES_IGNORE);
    CHECK(class_of(rc) == MPI_ERR_SPAWN, "a host not the job's: rc %d class %d", rc,
          class_of(rc));
    OK(MPI_Info_free(&info));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("ok spawn-hosts %d ranks\n", size);
    fflush(stdout);
    OK(MPI_Finalize());
    return 0;
  }

  /* Round 1: every parent spawns 3 children together. */
  char *args_world[] = {"world", NULL};
  MPI_Comm kids;
  int codes[3] = {-1, -1, -1};
  OK(MPI_Comm_spawn(argv[0], args_world, 3, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &kids, codes));
  for (int i = 0; i < 3; i++) CHECK(codes[i] == MPI_SUCCESS, "errcode %d: %d", i, codes[i]);
  int rs = 0, ls = 0;
  OK(MPI_Comm_remote_size(kids, &rs));
  OK(MPI_Comm_size(kids, &ls));
  CHECK(rs == 3 && ls == size, "remote %d local %d", rs, ls);
  /* The intercommunicator's local group is MPI_COMM_WORLD's. */
  MPI_Group wg, lg;
  int cmp = -1;
  OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
  OK(MPI_Comm_group(kids, &lg));
  OK(MPI_Group_compare(wg, lg, &cmp));
  CHECK(cmp == MPI_IDENT, "local group compares %d with the world's", cmp);
  MPI_Group rg, both;
  OK(MPI_Comm_remote_group(kids, &rg));
  OK(MPI_Group_union(wg, rg, &both));
  int bs = 0;
  OK(MPI_Group_size(both, &bs));
  CHECK(bs == size + 3, "union of the world and the children: %d", bs);
  OK(MPI_Group_free(&wg));
  OK(MPI_Group_free(&lg));
  OK(MPI_Group_free(&rg));
  OK(MPI_Group_free(&both));
  for (int c = 0; c < 3; c++) {
    OK(MPI_Send(&rank, 1, MPI_INT, c, 1, kids));
    int got = -1;
    OK(MPI_Recv(&got, 1, MPI_INT, c, 2, kids, MPI_STATUS_IGNORE));
    CHECK(got == c * 10, "from child %d got %d", c, got);
  }
  int b = 4242;
  OK(MPI_Bcast(&b, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, kids));
  MPI_Comm merged;
  OK(MPI_Intercomm_merge(kids, 0, &merged));
  int mr, ms, sum = 0;
  OK(MPI_Comm_rank(merged, &mr));
  OK(MPI_Comm_size(merged, &ms));
  CHECK(ms == size + 3 && mr == rank, "merged rank %d of %d", mr, ms);
  OK(MPI_Allreduce(&mr, &sum, 1, MPI_INT, MPI_SUM, merged));
  CHECK(sum == ms * (ms - 1) / 2, "merged sum %d", sum);
  OK(MPI_Comm_free(&merged));
  OK(MPI_Comm_disconnect(&kids));
  CHECK(kids == MPI_COMM_NULL, "disconnect sets the handle to MPI_COMM_NULL");
  if (argc > 1 && strcmp(argv[1], "once") == 0) {
    /* Round 1 only, then a command that is not there (refused before any launcher is
     * asked). */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Comm none = MPI_COMM_NULL;
    int rc = MPI_Comm_spawn("/nonexistent/spools-no-such-program", MPI_ARGV_NULL, 2,
                            MPI_INFO_NULL, 0, MPI_COMM_WORLD, &none, MPI_ERRCODES_IGNORE);
    CHECK(class_of(rc) == MPI_ERR_SPAWN, "missing command: rc %d class %d", rc,
          class_of(rc));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("ok spawn-once %d ranks\n", size);
    OK(MPI_Finalize());
    return 0;
  }

  /* Round 2: every parent alone, all at once. */
  char *args_self[] = {"self", NULL};
  MPI_Comm mine;
  OK(MPI_Comm_spawn(argv[0], args_self, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &mine,
                    MPI_ERRCODES_IGNORE));
  int v = 100 + rank, back = -1;
  OK(MPI_Send(&v, 1, MPI_INT, 0, 3, mine));
  OK(MPI_Recv(&back, 1, MPI_INT, 0, 4, mine, MPI_STATUS_IGNORE));
  CHECK(back == v, "self round echoed %d", back);
  OK(MPI_Comm_disconnect(&mine));

  /* Round 3: two commands. */
  char *cmds[2] = {argv[0], argv[0]};
  char *a_args[] = {"a", NULL}, *b_args[] = {"b", NULL};
  char **argvs[2] = {a_args, b_args};
  int counts[2] = {1, 2};
  MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
  MPI_Comm multi;
  OK(MPI_Comm_spawn_multiple(2, cmds, argvs, counts, infos, 0, MPI_COMM_WORLD, &multi,
                             MPI_ERRCODES_IGNORE));
  OK(MPI_Comm_remote_size(multi, &rs));
  CHECK(rs == 3, "multiple: remote size %d", rs);
  int n = 0, one = 0;
  OK(MPI_Reduce(&one, &n, 1, MPI_INT, MPI_SUM, 0, multi));
  OK(MPI_Comm_disconnect(&multi));

  /* A command that does not exist: MPI_ERR_SPAWN on every parent. */
  OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_Comm none = MPI_COMM_NULL;
  int rc = MPI_Comm_spawn("/nonexistent/spools-no-such-program", MPI_ARGV_NULL, 2,
                          MPI_INFO_NULL, 0, MPI_COMM_WORLD, &none, MPI_ERRCODES_IGNORE);
  CHECK(class_of(rc) == MPI_ERR_SPAWN, "missing command: rc %d class %d", rc, class_of(rc));
  /* A program that ends without joining: MPI_ERR_SPAWN too. */
  rc = MPI_Comm_spawn("true", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &none,
                      MPI_ERRCODES_IGNORE);
  CHECK(class_of(rc) == MPI_ERR_SPAWN, "a program that never joins: rc %d class %d", rc,
        class_of(rc));
  OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("ok spawn %d ranks\n", size);
  OK(MPI_Finalize());
  return 0;
}
