/*
 * A raw TCP ping-pong between two hosts, without MPI or Spools: the floor that the
 * Spools and Open MPI latencies between network namespaces are read against.
 *
 * Usage: netpp serve PORT            (answers every message with one of the same size)
 *        netpp HOST PORT [SIZE...]   (default sizes 8 and 1048576)
 *
 * Both sides set TCP_NODELAY and busy-poll non-blocking sockets, as Spools' TCP
 * transport and Open MPI's tcp BTL do. For each size: a warm-up of about 0.1 s, then
 * 7 batches of about 30 ms each; the one-way latency of a batch is half its mean
 * round trip, the reported figure the median over the batches. The client prints one
 * JSON document on one line:
 *   {"benchmark":"netpp","points":[{"bytes":8,"latency_us":..,"bandwidth_MBps":..},..]}
 * The server ends when the client closes. Errors go to stderr, exit status 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCHES 7
#define MAX_SIZES 16

static void fail(const char *what)
{
    fprintf(stderr, "netpp: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Moves exactly len bytes; busy-polls the non-blocking socket. 0 on a clean EOF. */
static int xfer(int fd, char *buf, size_t len, int sending)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = sending ? send(fd, buf + done, len - done, MSG_NOSIGNAL)
                            : recv(fd, buf + done, len - done, 0);
        if (n > 0)
            done += (size_t)n;
        else if (n == 0 && !sending)
            return 0;
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            fail(sending ? "send" : "recv");
    }
    return 1;
}

static void tune(int fd)
{
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
        fail("TCP_NODELAY");
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
        fail("O_NONBLOCK");
}

static int serve(const char *port)
{
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(port))};
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
        fail("socket");
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0)
        fail("bind");
    int fd = accept(l, NULL, NULL);
    if (fd < 0)
        fail("accept");
    tune(fd);
    for (;;) {
        uint64_t size;
        if (!xfer(fd, (char *)&size, sizeof size, 0))
            return 0;
        char *buf = malloc(size ? size : 1);
        if (!buf)
            fail("malloc");
        for (;;) {
            uint64_t n;
            if (!xfer(fd, (char *)&n, sizeof n, 0))
                return 0;
            if (n == 0)
                break;
            for (uint64_t i = 0; i < n; i++) {
                xfer(fd, buf, size, 0);
                xfer(fd, buf, size, 1);
            }
            xfer(fd, (char *)&n, sizeof n, 1);
        }
        free(buf);
    }
}

/* n round trips of size bytes; returns seconds. */
static double trips(int fd, char *buf, uint64_t size, uint64_t n)
{
    double t0 = now();
    xfer(fd, (char *)&n, sizeof n, 1);
    for (uint64_t i = 0; i < n; i++) {
        xfer(fd, buf, size, 1);
        xfer(fd, buf, size, 0);
    }
    xfer(fd, (char *)&n, sizeof n, 0);
    return now() - t0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "serve") == 0)
        return serve(argv[2]);
    if (argc < 3) {
        fprintf(stderr, "usage: netpp serve PORT | netpp HOST PORT [SIZE...]\n");
        return 2;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(argv[1], argv[2], &hints, &ai) != 0) {
        fprintf(stderr, "netpp: cannot resolve %s\n", argv[1]);
        return 1;
    }
    int fd = -1;
    for (int tries = 0; tries < 200; tries++) { /* the server may not listen yet */
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        close(fd);
        fd = -1;
        usleep(10000);
    }
    if (fd < 0)
        fail("connect");
    tune(fd);
    uint64_t sizes[MAX_SIZES] = {8, 1048576};
    int nsizes = 2;
    if (argc > 3) {
        nsizes = 0;
        for (int i = 3; i < argc && nsizes < MAX_SIZES; i++)
            sizes[nsizes++] = strtoull(argv[i], NULL, 10);
    }
    printf("{\"benchmark\":\"netpp\",\"points\":[");
    for (int s = 0; s < nsizes; s++) {
        uint64_t size = sizes[s], zero = 0;
        char *buf = calloc(1, size ? size : 1);
        if (!buf)
            fail("malloc");
        xfer(fd, (char *)&size, sizeof size, 1);
        /* warm-up: grow the trip count until 0.1 s passes */
        uint64_t n = 1;
        double t = trips(fd, buf, size, n);
        while (t < 0.1 && n < (1u << 24)) {
            n *= 2;
            t = trips(fd, buf, size, n);
        }
        uint64_t per = (uint64_t)(n * 0.03 / t) + 1;
        double lat[BATCHES];
        for (int b = 0; b < BATCHES; b++)
            lat[b] = trips(fd, buf, size, per) / per / 2 * 1e6;
        qsort(lat, BATCHES, sizeof lat[0], cmp);
        double med = lat[BATCHES / 2];
        printf("%s{\"bytes\":%llu,\"latency_us\":%.3f,\"bandwidth_MBps\":%.1f}", s ? "," : "",
               (unsigned long long)size, med, size / med);
        xfer(fd, (char *)&zero, sizeof zero, 1);
        free(buf);
    }
    printf("]}\n");
    close(fd);
    return 0;
}
