/*
 * hello.c: the first Spools program in C. Every rank greets every other rank with a
 * short active message (a C handler counting greetings in its context pointer), puts a
 * string into its right neighbour's memory region, and the ranks sum their numbers with
 * an allreduce.
 *
 *   make -C crates/spools-c install PREFIX=$HOME/.local
 *   export PKG_CONFIG_PATH=$HOME/.local/lib/pkgconfig
 *   cc -std=c99 examples/c/hello.c $(pkg-config --cflags --libs spools) -o hello
 *   spools run -n 4 --tag-output -- ./hello
 */
#include <spools.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Print the failed call and its message, end the whole job, exit. */
#define CHECK(call)                                                                        \
    do {                                                                                   \
        spools_status_t rc_ = (call);                                                      \
        if (rc_ != SPOOLS_OK) {                                                            \
            fprintf(stderr, "hello: %s: %s (%s)\n", #call, spools_last_error_message(),    \
                    spools_strerror(rc_));                                                 \
            if (world != NULL)                                                             \
                spools_abort(world, #call " failed");                                      \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static spools_world_t *world;

/* The handler: runs on the receiving rank; ctx is the counter given at registration. */
static void greet(const spools_am_msg_t *m, void *ctx)
{
    printf("got a greeting from rank %u (it says %llu)\n", m->from,
           (unsigned long long)m->args[0]);
    __atomic_fetch_add((uint64_t *)ctx, 1, __ATOMIC_SEQ_CST);
}

struct expect {
    uint64_t *counter;
    uint64_t want;
};

static int all_greeted(void *ctx)
{
    const struct expect *e = ctx;
    return __atomic_load_n(e->counter, __ATOMIC_SEQ_CST) == e->want;
}

int main(void)
{
    spools_init_params_t params = SPOOLS_INIT_PARAMS_DEFAULT;
    spools_comm_t *comm;
    uint32_t me, n;
    CHECK(spools_init(&params, &world));
    CHECK(spools_world_rank(world, &me));
    CHECK(spools_world_size(world, &n));
    CHECK(spools_world_comm(world, &comm));

    uint64_t greetings = 0;
    CHECK(spools_am_register(world, "greet", greet, &greetings));
    CHECK(spools_am_sync(world)); /* every rank gets the same name -> id table */
    uint32_t greet_id;
    CHECK(spools_am_handler_id(world, "greet", &greet_id));

    spools_region_t *region; /* remote ranks may put into it */
    uint32_t key, *keys = malloc(n * sizeof *keys);
    if (keys == NULL)
        return 1;
    CHECK(spools_region_create(world, 64, 0, &region));
    CHECK(spools_region_key(region, &key));
    CHECK(spools_allgather(comm, &key, 1, keys, SPOOLS_DTYPE_U32));

    for (uint32_t peer = 0; peer < n; peer++) {
        uint64_t args[4] = {(uint64_t)me * 100, 0, 0, 0};
        if (peer != me)
            CHECK(spools_am_send_short(world, peer, greet_id, args, 0, 0));
    }
    char text[64];
    snprintf(text, sizeof text, "written by rank %u", me);
    uint32_t right = (me + 1) % n;
    CHECK(spools_put(world, right, keys[right], 0, text, strlen(text) + 1));

    struct expect e = {&greetings, n - 1};
    CHECK(spools_am_wait_until(world, all_greeted, &e));
    CHECK(spools_barrier(comm)); /* every put has landed */

    char got[64];
    CHECK(spools_region_read(region, 0, got, sizeof got));
    uint64_t mine = me + 1, total = 0;
    CHECK(spools_allreduce(comm, &mine, &total, 1, SPOOLS_DTYPE_U64, SPOOLS_OP_SUM));
    printf("rank %u of %u: my region says \"%s\"; 1 + ... + %u = %llu\n", me, n, got, n,
           (unsigned long long)total);

    CHECK(spools_region_destroy(region));
    free(keys);
    CHECK(spools_finalize(world));
    return 0;
}
