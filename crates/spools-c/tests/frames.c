/*
 * frames.c: frames (the framebuffer protocol) out of and into a job from C.
 *
 *   frames send DEST      a connection of 2 links with four streams: 1, grey u8[12,20]
 *                         (rows in blocks); 2 and 3, lock-step group 1: RGB u8[12,20,3]
 *                         (rows cyclic) and an f32[12,20] field (columns cyclic, viridis
 *                         from 0 to 10); 4, plain ADUs sequenced after stream 1; 5, an
 *                         ADU of varying size (rank r: r + 1 bytes of value r). Frames 0-2
 *                         of every stream, then frame 3 of streams 2 and 3 one by one (a
 *                         second frame of stream 2 first runs ahead of its group: refused).
 *                         After frame 0, refused on every rank with nothing sent: a layout
 *                         that is not 2-D, group sends missing a member, lo >= hi, a wrong
 *                         share, an unknown colour map and a NULL layout handle (of a
 *                         frame, of a group's item) on the last rank only, a stream that
 *                         is not open. The same frames as the Python test's
 *                         stream_frames.py, checked by the same test code.
 *   frames writer DEST    a single stream (spools_stream_open) of 2 grey frames (and a
 *                         wrong share, a bad colour map or a NULL layout handle on one
 *                         rank, a layout that is not 2-D: refused on every rank).
 *   frames recv SENDERS   listens (spools_stream_listen; rank 0 prints "listening on
 *                         ADDR") for `frames send` on SENDERS ranks, receives every ADU in
 *                         blocks over the ranks, and checks each rank's bytes of it
 *                         against the frame it must be: every header field but the time,
 *                         and the pixels. The first ADU is first refused on every rank (a
 *                         buffer of the wrong size, a NULL layout handle, on the last rank)
 *                         and looked at with a NULL `got` on rank 0 (which fails alone),
 *                         and skipped with a NULL `got` on the last rank (refused on every
 *                         rank, nothing skipped).
 *   frames view DEST N    N frames of 64x96 of stream 1 (grey, "c grey") and of group 1
 *                         (RGB "c rgb", f32 "c field"), for the browser test
 *                         (crates/spools-view/tests/py).
 */
#include "ctest.h"

/* The frames' size: 12x20, 64x96 in "view" mode. */
static uint32_t H = 12, W = 20;

static uint8_t grey_px(uint32_t n, uint32_t k) { return (uint8_t)((k + 7u * n) % 256u); }
static uint8_t rgb_px(uint32_t n, uint32_t k) { return (uint8_t)((k * 5u + 11u * n) % 256u); }
static float field_px(uint32_t n, uint32_t i, uint32_t j)
{
    return (float)((double)n + 0.5 * (double)i + 0.25 * (double)j);
}

/* A layout of the frames' size: `fmt` has %u for H, W and the ranks, in that order. */
static spools_layout_t *layout(const char *fmt, uint32_t p)
{
    char spec[96];
    spools_layout_t *l;
    snprintf(spec, sizeof spec, fmt, H, W, p);
    CHECK(spools_layout_parse(spec, &l));
    return l;
}

static size_t share(spools_layout_t *l)
{
    uint64_t b;
    CHECK(spools_layout_local_bytes(l, ct_rank, &b));
    return (size_t)b;
}

/* A 1-D layout of `n` bytes, `dist` over the ranks. */
static spools_layout_t *layout1(uint32_t n, const char *dist)
{
    char spec[96];
    spools_layout_t *l;
    snprintf(spec, sizeof spec, "u8[%u] %s on %u", n, dist, ct_size);
    CHECK(spools_layout_parse(spec, &l));
    return l;
}

/* This rank's shares of frame n: grey rows in blocks, RGB rows cyclic, field columns
 * cyclic. */
static void grey_share(uint32_t n, uint8_t *out)
{
    uint32_t b = (H + ct_size - 1) / ct_size, k = 0;
    for (uint32_t i = ct_rank * b; i < H && i < (ct_rank + 1) * b; i++)
        for (uint32_t j = 0; j < W; j++)
            out[k++] = grey_px(n, i * W + j);
}

static void rgb_share(uint32_t n, uint8_t *out)
{
    uint32_t k = 0;
    for (uint32_t i = ct_rank; i < H; i += ct_size)
        for (uint32_t j = 0; j < W * 3; j++)
            out[k++] = rgb_px(n, i * W * 3 + j);
}

static void field_share(uint32_t n, float *out)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < H; i++)
        for (uint32_t j = ct_rank; j < W; j += ct_size)
            out[k++] = field_px(n, i, j);
}

static spools_frame_style_t style(const char *title, int32_t map, double lo, double hi)
{
    spools_frame_style_t s = SPOOLS_FRAME_STYLE_DEFAULT;
    s.field_mask = SPOOLS_FRAME_FIELD_TITLE | SPOOLS_FRAME_FIELD_COLORMAP |
                   SPOOLS_FRAME_FIELD_LO | SPOOLS_FRAME_FIELD_HI;
    s.title = title;
    s.colormap = map;
    s.lo = lo;
    s.hi = hi;
    return s;
}

static int send_frames(const char *dest, uint32_t frames, int checks, const char *prefix)
{
    spools_layout_t *gl = layout("u8[%u,%u] block,* on %ux1", ct_size);
    spools_layout_t *rl = layout("u8[%u,%u,3] cyclic,*,* on %ux1x1", ct_size);
    spools_layout_t *fl = layout("f32[%u,%u] *,cyclic on 1x%u", ct_size);
    size_t gn = share(gl), rn = share(rl), fn = share(fl);
    uint8_t *g = malloc(gn + 1), *r = malloc(rn + 1);
    float *f = malloc(fn + sizeof(float));
    ASSERT(g && r && f, "out of memory");
    char gt[32], rt[32], ft[32];
    snprintf(gt, sizeof gt, "%sgrey", prefix);
    snprintf(rt, sizeof rt, "%srgb", prefix);
    snprintf(ft, sizeof ft, "%sfield", prefix);
    spools_frame_style_t gs = style(gt, SPOOLS_COLORMAP_NONE, 0, 0);
    spools_frame_style_t rs = style(rt, SPOOLS_COLORMAP_NONE, 0, 0);
    spools_frame_style_t fs = style(ft, SPOOLS_COLORMAP_VIRIDIS, 0.0, 10.0);

    spools_stream_conn_t *c;
    CHECK(spools_stream_connect(ct_world, dest, 2, &c));
    spools_stream_options_t o = SPOOLS_STREAM_OPTIONS_DEFAULT;
    o.field_mask = SPOOLS_STREAM_OPTION_TU;
    o.tu = 1024;
    uint32_t gid, rid, fid, raw = 0;
    CHECK(spools_stream_conn_open_stream(c, &o, &gid));
    o.field_mask |= SPOOLS_STREAM_OPTION_GROUP;
    o.group = 1;
    CHECK(spools_stream_conn_open_stream(c, &o, &rid));
    o.field_mask |= SPOOLS_STREAM_OPTION_PRIORITY | SPOOLS_STREAM_OPTION_WINDOW;
    o.priority = 1;
    o.window = 3;
    CHECK(spools_stream_conn_open_stream(c, &o, &fid));
    ASSERT(gid == 1 && rid == 2 && fid == 3, "ids %u %u %u", gid, rid, fid);
    if (checks) {
        spools_stream_options_t a = SPOOLS_STREAM_OPTIONS_DEFAULT;
        a.field_mask = SPOOLS_STREAM_OPTION_TU | SPOOLS_STREAM_OPTION_AFTER;
        a.tu = 64;
        a.after = gid;
        CHECK(spools_stream_conn_open_stream(c, &a, &raw));
        ASSERT(raw == 4, "id %u", raw);
    }
    spools_frame_item_t pair[2] = {{rid, &rs, r, rn, rl}, {fid, &fs, f, fn, fl}};

    for (uint32_t n = 0; n < frames; n++) {
        grey_share(n, g);
        rgb_share(n, r);
        field_share(n, f);
        CHECK(spools_stream_conn_send_frame(c, gid, &gs, g, gn, gl));
        CHECK(spools_stream_conn_send_frames(c, 1, pair, 2));
        if (n != 0 || !checks)
            continue;
        /* Refused on every rank, nothing sent. */
        spools_layout_t *flat = layout1(H * W, "block");
        EXPECT_ERR(spools_stream_conn_send_frame(c, gid, &gs, g, share(flat), flat),
                   SPOOLS_ERR_INVALID_ARG, "a frame is");
        CHECK(spools_layout_destroy(flat));
        EXPECT_ERR(spools_stream_conn_send_frames(c, 1, pair, 1), SPOOLS_ERR_INVALID_ARG,
                   "missing");
        spools_stream_item_t one = {rid, r, rn, rl};
        EXPECT_ERR(spools_stream_conn_send_group(c, 1, &one, 1), SPOOLS_ERR_INVALID_ARG,
                   "missing");
        spools_frame_style_t flat_range = style("x", SPOOLS_COLORMAP_GREY, 1.0, 1.0);
        EXPECT_ERR(spools_stream_conn_send_frame(c, fid, &flat_range, f, fn, fl),
                   SPOOLS_ERR_INVALID_ARG, "not a frame");
        int last = ct_rank == ct_size - 1;
        EXPECT_ERR(spools_stream_conn_send_frame(c, gid, &gs, g, last ? gn + 1 : gn, gl),
                   SPOOLS_ERR_LAYOUT, "share");
        spools_frame_style_t odd = style("x", 7, 0.0, 1.0);
        spools_frame_item_t oddpair[2] = {{rid, &rs, r, rn, rl}, {fid, last ? &odd : &fs, f, fn, fl}};
        EXPECT_ERR(spools_stream_conn_send_frames(c, 1, oddpair, 2), SPOOLS_ERR_INVALID_ARG,
                   "colormap");
        /* A NULL layout handle on the last rank, in a frame and in a group's item. */
        EXPECT_ERR(spools_stream_conn_send_frame(c, gid, &gs, g, gn, last ? NULL : gl),
                   SPOOLS_ERR_INVALID_ARG, "spools_layout_t");
        spools_frame_item_t nolayout[2] = {{rid, &rs, r, rn, rl}, {fid, &fs, f, fn, last ? NULL : fl}};
        EXPECT_ERR(spools_stream_conn_send_frames(c, 1, nolayout, 2), SPOOLS_ERR_INVALID_ARG,
                   "spools_layout_t");
        EXPECT_ERR(spools_stream_conn_send_frame(c, 9, &gs, g, gn, gl), SPOOLS_ERR_INVALID_ARG,
                   "no stream 9");
        EXPECT_ERR(spools_stream_conn_send_frame(NULL, gid, &gs, g, gn, gl),
                   SPOOLS_ERR_INVALID_ARG, "NULL");
        OK("refused");
    }
    if (checks) {
        rgb_share(frames, r);
        field_share(frames, f);
        CHECK(spools_stream_conn_send_frame(c, rid, &rs, r, rn, rl));
        EXPECT_ERR(spools_stream_conn_send_frame(c, rid, &rs, r, rn, rl), SPOOLS_ERR_INVALID_ARG,
                   "lock-step");
        CHECK(spools_stream_conn_send_frame(c, fid, &fs, f, fn, fl));
        uint64_t counts[4];
        for (uint32_t s = 0; s < 4; s++)
            CHECK(spools_stream_conn_adus(c, s + 1, &counts[s]));
        ASSERT(counts[0] == frames && counts[1] == frames + 1 && counts[2] == frames + 1 &&
                   counts[3] == 0,
               "adus %llu %llu %llu %llu", (unsigned long long)counts[0],
               (unsigned long long)counts[1], (unsigned long long)counts[2],
               (unsigned long long)counts[3]);
        spools_layout_t *rawl = layout1(40, "cyclic");
        size_t an = share(rawl);
        uint8_t *mine = malloc(an + 1);
        ASSERT(mine != NULL, "out of memory");
        memset(mine, (int)ct_rank, an);
        CHECK(spools_stream_conn_send(c, raw, mine, an, rawl));
        free(mine);
        CHECK(spools_layout_destroy(rawl));
        /* An ADU of varying size: rank r gives r + 1 bytes of value r. */
        spools_stream_options_t vo = SPOOLS_STREAM_OPTIONS_DEFAULT;
        vo.field_mask = SPOOLS_STREAM_OPTION_TU | SPOOLS_STREAM_OPTION_VARIABLE;
        vo.tu = 64;
        vo.variable = 1;
        uint32_t var;
        CHECK(spools_stream_conn_open_stream(c, &vo, &var));
        ASSERT(var == 5, "id %u", var);
        uint8_t part[64];
        memset(part, (int)ct_rank, sizeof part);
        EXPECT_ERR(spools_stream_conn_send_var(c, raw, part, 1), SPOOLS_ERR_INVALID_ARG,
                   "variable");
        EXPECT_ERR(spools_stream_conn_send_var(c, var, ct_rank == 0 ? NULL : part, ct_rank + 1),
                   SPOOLS_ERR_INVALID_ARG, "NULL");
        CHECK(spools_stream_conn_send_var(c, var, part, ct_rank + 1));
        CHECK(spools_stream_conn_close_stream(c, gid));
        EXPECT_ERR(spools_stream_conn_close_stream(c, gid), SPOOLS_ERR_INVALID_ARG, "no stream");
    }
    CHECK(spools_stream_conn_close(c));
    free(g);
    free(r);
    free(f);
    CHECK(spools_layout_destroy(gl));
    CHECK(spools_layout_destroy(rl));
    CHECK(spools_layout_destroy(fl));
    return 0;
}

static void writer(const char *dest)
{
    spools_layout_t *gl = layout("u8[%u,%u] block,* on %ux1", ct_size);
    size_t gn = share(gl);
    uint8_t *g = malloc(gn + 1);
    ASSERT(g != NULL, "out of memory");
    spools_stream_params_t p = SPOOLS_STREAM_PARAMS_DEFAULT;
    p.field_mask = SPOOLS_STREAM_FIELD_LINKS | SPOOLS_STREAM_FIELD_TU;
    p.links = 2;
    p.tu = 1024;
    spools_stream_t *s;
    CHECK(spools_stream_open(ct_world, dest, &p, &s));
    spools_frame_style_t st = SPOOLS_FRAME_STYLE_DEFAULT;
    st.field_mask = SPOOLS_FRAME_FIELD_TITLE;
    st.title = "writer";
    for (uint32_t n = 0; n < 2; n++) {
        grey_share(n, g);
        CHECK(spools_stream_send_frame(s, &st, g, gn, gl));
        if (n != 0)
            continue;
        /* A wrong share on the last rank, a bad colour map on rank 0, a layout that is
         * not 2-D: refused on every rank, nothing sent. */
        EXPECT_ERR(spools_stream_send_frame(s, &st, g, ct_rank == ct_size - 1 ? gn + 1 : gn, gl),
                   SPOOLS_ERR_LAYOUT, "share");
        spools_frame_style_t odd = style("x", 9, 0.0, 1.0);
        EXPECT_ERR(spools_stream_send_frame(s, ct_rank == 0 ? &odd : &st, g, gn, gl),
                   SPOOLS_ERR_INVALID_ARG, "colormap");
        /* A NULL layout handle on rank 0 only. */
        EXPECT_ERR(spools_stream_send_frame(s, &st, g, gn, ct_rank == 0 ? NULL : gl),
                   SPOOLS_ERR_INVALID_ARG, "spools_layout_t");
        spools_layout_t *flat = layout1(H * W, "block");
        EXPECT_ERR(spools_stream_send_frame(s, &st, g, share(flat), flat), SPOOLS_ERR_INVALID_ARG,
                   "a frame is");
        CHECK(spools_layout_destroy(flat));
    }
    CHECK(spools_stream_close(s));
    free(g);
    CHECK(spools_layout_destroy(gl));
}

/* The bytes of ADU `adu` of `stream` as `frames send` on `senders` ranks sends them (the
 * header's time, bytes 24..31, left 0). */
static size_t expected(uint32_t stream, uint32_t adu, uint32_t senders, uint8_t *out)
{
    if (stream == 4) {
        for (uint32_t k = 0; k < 40; k++)
            out[k] = (uint8_t)(k % senders);
        return 40;
    }
    if (stream == 5) {
        size_t k = 0;
        for (uint32_t r = 0; r < senders; r++)
            for (uint32_t i = 0; i <= r; i++)
                out[k++] = (uint8_t)r;
        return k;
    }
    static const uint8_t formats[] = {0, 1, 2, 3}, maps[] = {0, 0, 0, 3};
    static const char *titles[] = {"", "grey", "rgb", "field"};
    memset(out, 0, 128);
    memcpy(out, "SPFB", 4);
    out[4] = 1;
    out[6] = formats[stream];
    out[7] = maps[stream];
    out[8] = (uint8_t)W;
    out[12] = (uint8_t)H;
    for (int b = 0; b < 8; b++)
        out[16 + b] = (uint8_t)((uint64_t)adu >> (8 * b));
    if (stream != 1) {
        out[32] = 1; /* group 1 */
        out[36] = 2; /* members */
    }
    out[38] = (uint8_t)strlen(titles[stream]);
    if (stream == 3) {
        double lo = 0.0, hi = 10.0; /* little-endian machines only, as Spools */
        memcpy(out + 40, &lo, 8);
        memcpy(out + 48, &hi, 8);
    }
    memcpy(out + 64, titles[stream], strlen(titles[stream]));
    size_t k = 128;
    for (uint32_t i = 0; i < H; i++)
        for (uint32_t j = 0; j < W; j++) {
            if (stream == 1) {
                out[k++] = grey_px(adu, i * W + j);
            } else if (stream == 2) {
                for (uint32_t ch = 0; ch < 3; ch++)
                    out[k++] = rgb_px(adu, (i * W + j) * 3 + ch);
            } else {
                float v = field_px(adu, i, j);
                memcpy(out + k, &v, 4);
                k += 4;
            }
        }
    return k;
}

static void receive(uint32_t senders)
{
    spools_stream_reader_t *rd;
    CHECK(spools_stream_listen(ct_world, "tcp:127.0.0.1:0", &rd));
    char addr[64];
    size_t need = 0;
    EXPECT_ERR(spools_stream_reader_address(rd, addr, 4, &need), SPOOLS_ERR_TRUNCATED, "bytes");
    CHECK(spools_stream_reader_address(rd, addr, sizeof addr, &need));
    ASSERT(need == strlen(addr) + 1, "needed %zu for %s", need, addr);
    if (ct_rank == 0) {
        printf("listening on %s\n", addr);
        fflush(stdout);
    }
    uint8_t *want = malloc(128 + (size_t)H * W * 4);
    ASSERT(want != NULL, "out of memory");
    uint32_t counts[6] = {0};
    for (;;) {
        spools_adu_info_t info;
        int32_t got = -1;
        CHECK(spools_stream_reader_next(rd, &info, &got));
        if (!got)
            break;
        ASSERT(info.stream >= 1 && info.stream <= 5 && info.adu == counts[info.stream],
               "stream %u adu %llu", info.stream, (unsigned long long)info.adu);
        size_t size = expected(info.stream, (uint32_t)info.adu, senders, want);
        ASSERT(info.size == size, "ADU of %llu bytes, expected %zu",
               (unsigned long long)info.size, size);
        char spec[64];
        snprintf(spec, sizeof spec, "u8[%llu] block on %u", (unsigned long long)info.size,
                 ct_size);
        spools_layout_t *l;
        CHECK(spools_layout_parse(spec, &l));
        size_t n = share(l), b = ((size_t)info.size + ct_size - 1) / ct_size, off = ct_rank * b;
        uint8_t *mine = malloc(n + 1);
        ASSERT(mine != NULL, "out of memory");
        if (info.stream == 1 && info.adu == 0) {
            /* A buffer of the wrong size on the last rank: refused everywhere, and the
             * ADU stays the next one. */
            int last = ct_rank == ct_size - 1;
            EXPECT_ERR(spools_stream_reader_recv(rd, mine, last ? n + 1 : n, l, NULL, &got),
                       SPOOLS_ERR_INVALID_ARG, "share");
            /* A NULL layout handle on the last rank: the same. */
            EXPECT_ERR(spools_stream_reader_recv(rd, mine, n, last ? NULL : l, NULL, &got),
                       SPOOLS_ERR_INVALID_ARG, "spools_layout_t");
            /* A NULL `got` on rank 0 in a look at the next ADU: rank 0 still takes part
             * (nothing waits for it) and fails alone. */
            spools_adu_info_t peek;
            spools_status_t st = spools_stream_reader_next(rd, &peek, ct_rank == 0 ? NULL : &got);
            if (ct_rank == 0)
                ct_expect_err(st, SPOOLS_ERR_INVALID_ARG, "got", "spools_stream_reader_next", __LINE__);
            else
                ASSERT(st == SPOOLS_OK && got == 1 && peek.stream == info.stream &&
                           peek.adu == info.adu,
                       "spools_stream_reader_next: %s", ct_status_name((int)st));
            /* A NULL `got` on the last rank in a skip: refused everywhere, nothing is
             * skipped, and the ADU stays the next one. */
            EXPECT_ERR(spools_stream_reader_skip(rd, NULL, last ? NULL : &got),
                       SPOOLS_ERR_INVALID_ARG, "got");
        }
        spools_adu_info_t again;
        CHECK(spools_stream_reader_recv(rd, mine, n, l, &again, &got));
        ASSERT(got == 1 && again.stream == info.stream && again.adu == info.adu,
               "recv gave another ADU");
        for (size_t k = 0; k < n; k++) {
            size_t at = off + k;
            if (info.stream < 4 && at >= 24 && at < 32)
                continue; /* the time */
            ASSERT(mine[k] == want[at], "stream %u ADU %llu byte %zu: %u, expected %u",
                   info.stream, (unsigned long long)info.adu, at, mine[k], want[at]);
        }
        if (info.stream < 4 && off <= 24 && 32 <= off + n) {
            uint64_t t;
            memcpy(&t, mine + (24 - off), 8);
            ASSERT(t > 1600000000000000ull, "time_us %llu", (unsigned long long)t);
        }
        free(mine);
        CHECK(spools_layout_destroy(l));
        counts[info.stream]++;
    }
    free(want);
    ASSERT(counts[1] == 3 && counts[2] == 4 && counts[3] == 4 && counts[4] == 1 &&
               counts[5] == 1,
           "received %u %u %u %u %u", counts[1], counts[2], counts[3], counts[4], counts[5]);
    spools_adu_info_t info;
    int32_t got = -1;
    CHECK(spools_stream_reader_skip(rd, &info, &got));
    ASSERT(got == 0, "an ADU after the end");
    CHECK(spools_stream_reader_close(rd));
    OK("received 13");
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: frames send|writer DEST | recv SENDERS | view DEST N\n");
        return 2;
    }
    ct_init("frames");
    if (strcmp(argv[1], "send") == 0) {
        send_frames(argv[2], 3, 1, "");
        OK("sent");
    } else if (strcmp(argv[1], "writer") == 0) {
        writer(argv[2]);
        OK("sent 2");
    } else if (strcmp(argv[1], "recv") == 0) {
        receive((uint32_t)atoi(argv[2]));
    } else if (strcmp(argv[1], "view") == 0 && argc == 4) {
        H = 64;
        W = 96;
        send_frames(argv[2], (uint32_t)atoi(argv[3]), 0, "c ");
        OK("sent");
    } else {
        ASSERT(0, "unknown mode %s", argv[1]);
    }
    ct_finalize();
    return 0;
}
