/*
 * c_stream.c: a stream out of the job from C. Each rank holds rows of a u32[R,C] frame
 * (block rows); ADU k is the frame whose element (i, j) is k*1000000 + i*C + j. The
 * stream is striped over LINKS links to DEST (spools recv), which writes the ADUs in
 * order to a file the test checks.
 *
 *   spools run -n N -- c_stream DEST LINKS FRAMES
 */
#include <spools.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define R 12
#define C 10

static spools_world_t *world;

#define CHECK(call)                                                                        \
    do {                                                                                   \
        spools_status_t rc_ = (call);                                                      \
        if (rc_ != SPOOLS_OK) {                                                            \
            fprintf(stderr, "c_stream: %s: %s\n", #call, spools_last_error_message());     \
            if (world != NULL)                                                             \
                spools_abort(world, #call);                                                \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: c_stream DEST LINKS FRAMES\n");
        return 2;
    }
    spools_init_params_t params = SPOOLS_INIT_PARAMS_DEFAULT;
    uint32_t me, n;
    CHECK(spools_init(&params, &world));
    CHECK(spools_world_rank(world, &me));
    CHECK(spools_world_size(world, &n));

    char spec[64];
    snprintf(spec, sizeof spec, "u32[%d,%d] block,* on %ux1", R, C, n);
    spools_layout_t *layout;
    CHECK(spools_layout_parse(spec, &layout));
    uint64_t bytes;
    CHECK(spools_layout_local_bytes(layout, me, &bytes));
    /* Block rows: rank me holds rows [me*b, min(R, (me+1)*b)) with b = ceil(R/n). */
    uint32_t b = (R + n - 1) / n, first = me * b;
    uint32_t rows = (uint32_t)(bytes / (C * sizeof(uint32_t)));
    uint32_t *mine = malloc(bytes ? bytes : 1);
    if (mine == NULL)
        return 1;

    spools_stream_params_t sp = SPOOLS_STREAM_PARAMS_DEFAULT;
    sp.field_mask = SPOOLS_STREAM_FIELD_LINKS | SPOOLS_STREAM_FIELD_TU;
    sp.links = (uint16_t)atoi(argv[2]);
    sp.tu = 64u * sp.links;
    spools_stream_t *s;
    CHECK(spools_stream_open(world, argv[1], &sp, &s));
    int frames = atoi(argv[3]);
    for (int k = 0; k < frames; k++) {
        for (uint32_t i = 0; i < rows; i++)
            for (uint32_t j = 0; j < C; j++)
                mine[i * C + j] = (uint32_t)k * 1000000u + (first + i) * C + j;
        CHECK(spools_stream_send(s, mine, bytes, layout));
    }
    CHECK(spools_stream_close(s));
    /* A closed stream's handle is gone; a bad one is refused, not a crash. */
    spools_status_t bad = spools_stream_send(NULL, mine, bytes, layout);
    if (bad != SPOOLS_ERR_INVALID_ARG) {
        fprintf(stderr, "c_stream: send on NULL gave %d\n", (int)bad);
        return 1;
    }
    printf("rank %u sent %d frames of %u rows\n", me, frames, rows);
    free(mine);
    CHECK(spools_layout_destroy(layout));
    CHECK(spools_finalize(world));
    return 0;
}
