/* refrelay: the two simple reference relays of bench/run, against which zerocat relay's
 * CPU per byte and throughput are judged (issue 15's targets).
 *
 *   refrelay rw|splice LISTEN TARGET
 *     Accepts one connection on LISTEN ("tcp-listen:HOST:0", which prints the port on
 *     stdout, or "unix-listen:PATH", which prints "ready"), connects to TARGET
 *     ("tcp:HOST:PORT" or "unix:PATH"), relays both ways until both directions reached EOF
 *     (each EOF passed on with shutdown(SHUT_WR)), and exits 0.
 *
 *   rw:     blocking, one thread per direction, read()/write() through a 1 MiB buffer.
 *   splice: blocking, one thread per direction, splice() through a 1 MiB pipe
 *           (F_SETPIPE_SZ), socket -> pipe -> socket.
 *
 * No event loop, no readiness, no choice of path: the least a relay can do per byte, as a
 * yardstick. Any error ends the process with a message and exit 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define SIZE (1 << 20)

static int use_splice;

static void die(const char *what) {
    fprintf(stderr, "refrelay: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int addr(const char *spec, struct sockaddr_storage *ss, socklen_t *len) {
    memset(ss, 0, sizeof *ss);
    if (!strncmp(spec, "unix:", 5)) {
        struct sockaddr_un *sa = (struct sockaddr_un *)ss;
        if (strlen(spec + 5) >= sizeof sa->sun_path) {
            errno = ENAMETOOLONG;
            die(spec);
        }
        sa->sun_family = AF_UNIX;
        strcpy(sa->sun_path, spec + 5);
        *len = sizeof *sa;
        return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    }
    if (!strncmp(spec, "tcp:", 4)) {
        struct sockaddr_in *sa = (struct sockaddr_in *)ss;
        char host[64];
        const char *colon = strrchr(spec + 4, ':');
        if (!colon || colon - (spec + 4) >= (long)sizeof host) {
            errno = EINVAL;
            die(spec);
        }
        memcpy(host, spec + 4, colon - (spec + 4));
        host[colon - (spec + 4)] = 0;
        sa->sin_family = AF_INET;
        sa->sin_port = htons(atoi(colon + 1));
        if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
            errno = EINVAL;
            die(spec);
        }
        *len = sizeof *sa;
        return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    }
    errno = EINVAL;
    die(spec);
    return -1;
}

static int accept_one(const char *listen_spec) {
    char spec[256];
    struct sockaddr_storage ss;
    socklen_t len;
    int tcp = !strncmp(listen_spec, "tcp-listen:", 11);
    if (!tcp && strncmp(listen_spec, "unix-listen:", 12)) {
        errno = EINVAL;
        die(listen_spec);
    }
    snprintf(spec, sizeof spec, "%s:%s", tcp ? "tcp" : "unix", strchr(listen_spec, ':') + 1);
    int lfd = addr(spec, &ss, &len), one = 1;
    if (lfd < 0) die("socket");
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(lfd, (struct sockaddr *)&ss, len) || listen(lfd, 1)) die(listen_spec);
    if (tcp) {
        getsockname(lfd, (struct sockaddr *)&ss, &len);
        printf("%d\n", ntohs(((struct sockaddr_in *)&ss)->sin_port));
    } else {
        printf("ready\n");
    }
    fflush(stdout);
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) die("accept");
    close(lfd);
    return fd;
}

static int dial(const char *spec) {
    struct sockaddr_storage ss;
    socklen_t len;
    int fd = addr(spec, &ss, &len);
    if (fd < 0) die("socket");
    if (connect(fd, (struct sockaddr *)&ss, len)) die(spec);
    return fd;
}

struct dir {
    int src, dst;
};

static void write_all(int fd, const char *p, ssize_t n) {
    while (n > 0) {
        ssize_t m = write(fd, p, n);
        if (m < 0 && errno == EINTR) continue;
        if (m <= 0) die("write");
        p += m;
        n -= m;
    }
}

static void *pump(void *arg) {
    struct dir *d = arg;
    if (use_splice) {
        int p[2];
        if (pipe2(p, O_CLOEXEC)) die("pipe");
        if (fcntl(p[1], F_SETPIPE_SZ, SIZE) < 0) die("F_SETPIPE_SZ 1 MiB");
        for (;;) {
            ssize_t n = splice(d->src, NULL, p[1], NULL, SIZE, SPLICE_F_MOVE);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) die("splice in");
            if (n == 0) break;
            while (n > 0) {
                ssize_t m = splice(p[0], NULL, d->dst, NULL, n, SPLICE_F_MOVE);
                if (m < 0 && errno == EINTR) continue;
                if (m <= 0) die("splice out");
                n -= m;
            }
        }
    } else {
        char *buf = malloc(SIZE);
        if (!buf) die("malloc");
        for (;;) {
            ssize_t n = read(d->src, buf, SIZE);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) die("read");
            if (n == 0) break;
            write_all(d->dst, buf, n);
        }
        free(buf);
    }
    if (shutdown(d->dst, SHUT_WR) && errno != ENOTCONN) die("shutdown");
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "rw") && strcmp(argv[1], "splice"))) {
        fprintf(stderr, "usage: refrelay rw|splice LISTEN TARGET\n");
        return 2;
    }
    use_splice = !strcmp(argv[1], "splice");
    int a = accept_one(argv[2]);
    int b = dial(argv[3]);
    struct dir ab = {a, b}, ba = {b, a};
    pthread_t t;
    if (pthread_create(&t, NULL, pump, &ba)) die("pthread_create");
    pump(&ab);
    pthread_join(t, NULL);
    return 0;
}
