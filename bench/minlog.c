/* bench/minlog.c - the least a `nc -lk >> log` server can do per short connection, as a floor
 * for zerocat pipe --keep-open and ncat -lk (issue 40): one thread, a blocking listener,
 * one connection at a time: accept4, read() into a 64 KiB buffer and write() each read to
 * the log (O_APPEND) until EOF, close. No poll, no fstat, no report, no clock. Not a
 * product: a bench peer.
 *
 * usage: minlog PORT LOG   (listens on 127.0.0.1:PORT, backlog 4096; until killed)
 * build: cc -O2 -o minlog bench/minlog.c */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static char buf[65536];

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: minlog PORT LOG\n");
		return 2;
	}
	int log = open(argv[2], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (log < 0 || l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 4096)) {
		perror("minlog");
		return 1;
	}
	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		ssize_t n;
		while ((n = read(c, buf, sizeof buf)) > 0) {
			for (ssize_t off = 0; off < n;) {
				ssize_t w = write(log, buf + off, n - off);
				if (w <= 0) {
					perror("minlog: write");
					return 1;
				}
				off += w;
			}
		}
		close(c);
	}
}
