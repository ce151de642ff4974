/* fan: many concurrent bulk streams through a relay, every byte checked (issue 15's
 * "1,000 concurrent bulk connections").
 *
 *   fan N BYTES
 *     Listens on 127.0.0.1:0 (the backend) and prints its port; then reads the relay's port
 *     from stdin, opens N connections to 127.0.0.1:RELAYPORT at once and sends on each an
 *     8-byte connection number followed by BYTES bytes of a pattern that differs per
 *     connection (a mix-up between streams, a lost, repeated or reordered byte cannot
 *     compare equal). The backend accepts the relayed connections and compares every byte
 *     against the pattern of the number its stream starts with. One thread, epoll, non-blocking.
 *     Prints "ok N TOTAL SECONDS" (exit 0), or "FAIL what" (exit 1). Gives up after 300 s.
 *
 *   fan N BYTES RATE [spread]
 *     The same, each client holding itself to RATE bytes/s (a tenth of a second's worth every
 *     100 ms, all clients in step; with "spread", client i's tenth comes at i % 10 x 10 ms
 *     into each 100 ms, as independent clients' would): the unpaced side of "1,000 paced
 *     connections cost no more than 1,000 unpaced ones at the same total rate" (issue 41;
 *     bench/lib/ops.py).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define POOL (1 << 20)
#define SLACK (256 << 10)
#define STRIDE 7919L

static unsigned char pool[POOL + SLACK];

enum { CLIENT, SERVER, LISTENER };

struct conn {
    int kind, fd;
    long id;      /* client: its number; server: from the header (-1 until read) */
    long pos;     /* bytes of the pattern sent (client) or checked (server) */
    unsigned char head[8];
    int head_got;
    int done;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void fail(const char *what, long id) {
    printf("FAIL %s (connection %ld): %s\n", what, id, errno ? strerror(errno) : "");
    fflush(stdout);
    exit(1);
}

static const unsigned char *pattern(long id, long pos) { return pool + (id * STRIDE + pos) % POOL; }

/* Sends what the socket takes (and, with a rate, what the client's budget allows);
 * closes the client once all its bytes went. */
static void client_send(struct conn *c, long bytes, long *budget) {
    for (;;) {
        ssize_t w;
        if (c->head_got < 8) {
            w = write(c->fd, c->head + c->head_got, 8 - c->head_got);
            if (w > 0) c->head_got += w;
        } else {
            long left = bytes - c->pos;
            if (left == 0) {
                close(c->fd); /* the send queue still drains; the relay sees EOF */
                c->done = 1;
                return;
            }
            long want = left < SLACK ? left : SLACK;
            if (budget && *budget < want) want = *budget;
            if (want == 0) return;
            w = write(c->fd, pattern(c->id, c->pos), want);
            if (w > 0) {
                c->pos += w;
                if (budget) *budget -= w;
            }
        }
        if (w < 0) {
            if (errno == EAGAIN) { errno = 0; return; }
            fail("send", c->id);
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: fan N BYTES [RATE [spread]]\n");
        return 2;
    }
    long n = atol(argv[1]), bytes = atol(argv[2]), rate = argc >= 4 ? atol(argv[3]) : 0;
    int spread = argc == 5 && !strcmp(argv[4], "spread");
    long ticks = 0;
    struct rlimit rl = {0};
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)(2 * n + 64)) {
        rl.rlim_cur = 2 * n + 64;
        if (rl.rlim_max < rl.rlim_cur) rl.rlim_max = rl.rlim_cur;
        if (setrlimit(RLIMIT_NOFILE, &rl)) fail("setrlimit", -1);
    }
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < sizeof pool; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        pool[i] = (unsigned char)x;
    }
    memcpy(pool + POOL, pool, SLACK); /* a slice of up to SLACK bytes never wraps */

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, (int)n) ||
        getsockname(lfd, (struct sockaddr *)&sa, &len))
        fail("backend listener", -1);
    printf("%d\n", ntohs(sa.sin_port));
    fflush(stdout);
    int relay_port;
    if (scanf("%d", &relay_port) != 1) fail("no relay port on stdin", -1);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct conn *lc = calloc(1, sizeof *lc);
    lc->kind = LISTENER, lc->fd = lfd;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = lc};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);

    double start = now(), tick = start;
    struct conn **clients = calloc(n, sizeof *clients);
    long *budget = rate ? calloc(n, sizeof *budget) : NULL;
    struct sockaddr_in ra = {.sin_family = AF_INET, .sin_port = htons(relay_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (long i = 0; i < n; i++) {
        struct conn *c = calloc(1, sizeof *c);
        c->kind = CLIENT, c->id = i;
        clients[i] = c;
        for (int k = 0; k < 8; k++) c->head[k] = (unsigned char)(i >> (8 * k));
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (connect(c->fd, (struct sockaddr *)&ra, sizeof ra) && errno != EINPROGRESS)
            fail("connect", i);
        errno = 0;
        ev.events = EPOLLOUT | EPOLLET, ev.data.ptr = c;
        epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    }

    static unsigned char buf[SLACK];
    long finished = 0, total = 0;
    struct epoll_event evs[256];
    while (finished < n) {
        if (now() - start > 300) fail("timed out", finished);
        if (rate && now() >= tick) { /* the next tenth of a second of every client (in step) or a tenth of them */
            tick += spread ? 0.01 : 0.1;
            long phase = ticks++ % 10;
            for (long i = 0; i < n; i++) {
                if (clients[i]->done || (spread && i % 10 != phase)) continue;
                budget[i] += rate / 10;
                client_send(clients[i], bytes, &budget[i]);
            }
        }
        int wait_ms = rate ? (int)((tick - now()) * 1000) + 1 : 1000;
        int k = epoll_wait(ep, evs, 256, wait_ms < 0 ? 0 : wait_ms);
        for (int e = 0; e < k; e++) {
            struct conn *c = evs[e].data.ptr;
            if (c->kind == LISTENER) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    struct conn *s = calloc(1, sizeof *s);
                    s->kind = SERVER, s->fd = fd, s->id = -1;
                    ev.events = EPOLLIN | EPOLLET, ev.data.ptr = s;
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                }
                errno = 0;
            } else if (c->kind == CLIENT && !c->done) {
                client_send(c, bytes, rate ? &budget[c->id] : NULL);
            } else if (c->kind == SERVER && !c->done) {
                for (;;) {
                    ssize_t r = read(c->fd, buf, sizeof buf);
                    if (r < 0) {
                        if (errno == EAGAIN) { errno = 0; break; }
                        fail("receive", c->id);
                    }
                    if (r == 0) {
                        if (c->id < 0 || c->pos != bytes) {
                            errno = 0;
                            fprintf(stdout, "FAIL connection %ld ended after %ld of %ld bytes\n", c->id, c->pos, bytes);
                            exit(1);
                        }
                        close(c->fd);
                        c->done = 1;
                        finished++;
                        break;
                    }
                    unsigned char *p = buf;
                    while (r > 0 && c->head_got < 8) {
                        c->head[c->head_got++] = *p++, r--;
                        if (c->head_got == 8) {
                            c->id = 0;
                            for (int b = 0; b < 8; b++) c->id |= (long)c->head[b] << (8 * b);
                            if (c->id < 0 || c->id >= n) fail("a stream with a bad header", c->id);
                        }
                    }
                    if (r > 0) {
                        if (c->pos + r > bytes) fail("more bytes than were sent", c->id);
                        if (memcmp(p, pattern(c->id, c->pos), r)) {
                            long at = 0;
                            while (p[at] == pattern(c->id, c->pos)[at]) at++;
                            printf("FAIL connection %ld differs at byte %ld\n", c->id, c->pos + at);
                            exit(1);
                        }
                        c->pos += r;
                        total += r;
                    }
                }
            }
        }
    }
    printf("ok %ld %ld %.3f\n", n, total, now() - start);
    return 0;
}
