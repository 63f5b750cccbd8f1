/* The collectives of an intercommunicator (barrier, bcast, reduce, allreduce, gather,
 * scatter, allgather, reduce_scatter_block, reduce_scatter) in their blocking,
 * non-blocking and persistent forms, against what each rank computes of the other
 * group's inputs: groups of one rank against the rest and of even against odd ranks,
 * from every root of both groups (MPI_ROOT, MPI_PROC_NULL), at a few ints and past the
 * eager limit, a strided receive type, MINLOC on MPI_2INT, and groups whose allgather
 * blocks differ in length. A barrier that ends before the other group entered is seen:
 * each rank raises a flag in a window before it enters and, once out, reads every flag
 * of the other group.
 * argv[1]: hosts to play (SPOOLS_HOST_ID by rank), 1 if absent. */
#include "check.h"
#include <string.h>

enum { BLOCKING, NONBLOCKING, PERSISTENT };
static const char *form_name[] = {"blocking", "non-blocking", "persistent"};

static int wrank, wsize;

/* Member l of group g's i-th int for call salt. */
static int val(int g, int l, int i, int salt) { return (g * 1000 + l) * 7919 + i * 13 + salt; }

/* Waits for `req` (a non-blocking call) or starts and waits a persistent one twice
 * (the second start must give the same result) and frees it. */
static void done(int form, MPI_Request *req) {
  if (form == NONBLOCKING) OK(MPI_Wait(req, MPI_STATUS_IGNORE));
  if (form == PERSISTENT) {
    for (int t = 0; t < 2; t++) {
      OK(MPI_Start(req));
      OK(MPI_Wait(req, MPI_STATUS_IGNORE));
    }
    OK(MPI_Request_free(req));
  }
}

/* One of each collective, in `form`, between the groups of `ic` (this rank is member
 * `l` of group `g`; `nl` and `nr` members here and there), `n` ints per block. */
static void round_of(MPI_Comm ic, int form, int g, int l, int nl, int nr, int n, int salt) {
  int o = 1 - g;
  size_t room = (size_t)(n + 2) * (size_t)(nl * nr + 2 * (nl + nr)) + 64;
  int *buf = malloc(sizeof(int) * room), *out = malloc(sizeof(int) * room);
  MPI_Request req;
  for (int rg = 0; rg < 2; rg++) {
    int rsize = rg == g ? nl : nr;
    for (int root = 0; root < rsize; root++) {
      int mine = rg == g, here = mine && root == l;
      int who = mine ? (here ? MPI_ROOT : MPI_PROC_NULL) : root;
      /* Bcast. */
      for (int i = 0; i < n; i++) buf[i] = here ? val(g, l, i, salt) : -1;
      if (form == BLOCKING) OK(MPI_Bcast(buf, n, MPI_INT, who, ic));
      if (form == NONBLOCKING) OK(MPI_Ibcast(buf, n, MPI_INT, who, ic, &req));
      if (form == PERSISTENT) OK(MPI_Bcast_init(buf, n, MPI_INT, who, ic, MPI_INFO_NULL, &req));
      done(form, &req);
      for (int i = 0; i < n && !mine; i++)
        CHECK(buf[i] == val(o, root, i, salt), "%s bcast from %d.%d [%d] %d", form_name[form],
              rg, root, i, buf[i]);
      /* Reduce (sum) to the root. */
      for (int i = 0; i < n; i++) buf[i] = val(g, l, i, salt), out[i] = -1;
      if (form == BLOCKING) OK(MPI_Reduce(buf, out, n, MPI_INT, MPI_SUM, who, ic));
      if (form == NONBLOCKING) OK(MPI_Ireduce(buf, out, n, MPI_INT, MPI_SUM, who, ic, &req));
      if (form == PERSISTENT)
        OK(MPI_Reduce_init(buf, out, n, MPI_INT, MPI_SUM, who, ic, MPI_INFO_NULL, &req));
      done(form, &req);
      for (int i = 0; i < n && here; i++) {
        int want = 0;
        for (int m = 0; m < nr; m++) want += val(o, m, i, salt);
        CHECK(out[i] == want, "%s reduce to %d.%d [%d] %d != %d", form_name[form], rg, root, i,
              out[i], want);
      }
      /* Gather to the root. */
      for (int i = 0; i < n; i++) buf[i] = val(g, l, i, salt + 1);
      for (int i = 0; i < n * nr; i++) out[i] = -1;
      if (form == BLOCKING) OK(MPI_Gather(buf, n, MPI_INT, out, n, MPI_INT, who, ic));
      if (form == NONBLOCKING) OK(MPI_Igather(buf, n, MPI_INT, out, n, MPI_INT, who, ic, &req));
      if (form == PERSISTENT)
        OK(MPI_Gather_init(buf, n, MPI_INT, out, n, MPI_INT, who, ic, MPI_INFO_NULL, &req));
      done(form, &req);
      for (int m = 0; m < nr && here; m++)
        for (int i = 0; i < n; i++)
          CHECK(out[m * n + i] == val(o, m, i, salt + 1), "%s gather to %d.%d: %d's [%d]",
                form_name[form], rg, root, m, i);
      /* Scatter from the root: block m to the other group's member m. */
      for (int m = 0; m < nr; m++)
        for (int i = 0; i < n; i++) buf[m * n + i] = here ? val(g, m, i, salt + 2) : -2;
      for (int i = 0; i < n; i++) out[i] = -1;
      if (form == BLOCKING) OK(MPI_Scatter(buf, n, MPI_INT, out, n, MPI_INT, who, ic));
      if (form == NONBLOCKING) OK(MPI_Iscatter(buf, n, MPI_INT, out, n, MPI_INT, who, ic, &req));
      if (form == PERSISTENT)
        OK(MPI_Scatter_init(buf, n, MPI_INT, out, n, MPI_INT, who, ic, MPI_INFO_NULL, &req));
      done(form, &req);
      for (int i = 0; i < n && !mine; i++)
        CHECK(out[i] == val(o, l, i, salt + 2), "%s scatter from %d.%d [%d] %d",
              form_name[form], rg, root, i, out[i]);
    }
  }
  /* Allreduce (sum) and MINLOC on pairs. */
  for (int i = 0; i < n; i++) buf[i] = val(g, l, i, salt), out[i] = -1;
  if (form == BLOCKING) OK(MPI_Allreduce(buf, out, n, MPI_INT, MPI_SUM, ic));
  if (form == NONBLOCKING) OK(MPI_Iallreduce(buf, out, n, MPI_INT, MPI_SUM, ic, &req));
  if (form == PERSISTENT)
    OK(MPI_Allreduce_init(buf, out, n, MPI_INT, MPI_SUM, ic, MPI_INFO_NULL, &req));
  done(form, &req);
  for (int i = 0; i < n; i++) {
    int want = 0;
    for (int m = 0; m < nr; m++) want += val(o, m, i, salt);
    CHECK(out[i] == want, "%s allreduce [%d] %d != %d", form_name[form], i, out[i], want);
  }
  int pairs = n / 2;
  for (int i = 0; i < pairs; i++) buf[2 * i] = (l + i) % 3, buf[2 * i + 1] = l;
  if (form == BLOCKING) OK(MPI_Allreduce(buf, out, pairs, MPI_2INT, MPI_MINLOC, ic));
  if (form == NONBLOCKING) OK(MPI_Iallreduce(buf, out, pairs, MPI_2INT, MPI_MINLOC, ic, &req));
  if (form == PERSISTENT)
    OK(MPI_Allreduce_init(buf, out, pairs, MPI_2INT, MPI_MINLOC, ic, MPI_INFO_NULL, &req));
  done(form, &req);
  for (int i = 0; i < pairs; i++) {
    int best = 3, at = -1;
    for (int m = 0; m < nr; m++)
      if ((m + i) % 3 < best) best = (m + i) % 3, at = m;
    CHECK(out[2 * i] == best && out[2 * i + 1] == at, "%s minloc [%d] (%d, %d)",
          form_name[form], i, out[2 * i], out[2 * i + 1]);
  }
  /* Allgather: group 0 sends n + 1 ints, group 1 n, into every other int (a vector). */
  int mysend = n + (g == 0), theirs = n + (o == 0);
  MPI_Datatype every_other;
  OK(MPI_Type_vector(theirs, 1, 2, MPI_INT, &every_other));
  MPI_Datatype spaced;
  OK(MPI_Type_create_resized(every_other, 0, (MPI_Aint)sizeof(int) * 2 * theirs, &spaced));
  OK(MPI_Type_commit(&spaced));
  OK(MPI_Type_free(&every_other));
  for (int i = 0; i < mysend; i++) buf[i] = val(g, l, i, salt + 3);
  for (int i = 0; i < 2 * theirs * nr; i++) out[i] = -7;
  if (form == BLOCKING) OK(MPI_Allgather(buf, mysend, MPI_INT, out, 1, spaced, ic));
  if (form == NONBLOCKING) OK(MPI_Iallgather(buf, mysend, MPI_INT, out, 1, spaced, ic, &req));
  if (form == PERSISTENT)
    OK(MPI_Allgather_init(buf, mysend, MPI_INT, out, 1, spaced, ic, MPI_INFO_NULL, &req));
  done(form, &req);
  for (int m = 0; m < nr; m++)
    for (int i = 0; i < theirs; i++) {
      int at = m * 2 * theirs + 2 * i;
      CHECK(out[at] == val(o, m, i, salt + 3) && out[at + 1] == -7,
            "%s allgather: %d's [%d] %d", form_name[form], m, i, out[at]);
    }
  OK(MPI_Type_free(&spaced));
  /* Reduce_scatter_block: n * nr ints per member here, n * nl there (both groups'
   * totals must be equal); reduce_scatter: member m gets m % 2 ints (zeros among
   * them), and the last member the rest of a total both groups share. */
  int total = n * nl * nr + nl * nr, k = n * nr;
  for (int i = 0; i < k * nl; i++) buf[i] = val(g, l, i, salt + 4);
  if (form == BLOCKING) OK(MPI_Reduce_scatter_block(buf, out, k, MPI_INT, MPI_SUM, ic));
  if (form == NONBLOCKING)
    OK(MPI_Ireduce_scatter_block(buf, out, k, MPI_INT, MPI_SUM, ic, &req));
  if (form == PERSISTENT)
    OK(MPI_Reduce_scatter_block_init(buf, out, k, MPI_INT, MPI_SUM, ic, MPI_INFO_NULL, &req));
  done(form, &req);
  for (int i = 0; i < k; i++) {
    int want = 0;
    for (int m = 0; m < nr; m++) want += val(o, m, l * k + i, salt + 4);
    CHECK(out[i] == want, "%s reduce_scatter_block [%d] %d != %d", form_name[form], i, out[i],
          want);
  }
  int *counts = malloc(sizeof(int) * (size_t)nl);
  int used = 0;
  for (int m = 0; m < nl; m++) counts[m] = m % 2, used += m % 2;
  counts[nl - 1] += total - used;
  int from = 0;
  for (int m = 0; m < l; m++) from += counts[m];
  for (int i = 0; i < total; i++) buf[i] = val(g, l, i, salt + 5);
  if (form == BLOCKING) OK(MPI_Reduce_scatter(buf, out, counts, MPI_INT, MPI_SUM, ic));
  if (form == NONBLOCKING)
    OK(MPI_Ireduce_scatter(buf, out, counts, MPI_INT, MPI_SUM, ic, &req));
  if (form == PERSISTENT)
    OK(MPI_Reduce_scatter_init(buf, out, counts, MPI_INT, MPI_SUM, ic, MPI_INFO_NULL, &req));
  done(form, &req);
  for (int i = 0; i < counts[l]; i++) {
    int want = 0;
    for (int m = 0; m < nr; m++) want += val(o, m, from + i, salt + 5);
    CHECK(out[i] == want, "%s reduce_scatter [%d] %d != %d", form_name[form], i, out[i], want);
  }
  free(counts), free(buf), free(out);
}

/* Barriers: each rank raises its flag (a window of ints on the world) before it
 * enters, and once out finds every flag of the other group raised. */
static void barriers(MPI_Comm ic, const int *group_of, int g, int form, int salt) {
  static int flags[64];
  MPI_Win win;
  OK(MPI_Win_create(flags, sizeof flags, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
  OK(MPI_Win_lock_all(0, win));
  int one = salt;
  for (int r = 0; r < wsize; r++) {
    OK(MPI_Put(&one, 1, MPI_INT, r, wrank, 1, MPI_INT, win));
    OK(MPI_Win_flush(r, win));
  }
  MPI_Request req;
  if (form == BLOCKING) OK(MPI_Barrier(ic));
  if (form == NONBLOCKING) OK(MPI_Ibarrier(ic, &req));
  if (form == PERSISTENT) {
    OK(MPI_Barrier_init(ic, MPI_INFO_NULL, &req));
    OK(MPI_Start(&req));
  }
  if (form != BLOCKING) OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
  if (form == PERSISTENT) OK(MPI_Request_free(&req));
  OK(MPI_Win_sync(win));
  for (int r = 0; r < wsize; r++)
    if (group_of[r] != g) {
      int got = -1;
      OK(MPI_Get(&got, 1, MPI_INT, wrank, r, 1, MPI_INT, win));
      OK(MPI_Win_flush(wrank, win));
      CHECK(got == salt, "%s barrier: out before world rank %d entered (%d)", form_name[form],
            r, got);
    }
  OK(MPI_Win_unlock_all(win));
  OK(MPI_Win_free(&win));
}

int main(int argc, char **argv) {
  int hosts = play_hosts(argc, argv);
  OK(MPI_Init(&argc, &argv));
  OK(MPI_Comm_rank(MPI_COMM_WORLD, &wrank));
  OK(MPI_Comm_size(MPI_COMM_WORLD, &wsize));
  CHECK(wsize <= 64, "at most 64 ranks");
  int salt = 1;
  for (int shape = 0; shape < 2 && wsize > 1; shape++) {
    int group_of[64], nl = 0, nr = 0, l = 0;
    for (int x = 0; x < wsize; x++) group_of[x] = shape == 0 ? x != 0 : x % 2;
    int g = group_of[wrank];
    for (int x = 0; x < wsize; x++) {
      if (group_of[x] == g && x < wrank) l++;
      if (group_of[x] == g) nl++; else nr++;
    }
    int remote_leader = -1;
    for (int x = wsize - 1; x >= 0; x--)
      if (group_of[x] != g) remote_leader = x;
    MPI_Comm local, ic;
    OK(MPI_Comm_split(MPI_COMM_WORLD, g, wrank, &local));
    OK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, remote_leader, 77, &ic));
    static const int ns[] = {0, 1, 6, 5000};
    for (int form = 0; form < 3; form++) {
      for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
        round_of(ic, form, g, l, nl, nr, ns[k], salt += 10);
      barriers(ic, group_of, g, form, salt++);
    }
    OK(MPI_Comm_free(&ic));
    OK(MPI_Comm_free(&local));
  }
  OK(MPI_Finalize());
  if (wrank == 0) printf("ok intercoll %d ranks %d hosts\n", wsize, hosts);
  return 0;
}
