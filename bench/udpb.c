/* udpb: the UDP sender and sink of bench/run's udp group.
 *
 *   udpb sink
 *     Binds 127.0.0.1:0, prints the port, receives (recvmmsg) until 1 s passes without a
 *     datagram after the first one, then prints "DATAGRAMS BYTES SECONDS BAD": SECONDS from
 *     the first datagram to the last, BAD the datagrams that came out of order (a sequence
 *     number not above the one before), or altered (a payload other than what udpb send
 *     writes). Loss is not BAD: it is the difference to the count sent. An empty datagram
 *     (zerocat's end of stream) is not counted.
 *
 *   udpb send HOST:PORT SIZE COUNT
 *     Sends COUNT datagrams of SIZE bytes (at least 8) as fast as sendmmsg goes, 64 a call:
 *     each holds its sequence number (8 bytes, big-endian) then the number's low byte.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define SLOT 65536

static void die(const char *what) {
    fprintf(stderr, "udpb: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int sink(void) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int big = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || getsockname(fd, (struct sockaddr *)&sa, &len)) die("bind");
    printf("%d\n", ntohs(sa.sin_port));
    fflush(stdout);
    static char bufs[BATCH][SLOT];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    long long count = 0, bytes = 0, bad = 0, last_seq = -1;
    double first = 0, last = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, count ? 1000 : 60000);
        if (r == 0) break;
        if (r < 0) {
            if (errno == EINTR) continue;
            die("poll");
        }
        memset(msgs, 0, sizeof msgs);
        for (int i = 0; i < BATCH; i++) {
            iov[i].iov_base = bufs[i];
            iov[i].iov_len = SLOT;
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        int n = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, NULL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            die("recvmmsg");
        }
        double t = now();
        if (!count) first = t;
        last = t;
        for (int i = 0; i < n; i++) {
            unsigned len = msgs[i].msg_len;
            unsigned char *d = (unsigned char *)bufs[i];
            /* An empty datagram is a zerocat sender's end of stream (issue 40 item 3): no
             * data, neither counted nor bad. */
            if (len == 0) continue;
            count++;
            bytes += len;
            if (len < 8) {
                bad++;
                continue;
            }
            long long seq = 0;
            for (int k = 0; k < 8; k++) seq = seq << 8 | d[k];
            int ok = seq > last_seq;
            for (unsigned k = 8; ok && k < len; k++) ok = d[k] == (unsigned char)seq;
            if (!ok) bad++;
            last_seq = seq;
        }
    }
    printf("%lld %lld %.6f %lld\n", count, bytes, last - first, bad);
    return 0;
}

static int sender(const char *target, long size, long count) {
    char host[64];
    const char *colon = strrchr(target, ':');
    if (!colon || colon - target >= (long)sizeof host || size < 8 || size > SLOT) {
        errno = EINVAL;
        die(target);
    }
    memcpy(host, target, colon - target);
    host[colon - target] = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) die(host);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) die("connect");
    static char bufs[BATCH][SLOT];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    for (long seq = 0; seq < count;) {
        int n = count - seq < BATCH ? count - seq : BATCH;
        memset(msgs, 0, sizeof msgs);
        for (int i = 0; i < n; i++) {
            long s = seq + i;
            for (int k = 0; k < 8; k++) bufs[i][k] = (char)(s >> (56 - 8 * k));
            memset(bufs[i] + 8, (unsigned char)s, size - 8);
            iov[i].iov_base = bufs[i];
            iov[i].iov_len = size;
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        int sent = sendmmsg(fd, msgs, n, 0);
        if (sent < 0) {
            if (errno == EINTR || errno == ENOBUFS || errno == ECONNREFUSED) continue;
            die("sendmmsg");
        }
        seq += sent;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "sink")) return sink();
    if (argc == 5 && !strcmp(argv[1], "send")) return sender(argv[2], atol(argv[3]), atol(argv[4]));
    fprintf(stderr, "usage: udpb sink | udpb send HOST:PORT SIZE COUNT\n");
    return 2;
}
