/*
 * config.c EAGER | config.c --bad: spools_config_string.
 *
 * With EAGER (the SPOOLS_EAGER_LIMIT the driver set, e.g. "48KiB"), under `spools run`:
 *   ok before-init  with a NULL world (the environment's configuration): a NULL buffer
 *                   gives SPOOLS_ERR_TRUNCATED and `needed`; a buffer one byte short is
 *                   refused untouched; a buffer of `needed` bytes gets the text, which
 *                   has eager_limit = "EAGER"
 *   ok world        the same with the world (joined with NULL params): the text also
 *                   names the bootstrap
 * With --bad, run alone (no spools_init) with SPOOLS_EAGER_LIMIT set to nonsense:
 *   ok bad-variable SPOOLS_ERR_INVALID_ARG naming the variable
 */
#include "ctest.h"

/* Gets the configuration text of `world` (may be NULL) the way the header says: ask for
 * the size, then fetch. Checks the truncation rules on the way. Returns malloc'd text. */
static char *config_text(const spools_world_t *world)
{
    size_t needed = 0, again = 0;
    EXPECT_ERR(spools_config_string(world, NULL, 0, &needed), SPOOLS_ERR_TRUNCATED, "bytes");
    ASSERT(needed > 100, "needed is %zu", needed);
    char *buf = ct_alloc(needed);
    memset(buf, '#', needed);
    EXPECT_ERR(spools_config_string(world, buf, needed - 1, &again), SPOOLS_ERR_TRUNCATED,
               "bytes");
    ASSERT(again == needed, "needed %zu, then %zu", needed, again);
    for (size_t i = 0; i < needed; i++)
        ASSERT(buf[i] == '#', "a refused call wrote byte %zu", i);
    again = 0;
    CHECK(spools_config_string(world, buf, needed, &again));
    ASSERT(again == needed && strlen(buf) == needed - 1, "needed %zu, length %zu", again,
           strlen(buf));
    /* needed may be NULL; a larger buffer is fine. */
    char *big = ct_alloc(needed + 100);
    CHECK(spools_config_string(world, big, needed + 100, NULL));
    ASSERT(strcmp(big, buf) == 0, "two calls gave different texts");
    free(big);
    return buf;
}

int main(int argc, char **argv)
{
    ct_prog = "config";
    if (argc == 2 && strcmp(argv[1], "--bad") == 0) {
        char buf[4096];
        size_t needed = 0;
        EXPECT_ERR(spools_config_string(NULL, buf, sizeof buf, &needed), SPOOLS_ERR_INVALID_ARG,
                   "SPOOLS_EAGER_LIMIT");
        OK("bad-variable");
        return 0;
    }
    ASSERT(argc == 2, "usage: config EAGER | config --bad");
    char want[64];
    snprintf(want, sizeof want, "eager_limit = \"%s\"", argv[1]);

    char *text = config_text(NULL);
    ASSERT(strstr(text, want) != NULL, "no '%s' in:\n%s", want, text);
    ASSERT(strstr(text, "bulk_limit = ") != NULL, "no bulk_limit in:\n%s", text);
    free(text);
    OK("before-init");

    /* NULL params: the defaults, no version check. */
    CHECK(spools_init(NULL, &ct_world));
    CHECK(spools_world_rank(ct_world, &ct_rank));
    CHECK(spools_world_comm(ct_world, &ct_comm));
    text = config_text(ct_world);
    ASSERT(strstr(text, want) != NULL, "no '%s' in:\n%s", want, text);
    ASSERT(strstr(text, "\nbootstrap = \"") != NULL, "no bootstrap in:\n%s", text);
    free(text);
    OK("world");
    CHECK(spools_barrier(ct_comm));
    ct_finalize();
    OK("done");
    return 0;
}
