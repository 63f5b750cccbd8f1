/*
 * Raw-limit probes of this host, without MPI: the floors that the Spools and
 * Open MPI figures are read against.
 *
 * Usage: raw
 *
 *  (a) memcpy bandwidth of one thread for 64 KiB, 1 MiB and 16 MiB (GB/s,
 *      10^9 B/s of bytes copied);
 *  (b) TCP ping-pong over loopback between two processes (fork), 8-byte
 *      messages, TCP_NODELAY, both sides busy-polling non-blocking sockets:
 *      one-way latency in us (half the round trip);
 *  (c) TCP stream bandwidth over loopback with 1 MiB writes (MB/s, 10^6 B/s);
 *  (d) pipe wake-up latency: a process blocked in read() on a pipe is woken by
 *      a one-byte write from the other, and answers the same way (one-way us).
 *
 * Every latency figure is the median over 7 timed batches of ~30 ms each
 * after a warm-up; memcpy and TCP stream figures are medians over 7 and 5
 * runs. Prints one JSON document on one line of stdout:
 *   {"benchmark":"raw","memcpy_GBps":{"65536":..,"1048576":..,"16777216":..},
 *    "tcp_pingpong_us":..,"tcp_stream_MBps":..,"pipe_wake_us":..}
 * Errors go to stderr with a non-zero exit status.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCHES 7
#define BATCH_SECONDS 0.03
#define WARMUP_SECONDS 0.1
#define MEMCPY_RUNS 7
#define STREAM_RUNS 5
#define STREAM_CHUNK (1u << 20)
#define PINGPONG_BYTES 8

/* Print an error (with errno's text when `with_errno`) and exit. */
static void die(int with_errno, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "raw[%d]: ", (int)getpid());
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (with_errno)
        fprintf(stderr, ": %s", strerror(saved));
    fputc('\n', stderr);
    exit(1);
}

static double now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        die(1, "clock_gettime");
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void *alloc_touched(size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, size) != 0)
        die(0, "cannot allocate %zu B", size);
    memset(p, 0x5a, size);
    return p;
}

/* Called through a volatile pointer so that the compiler cannot elide or merge the copies. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

/* (a) memcpy bandwidth for one size, GB/s. */
static double memcpy_gbps(size_t size)
{
    unsigned char *src = alloc_touched(size);
    unsigned char *dst = alloc_touched(size);
    double runs[MEMCPY_RUNS];

    /* Double the copies per run until a run lasts at least 20 ms (this also warms up). */
    long reps = 1;
    for (;;) {
        double t0 = now();
        for (long i = 0; i < reps; i++)
            copy_fn(dst, src, size);
        if (now() - t0 >= 0.02)
            break;
        reps *= 2;
    }
    for (int r = 0; r < MEMCPY_RUNS; r++) {
        double t0 = now();
        for (long i = 0; i < reps; i++)
            copy_fn(dst, src, size);
        runs[r] = (double)size * (double)reps / (now() - t0) / 1e9;
    }
    if (memcmp(dst, src, size) != 0)
        die(0, "memcpy of %zu B produced a wrong copy", size);
    free(src);
    free(dst);
    return median(runs, MEMCPY_RUNS);
}

/* A listening TCP socket on 127.0.0.1 with a kernel-chosen port, returned in *port. */
static int tcp_listen(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die(1, "socket");
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
        die(1, "setsockopt(SO_REUSEADDR)");
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0)
        die(1, "bind(127.0.0.1:0)");
    if (listen(fd, 1) != 0)
        die(1, "listen");
    socklen_t len = sizeof addr;
    if (getsockname(fd, (struct sockaddr *)&addr, &len) != 0)
        die(1, "getsockname");
    *port = ntohs(addr.sin_port);
    return fd;
}

static int tcp_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die(1, "socket");
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0)
        die(1, "connect(127.0.0.1:%u)", (unsigned)port);
    return fd;
}

static int tcp_accept(int listen_fd)
{
    int fd = accept(listen_fd, NULL, NULL);
    if (fd < 0)
        die(1, "accept");
    return fd;
}

static void set_nodelay(int fd)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        die(1, "setsockopt(TCP_NODELAY)");
}

static void set_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        die(1, "fcntl(O_NONBLOCK)");
}

/*
 * Receive exactly `len` bytes. On a non-blocking socket this busy-polls.
 * Returns 0 on success, -1 if the peer closed the connection before any byte.
 */
static int recv_all(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = recv(fd, (char *)buf + got, len - got, 0);
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0) {
            if (got == 0)
                return -1;
            die(0, "connection closed after %zu of %zu B", got, len);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            die(1, "recv");
        }
    }
    return 0;
}

/* Send exactly `len` bytes (busy-retrying if the socket is non-blocking and full). */
static void send_all(int fd, const void *buf, size_t len)
{
    size_t sent = 0;
    while (sent < len) {
        ssize_t n = send(fd, (const char *)buf + sent, len - sent, MSG_NOSIGNAL);
        if (n >= 0)
            sent += (size_t)n;
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            die(1, "send");
    }
}

/* Wait for a forked child and fail unless it exited with status 0. */
static void reap(pid_t pid, const char *what)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            die(1, "waitpid(%s)", what);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die(0, "%s child failed (wait status %d)", what, status);
}

static pid_t fork_or_die(void)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        die(1, "fork");
    return pid;
}

/*
 * Median one-way latency (us) of `round_trip` (ctx given), measured as
 * BATCHES batches sized to ~BATCH_SECONDS after a warm-up of `warmup` trips
 * or WARMUP_SECONDS, whichever ends first (a busy host makes trips slow).
 */
static double time_round_trips(void (*round_trip)(void *), void *ctx, long warmup)
{
    double t0 = now(), elapsed = 0;
    long done = 0;
    while (done < warmup && elapsed < WARMUP_SECONDS) {
        round_trip(ctx);
        done++;
        elapsed = now() - t0;
    }
    double per = elapsed / (double)done;
    long iters = per > 0 ? (long)(BATCH_SECONDS / per) : 1000000;
    if (iters < 1)
        iters = 1;

    double batch_us[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double s = now();
        for (long i = 0; i < iters; i++)
            round_trip(ctx);
        batch_us[b] = (now() - s) / (double)iters / 2.0 * 1e6;
    }
    return median(batch_us, BATCHES);
}

static void tcp_round_trip(void *ctx)
{
    int fd = *(int *)ctx;
    uint64_t msg = 0x0123456789abcdefULL, back = 0;
    send_all(fd, &msg, sizeof msg);
    if (recv_all(fd, &back, sizeof back) != 0)
        die(0, "TCP ping-pong peer closed the connection");
    if (back != msg)
        die(0, "TCP ping-pong echo mismatch");
}

/* (b) TCP loopback ping-pong, 8 B, both sides busy-polling: one-way us. */
static double tcp_pingpong_us(void)
{
    uint16_t port = 0;
    int lfd = tcp_listen(&port);
    pid_t pid = fork_or_die();
    if (pid == 0) {
        close(lfd);
        int fd = tcp_connect(port);
        set_nodelay(fd);
        set_nonblocking(fd);
        unsigned char buf[PINGPONG_BYTES];
        while (recv_all(fd, buf, sizeof buf) == 0)
            send_all(fd, buf, sizeof buf);
        close(fd);
        _exit(0);
    }
    int fd = tcp_accept(lfd);
    close(lfd);
    set_nodelay(fd);
    set_nonblocking(fd);
    double us = time_round_trips(tcp_round_trip, &fd, 20000);
    if (close(fd) != 0)
        die(1, "close");
    reap(pid, "TCP ping-pong");
    return us;
}

/* Have the peer stream `total` bytes, read them all; returns elapsed seconds. */
static double stream_once(int fd, uint64_t total, unsigned char *buf)
{
    double t0 = now();
    send_all(fd, &total, sizeof total);
    uint64_t got = 0;
    while (got < total) {
        ssize_t n = read(fd, buf, STREAM_CHUNK);
        if (n > 0)
            got += (uint64_t)n;
        else if (n == 0)
            die(0, "TCP stream closed after %llu of %llu B", (unsigned long long)got,
                (unsigned long long)total);
        else if (errno != EINTR)
            die(1, "read(TCP stream)");
    }
    return now() - t0;
}

/* (c) TCP loopback stream bandwidth with 1 MiB writes: MB/s. */
static double tcp_stream_mbps(void)
{
    uint16_t port = 0;
    int lfd = tcp_listen(&port);
    pid_t pid = fork_or_die();
    if (pid == 0) {
        close(lfd);
        int fd = tcp_connect(port);
        unsigned char *buf = alloc_touched(STREAM_CHUNK);
        uint64_t total = 0;
        /* Each request is the byte count to send; the connection closing ends the loop. */
        while (recv_all(fd, &total, sizeof total) == 0) {
            for (uint64_t left = total; left > 0;) {
                size_t n = left < STREAM_CHUNK ? (size_t)left : STREAM_CHUNK;
                send_all(fd, buf, n);
                left -= n;
            }
        }
        free(buf);
        close(fd);
        _exit(0);
    }
    int fd = tcp_accept(lfd);
    close(lfd);
    unsigned char *buf = alloc_touched(STREAM_CHUNK);

    /* Warm-up with 64 MiB, which also sizes the runs to ~0.2 s each (64 MiB .. 16 GiB). */
    uint64_t warm = 64ull << 20;
    double rate = (double)warm / stream_once(fd, warm, buf);
    double want = rate * 0.2 / STREAM_CHUNK;
    uint64_t chunks = want < 64 ? 64 : (want > 16384 ? 16384 : (uint64_t)want);
    uint64_t total = chunks * STREAM_CHUNK;

    double runs[STREAM_RUNS];
    for (int r = 0; r < STREAM_RUNS; r++)
        runs[r] = (double)total / stream_once(fd, total, buf) / 1e6;
    if (close(fd) != 0)
        die(1, "close");
    free(buf);
    reap(pid, "TCP stream");
    return median(runs, STREAM_RUNS);
}

struct pipe_pair {
    int to_child;
    int from_child;
};

/* Read one byte, blocking; returns 0, or -1 at end of file. */
static int read_byte(int fd, unsigned char *b)
{
    for (;;) {
        ssize_t n = read(fd, b, 1);
        if (n == 1)
            return 0;
        if (n == 0)
            return -1;
        if (errno != EINTR)
            die(1, "read(pipe)");
    }
}

static void write_byte(int fd, unsigned char b)
{
    for (;;) {
        ssize_t n = write(fd, &b, 1);
        if (n == 1)
            return;
        if (n < 0 && errno != EINTR)
            die(1, "write(pipe)");
    }
}

static void pipe_round_trip(void *ctx)
{
    const struct pipe_pair *p = ctx;
    unsigned char b = 0;
    write_byte(p->to_child, 'p');
    if (read_byte(p->from_child, &b) != 0 || b != 'p')
        die(0, "pipe ping-pong peer went away");
}

/* (d) Pipe wake-up: blocking read woken by a one-byte write; one-way us. */
static double pipe_wake_us(void)
{
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0)
        die(1, "pipe");
    pid_t pid = fork_or_die();
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        unsigned char b = 0;
        while (read_byte(down[0], &b) == 0)
            write_byte(up[1], b);
        _exit(0);
    }
    close(down[0]);
    close(up[1]);
    struct pipe_pair p = {down[1], up[0]};
    double us = time_round_trips(pipe_round_trip, &p, 2000);
    if (close(down[1]) != 0)
        die(1, "close");
    reap(pid, "pipe");
    close(up[0]);
    return us;
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "usage: raw (no arguments)\n");
        return 2;
    }
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        die(1, "signal(SIGPIPE)");

    static const size_t copy_sizes[] = {65536, 1048576, 16777216};
    double copy[3];
    for (int i = 0; i < 3; i++)
        copy[i] = memcpy_gbps(copy_sizes[i]);
    double tcp_us = tcp_pingpong_us();
    double stream = tcp_stream_mbps();
    double pipe_us = pipe_wake_us();

    printf("{\"benchmark\":\"raw\",\"memcpy_GBps\":{");
    for (int i = 0; i < 3; i++)
        printf("%s\"%zu\":%.3f", i ? "," : "", copy_sizes[i], copy[i]);
    printf("},\"tcp_pingpong_us\":%.4f,\"tcp_stream_MBps\":%.1f,\"pipe_wake_us\":%.4f}\n", tcp_us,
           stream, pipe_us);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("raw: writing stdout");
        return 1;
    }
    return 0;
}
