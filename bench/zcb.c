/* zcb: the feeder and drainer of bench/run, kept out of the way of the tool under test.
 *
 *   zcb src FILE CHUNK TARGET
 *     Sends FILE to TARGET: "-" (stdout), "tcp:HOST:PORT" or "unix:PATH" (connect, retried
 *     for 10 s while the listener comes up), or "tcp-listen:HOST:0" / "unix-listen:PATH"
 *     (announced on stdout as for sink, then the first client gets the bytes). CHUNK 0 moves the bytes without copying them
 *     (splice into a pipe, sendfile otherwise); CHUNK > 0 write()s slices of that size from
 *     a pre-faulted mapping (the seed table's "sender writes chunks of N bytes"). On a
 *     socket it then shuts down its write side and waits for the peer's EOF.
 *
 *   zcb sink OFFSETS SAMPLE SOURCE
 *     Drains SOURCE: "-" (stdin), "tcp-listen:HOST:0" or "unix-listen:PATH" (prints the
 *     port, or "ready", on stdout, then accepts one connection). Bytes are spliced to
 *     /dev/null, except 4 KiB windows at the comma-separated OFFSETS, which are read and
 *     written to the file SAMPLE so the harness can hash them. Prints the byte count.
 *
 *   zcb echo FILE OFFSETS SAMPLE TARGET
 *     Connects to TARGET (tcp: or unix:, as src), sends FILE with sendfile from a child
 *     process and shuts down its write side, while it drains what comes back as sink does
 *     (an echo server's answer: a relay to `cat`). Prints the byte count received.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WINDOW 4096
#define STEP (1 << 20)

static void die(const char *what) {
    fprintf(stderr, "zcb: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int unix_addr(const char *path, struct sockaddr_un *sa) {
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa->sun_path) {
        errno = ENAMETOOLONG;
        die(path);
    }
    strcpy(sa->sun_path, path);
    return socket(AF_UNIX, SOCK_STREAM, 0);
}

static int tcp_addr(const char *hostport, struct sockaddr_in *sa) {
    char host[64];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon - hostport >= (long)sizeof host) {
        errno = EINVAL;
        die(hostport);
    }
    memcpy(host, hostport, colon - hostport);
    host[colon - hostport] = 0;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons(atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        errno = EINVAL;
        die(hostport);
    }
    return socket(AF_INET, SOCK_STREAM, 0);
}

static int open_source(const char *s);

static int open_target(const char *t) {
    if (!strcmp(t, "-")) return 1;
    if (strstr(t, "-listen:")) return open_source(t);
    for (int tries = 0; tries < 2000; tries++) {
        int fd, rc;
        if (!strncmp(t, "tcp:", 4)) {
            struct sockaddr_in sa;
            fd = tcp_addr(t + 4, &sa);
            rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
        } else if (!strncmp(t, "unix:", 5)) {
            struct sockaddr_un sa;
            fd = unix_addr(t + 5, &sa);
            rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
        } else {
            errno = EINVAL;
            die(t);
        }
        if (fd < 0) die("socket");
        if (rc == 0) return fd;
        if (errno != ECONNREFUSED && errno != ENOENT) die(t);
        close(fd);
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    die(t);
    return -1;
}

static int open_source(const char *s) {
    if (!strcmp(s, "-")) return 0;
    int lfd;
    if (!strncmp(s, "tcp-listen:", 11)) {
        struct sockaddr_in sa;
        socklen_t len = sizeof sa;
        lfd = tcp_addr(s + 11, &sa);
        int one = 1;
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 1)) die(s);
        getsockname(lfd, (struct sockaddr *)&sa, &len);
        printf("%d\n", ntohs(sa.sin_port));
    } else if (!strncmp(s, "unix-listen:", 12)) {
        struct sockaddr_un sa;
        lfd = unix_addr(s + 12, &sa);
        if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 1)) die(s);
        printf("ready\n");
    } else {
        errno = EINVAL;
        die(s);
    }
    fflush(stdout);
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) die("accept");
    close(lfd);
    return fd;
}

static int src(const char *file, long chunk, const char *target) {
    int in = open(file, O_RDONLY);
    if (in < 0) die(file);
    struct stat st;
    fstat(in, &st);
    off_t size = st.st_size, off = 0;
    char *map = NULL;
    if (chunk > 0 && size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, in, 0);
        if (map == MAP_FAILED) die("mmap");
    }
    int out = open_target(target);
    struct stat ost;
    fstat(out, &ost);
    while (off < size) {
        ssize_t n;
        if (map) {
            size_t want = size - off < chunk ? size - off : chunk;
            n = write(out, map + off, want);
            if (n > 0) off += n;
        } else if (S_ISFIFO(ost.st_mode)) {
            n = splice(in, &off, out, NULL, size - off < STEP ? size - off : STEP, SPLICE_F_MOVE);
        } else {
            n = sendfile(out, in, &off, size - off < (1 << 30) ? size - off : (1 << 30));
        }
        if (n < 0 && errno != EINTR) die("src");
        if (n == 0) break;
    }
    if (out != 1) {
        char buf[4096];
        shutdown(out, SHUT_WR);
        while (read(out, buf, sizeof buf) > 0) {
        }
        close(out);
    }
    return 0;
}

/* Moves up to want bytes from in to /dev/null; returns the count, 0 at EOF. */
static long skip(int in, int is_pipe, int p[2], int null, long want) {
    if (is_pipe) {
        long n = splice(in, NULL, null, NULL, want < (1 << 30) ? want : (1 << 30), SPLICE_F_MOVE);
        if (n < 0) die("splice to /dev/null");
        return n;
    }
    long n = splice(in, NULL, p[1], NULL, want < STEP ? want : STEP, SPLICE_F_MOVE);
    if (n < 0) die("splice from socket");
    for (long left = n; left > 0;) {
        long m = splice(p[0], NULL, null, NULL, left, SPLICE_F_MOVE);
        if (m <= 0) die("splice pipe to /dev/null");
        left -= m;
    }
    return n;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static int drain(const char *offsets, const char *sample, int in);

static int sink(const char *offsets, const char *sample, const char *source) {
    return drain(offsets, sample, open_source(source));
}

static int echo(const char *file, const char *offsets, const char *sample, const char *target) {
    int fd = open_target(target);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        int in = open(file, O_RDONLY);
        if (in < 0) die(file);
        struct stat st;
        fstat(in, &st);
        off_t off = 0;
        while (off < st.st_size) {
            ssize_t n = sendfile(fd, in, &off, st.st_size - off < (1 << 30) ? st.st_size - off : (1 << 30));
            if (n < 0 && errno != EINTR) die("echo send");
            if (n == 0) break;
        }
        shutdown(fd, SHUT_WR);
        _exit(0);
    }
    int rc = drain(offsets, sample, fd);
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "zcb: echo: the sender failed\n");
        return 1;
    }
    return rc;
}

static int drain(const char *offsets, const char *sample, int in) {
    static long offs[256];
    int noffs = 0;
    for (const char *s = offsets; *s && noffs < 256; noffs++) {
        char *end;
        offs[noffs] = strtol(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
    }
    qsort(offs, noffs, sizeof offs[0], cmp_long);
    static char windows[256 * WINDOW], buf[1 << 16];
    int out = open(sample, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = open("/dev/null", O_WRONLY);
    if (out < 0 || null < 0) die(sample);
    struct stat st;
    fstat(in, &st);
    int is_pipe = S_ISFIFO(st.st_mode), p[2] = {-1, -1};
    if (!is_pipe) {
        if (pipe(p)) die("pipe");
        fcntl(p[1], F_SETPIPE_SZ, STEP);
    }
    /* Windows are read with 64 KiB reads: a pipe written with O_DIRECT (mbuffer -o PATH
     * does that) is in packet mode, where a read shorter than the packet drops the rest. */
    long pos = 0, n = 1;
    int i = 0;
    while (n > 0) {
        while (i < noffs && offs[i] + WINDOW <= pos) i++; /* window done (or overlapped) */
        if (i < noffs && pos < offs[i]) {
            n = skip(in, is_pipe, p, null, offs[i] - pos);
            pos += n;
        } else if (i < noffs) {
            n = read(in, buf, sizeof buf);
            if (n < 0 && errno != EINTR) die("read");
            for (int j = i; n > 0 && j < noffs && offs[j] < pos + n; j++) {
                long from = offs[j] > pos ? offs[j] : pos;
                long to = offs[j] + WINDOW < pos + n ? offs[j] + WINDOW : pos + n;
                if (to > from) memcpy(windows + (long)j * WINDOW + (from - offs[j]), buf + (from - pos), to - from);
            }
            if (n > 0) pos += n;
        } else {
            n = skip(in, is_pipe, p, null, 1L << 40);
            pos += n;
        }
    }
    /* a window past EOF is written short, so the hash differs from the expected one */
    for (int j = 0; j < noffs; j++) {
        long have = pos - offs[j] < WINDOW ? pos - offs[j] : WINDOW;
        if (have > 0 && write(out, windows + (long)j * WINDOW, have) != have) die("write sample");
    }
    printf("%ld\n", pos);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "src")) return src(argv[2], atol(argv[3]), argv[4]);
    if (argc == 5 && !strcmp(argv[1], "sink")) return sink(argv[2], argv[3], argv[4]);
    if (argc == 6 && !strcmp(argv[1], "echo")) return echo(argv[2], argv[3], argv[4], argv[5]);
    fprintf(stderr, "usage: zcb src FILE CHUNK TARGET | zcb sink OFFSETS SAMPLE SOURCE"
                    " | zcb echo FILE OFFSETS SAMPLE TARGET\n");
    return 2;
}
