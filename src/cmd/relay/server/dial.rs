//! Connecting a side: every address in turn, `retry=N` attempts, the connect timeout.

use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::socket::{self, sockopt, SockFlag, SockaddrLike};

use super::{out_of_fds, slot_token, Server, Spec, CONNECT_TIMEOUT, FD_WAIT, RETRY};
use crate::cmd::relay::end::ConnEnd;
use crate::endpoint::{is_retryable_connect, outbound, proxy};
use crate::sys::socket::stream_socket;

impl Server<'_> {
    /// Starts (or restarts) a connection attempt to a Dial side.
    pub(super) fn dial(&mut self, idx: usize, side: usize) {
        let Spec::Dial { addrs, opts, .. } = &self.specs[side] else {
            return;
        };
        let gen = self.gens[idx];
        let conn = self.conns[idx].as_mut().expect("a live connection");
        let dial = conn.sides[side].dial.as_mut().expect("dialing");
        let addr = &addrs[dial.addr.min(addrs.len() - 1)];
        dial.waiting = false;
        let family = addr.family().unwrap_or(socket::AddressFamily::Unix);
        let flags = SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC;
        let fd = match stream_socket(family, flags, opts.mptcp) {
            Ok((fd, _)) => fd,
            Err(errno) if out_of_fds(errno) => {
                // Out of fds: not the backend's fault; wait for one to free up.
                dial.waiting = true;
                self.poller.timer(
                    Instant::now() + FD_WAIT,
                    slot_token(gen, idx, RETRY + side as u64),
                );
                return;
            }
            Err(errno) => return self.dial_failed(idx, side, errno),
        };
        let result = socket::connect(fd.as_raw_fd(), addr);
        conn.sides[side].fd = Some(fd);
        match result {
            Ok(()) => {
                self.register(idx, side);
                self.connected(idx, side);
            }
            Err(Errno::EINPROGRESS | Errno::EINTR) => {
                if let Some(timeout) = self.cfg.connect_timeout {
                    let when = Instant::now() + timeout;
                    dial.deadline = Some(when);
                    self.poller
                        .timer(when, slot_token(gen, idx, CONNECT_TIMEOUT + side as u64));
                }
                self.register(idx, side);
            }
            Err(errno) => self.dial_failed(idx, side, errno),
        }
    }

    /// The socket of an attempt in flight became writable: connected, or failed.
    pub(super) fn dialed(&mut self, idx: usize, side: usize) {
        let conn = self.conn_mut(idx);
        let fd = conn.sides[side].read_fd();
        match socket::getsockopt(&fd, sockopt::SocketError) {
            Ok(0) => self.connected(idx, side),
            Ok(err) => self.dial_failed(idx, side, Errno::from_raw(err)),
            Err(errno) => self.dial_failed(idx, side, errno),
        }
    }

    /// The socket is connected: to the target, or to the proxy of `socks5=`/`connect=`,
    /// whose handshake starts now, bounded by `--connect-timeout` (or 30 s).
    fn connected(&mut self, idx: usize, side: usize) {
        let Spec::Dial { opts, target, .. } = &self.specs[side] else {
            return;
        };
        let (Some(via), Some((host, port))) = (&opts.via, target) else {
            self.conn_mut(idx).sides[side].dial = None;
            if self.send_proxy_header(idx, side) {
                self.pump(idx);
            }
            return;
        };
        let shake = match outbound::Handshake::new(via, host, *port) {
            Ok(shake) => shake,
            Err(refused) => return self.finish(idx, ConnEnd::ProxyFailed(refused.to_string())),
        };
        let limit = self
            .cfg
            .connect_timeout
            .unwrap_or(outbound::HANDSHAKE_DEADLINE);
        let when = Instant::now() + limit;
        let gen = self.gens[idx];
        let dial = self.conn_mut(idx).sides[side]
            .dial
            .as_mut()
            .expect("dialing");
        dial.handshake = Some(shake);
        dial.deadline = Some(when);
        self.poller
            .timer(when, slot_token(gen, idx, CONNECT_TIMEOUT + side as u64));
        self.shake(idx, side);
    }

    /// The proxy's socket is ready: the handshake moves on; once done, the stream starts
    /// as on any connection (the PROXY header of `proxy=v1|v2` first, inside the tunnel).
    pub(super) fn shake(&mut self, idx: usize, side: usize) {
        let conn = self.conn_mut(idx);
        let peer = &mut conn.sides[side];
        let fd = peer.fd.as_ref().expect("a connected socket").as_fd();
        let dial = peer.dial.as_mut().expect("dialing");
        let shake = dial.handshake.as_mut().expect("a handshake");
        match shake.advance(fd) {
            Ok(false) => {}
            Ok(true) => {
                peer.dial = None;
                // The last edge may have carried the stream's first bytes: read to EAGAIN.
                peer.readable = true;
                peer.writable = true;
                if self.send_proxy_header(idx, side) {
                    self.pump(idx);
                }
            }
            Err(refused) => self.finish(idx, ConnEnd::ProxyFailed(refused.to_string())),
        }
    }

    pub(super) fn dial_failed(&mut self, idx: usize, side: usize, errno: Errno) {
        let Spec::Dial {
            uri, addrs, opts, ..
        } = &self.specs[side]
        else {
            return;
        };
        let gen = self.gens[idx];
        let conn = self.conns[idx].as_mut().expect("a live connection");
        // A proxy that took the connection but stalled its handshake: no other try.
        if let Some(shake) = conn.sides[side]
            .dial
            .as_ref()
            .and_then(|d| d.handshake.as_ref())
        {
            let limit = self
                .cfg
                .connect_timeout
                .unwrap_or(outbound::HANDSHAKE_DEADLINE);
            let text = shake.stalled(limit).to_string();
            return self.finish(idx, ConnEnd::ProxyFailed(text));
        }
        let peer = &mut conn.sides[side];
        if let Some(fd) = peer.fd.take() {
            for polled in peer.polled.drain(..) {
                self.poller.delete(polled);
            }
            drop(fd);
        }
        peer.readable = false;
        peer.writable = false;
        peer.hup = false;
        let dial = peer.dial.as_mut().expect("dialing");
        dial.deadline = None;
        if dial.addr + 1 < addrs.len() {
            dial.addr += 1;
            return self.dial(idx, side);
        }
        if dial.attempt < opts.retry && (is_retryable_connect(errno) || errno == Errno::ETIMEDOUT) {
            dial.attempt += 1;
            dial.addr = 0;
            dial.waiting = true;
            self.poller.timer(
                Instant::now() + opts.pause(),
                slot_token(gen, idx, RETRY + side as u64),
            );
            return;
        }
        let uri = uri.clone();
        self.finish(idx, ConnEnd::ConnectFailed { uri, errno });
    }
}

impl Server<'_> {
    /// `proxy=v1|v2`: the header goes first on a connection just made, carrying the
    /// client's addresses (or those its own PROXY header carried). A socket just connected
    /// has an empty send buffer, so the few hundred bytes go out whole; if not, the
    /// connection fails before any payload moved. False when it failed (and was finished).
    fn send_proxy_header(&mut self, idx: usize, side: usize) -> bool {
        let Spec::Dial { uri, opts, .. } = &self.specs[side] else {
            return true;
        };
        let Some(version) = opts.proxy else {
            return true;
        };
        let conn = self.conns[idx].as_ref().expect("a live connection");
        let header = proxy::encode(version, &conn.origin);
        let fd = conn.sides[side].write_fd();
        let errno = match crate::sys::write(fd, &header) {
            Ok(n) if n == header.len() => return true,
            Ok(_) => Errno::EAGAIN,
            Err(errno) => errno,
        };
        let uri = uri.clone();
        self.finish(idx, ConnEnd::ConnectFailed { uri, errno });
        false
    }
}
