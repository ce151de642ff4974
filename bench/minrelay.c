/* bench/minrelay.c - the least a TCP relay can do per small request, as a floor to measure
 * zerocat and HAProxy against (issue 45): one thread, one epoll (edge-triggered, each fd
 * registered once for in and out), accept4 non-blocking, connect non-blocking to each
 * upstream in turn (round-robin), and per direction read() into a 16 KiB buffer then write()
 * at once; a partial write keeps the rest and waits for EPOLLOUT. EOF is passed on with
 * shutdown(SHUT_WR); both ends shut or any error: both closed. No timers, no reports, no
 * clock_gettime, no allocation after the connection's. Not a product: a bench peer.
 *
 * usage: minrelay LISTEN_PORT UPSTREAM_PORT... (all on 127.0.0.1)
 * build: cc -O2 -o minrelay bench/minrelay.c */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 16384

struct conn;
struct side {
	struct conn *c;
	int fd, idx; /* idx 0: client, 1: upstream */
};
struct dir { /* bytes from sides[from] to sides[1-from] */
	char buf[BUF];
	size_t start, end;
	int eof, shut;
};
struct conn {
	struct side s[2];
	struct dir d[2];
	int in_ready[2], out_ready[2], dead, queued;
};

static int ep;


/* Moves what it can one way; -1: the connection is over (error). */
static int pump(struct conn *c, int from)
{
	struct dir *d = &c->d[from];
	int to = 1 - from;
	for (;;) {
		if (d->start < d->end) {
			if (!c->out_ready[to])
				return 0;
			ssize_t n = write(c->s[to].fd, d->buf + d->start, d->end - d->start);
			if (n < 0) {
				if (errno == EAGAIN) {
					c->out_ready[to] = 0;
					return 0;
				}
				return -1;
			}
			d->start += n;
			if (d->start < d->end)
				continue;
			d->start = d->end = 0;
		}
		if (d->eof) {
			if (!d->shut) {
				shutdown(c->s[to].fd, SHUT_WR);
				d->shut = 1;
			}
			return 0;
		}
		if (!c->in_ready[from])
			return 0;
		ssize_t n = read(c->s[from].fd, d->buf, BUF);
		if (n < 0) {
			if (errno == EAGAIN) {
				c->in_ready[from] = 0;
				return 0;
			}
			return -1;
		}
		if (n == 0)
			d->eof = 1;
		d->end = n;
	}
}

/* MINRELAY_DEFER: read once from a ready source into its empty buffer, without writing:
 * the writes of a batch come after all its reads (HAProxy's order: receive in the poller's
 * pass, send when the tasks run). */
static int fill(struct conn *c, int from)
{
	struct dir *d = &c->d[from];
	if (d->eof || d->end || !c->in_ready[from])
		return 0;
	ssize_t n = read(c->s[from].fd, d->buf, BUF);
	if (n < 0) {
		if (errno == EAGAIN) {
			c->in_ready[from] = 0;
			return 0;
		}
		return -1;
	}
	if (n == 0)
		d->eof = 1;
	d->end = n;
	return 0;
}

int main(int argc, char **argv)
{
	int defer = getenv("MINRELAY_DEFER") != NULL;
	static struct conn *touched[256];
	if (argc < 3) {
		fprintf(stderr, "usage: minrelay LISTEN_PORT UPSTREAM_PORT...\n");
		return 2;
	}
	int nup = argc - 2, next = 0;
	struct sockaddr_in la = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1])),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(lfd, (struct sockaddr *)&la, sizeof la) || listen(lfd, 4096)) {
		perror("listen");
		return 1;
	}
	ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	struct epoll_event evs[256];
	struct conn *dead[256];
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1), ndead = 0, ntouched = 0;
		for (int i = 0; i < n; i++) {
			struct side *s = evs[i].data.ptr;
			if (!s) {
				int cfd;
				while ((cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					struct sockaddr_in ua = la;
					ua.sin_port = htons(atoi(argv[2 + next]));
					next = (next + 1) % nup;
					int ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
					if (connect(ufd, (struct sockaddr *)&ua, sizeof ua) && errno != EINPROGRESS) {
						close(cfd);
						close(ufd);
						continue;
					}
					struct conn *c = calloc(1, sizeof *c);
					c->s[0] = (struct side){c, cfd, 0};
					c->s[1] = (struct side){c, ufd, 1};
					for (int k = 0; k < 2; k++) {
						struct epoll_event e = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
									.data.ptr = &c->s[k]};
						epoll_ctl(ep, EPOLL_CTL_ADD, c->s[k].fd, &e);
					}
				}
				continue;
			}
			struct conn *c = s->c;
			if (c->dead)
				continue;
			if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
				c->in_ready[s->idx] = 1;
			if (evs[i].events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
				c->out_ready[s->idx] = 1;
			if (defer) {
				if (fill(c, 0) < 0 || fill(c, 1) < 0)
					c->in_ready[0] = c->in_ready[1] = 1; /* the pump meets the error */
				if (!c->queued) {
					c->queued = 1;
					touched[ntouched++] = c;
				}
				continue;
			}
			if (pump(c, 0) < 0 || pump(c, 1) < 0 || (c->d[0].shut && c->d[1].shut)) {
				/* a later event of this batch may name it: freed after the batch */
				close(c->s[0].fd);
				close(c->s[1].fd);
				c->dead = 1;
				dead[ndead++] = c;
			}
		}
		for (int i = 0; i < ntouched; i++) {
			struct conn *c = touched[i];
			c->queued = 0;
			if (pump(c, 0) < 0 || pump(c, 1) < 0 || (c->d[0].shut && c->d[1].shut)) {
				close(c->s[0].fd);
				close(c->s[1].fd);
				c->dead = 1;
				dead[ndead++] = c;
			}
		}
		while (ndead)
			free(dead[--ndead]);
	}
}
