//! Connecting a side: every address in turn, `retry=N` attempts, the connect timeout.

use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::{self, sockopt, SockFlag, SockaddrLike};

use super::{out_of_fds, slot_token, Dial, Server, Spec, CONNECT_TIMEOUT, FD_WAIT, RETRY};
use crate::cmd::relay::end::{ConnEnd, Side};
use crate::cmd::relay::flow::Flow;
use crate::cmd::relay::policy::Policy;
use crate::endpoint::tls::{self, Handshake};
use crate::endpoint::{is_retryable_connect, outbound, proxy};
use crate::sys::socket::stream_socket;
use nix::sys::socket::getpeername;

impl Server<'_> {
    /// Starts (or restarts) a connection attempt to a Dial side.
    pub(super) fn dial(&mut self, idx: usize, side: usize) {
        let Spec::Dial { addrs, opts, .. } = self.spec(idx, side) else {
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
        if family != socket::AddressFamily::Unix {
            // Checked at the start (SockOpts::probe); a refusal now ends this connection.
            if let Err(refused) = opts
                .sock
                .apply(&fd, family == socket::AddressFamily::Inet6, true)
            {
                return self.finish(idx, ConnEnd::Unusable(format!("{refused}")));
            }
        }
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

    /// The socket of an attempt in flight became writable: connected, or failed. Writable
    /// with no error or hang-up beside it is connected (a failed connect is reported
    /// EPOLLERR|EPOLLHUP): only then is SO_ERROR asked (a call a connection saved).
    pub(super) fn dialed(&mut self, idx: usize, side: usize) {
        let conn = self.conn_mut(idx);
        if !conn.sides[side].hup {
            return self.connected(idx, side);
        }
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
        let Spec::Dial { opts, target, .. } = self.spec(idx, side) else {
            return;
        };
        let (Some(via), Some((host, port))) = (&opts.via, target) else {
            return self.tunnel_ready(idx, side);
        };
        let shake = match outbound::Handshake::new(via, host, *port) {
            Ok(shake) => shake,
            Err(refused) => {
                return self.upstream_failed(idx, ConnEnd::ProxyFailed(refused.to_string()))
            }
        };
        let limit = self
            .cfg
            .connect_timeout
            .unwrap_or(outbound::HANDSHAKE_DEADLINE);
        self.handshake_deadline(idx, side, limit).handshake = Some(Box::new(shake));
        self.shake(idx, side);
    }

    /// The proxy's socket is ready: the handshake moves on; once done, the stream starts
    /// as on any connection (the PROXY header of `proxy=v1|v2` first, inside the tunnel).
    pub(super) fn shake(&mut self, idx: usize, side: usize) {
        let conn = self.conn_mut(idx);
        let peer = &mut conn.sides[side];
        if peer.dial.as_ref().is_some_and(|d| d.tls.is_some()) {
            return self.shake_tls(idx, side);
        }
        let fd = peer.fd.as_ref().expect("a connected socket").as_fd();
        let dial = peer.dial.as_mut().expect("dialing");
        let shake = dial.handshake.as_mut().expect("a handshake");
        match shake.advance(fd) {
            Ok(false) => {}
            Ok(true) => {
                dial.handshake = None;
                // The last edge may have carried the stream's first bytes: read to EAGAIN.
                peer.readable = true;
                peer.writable = true;
                self.tunnel_ready(idx, side);
            }
            Err(refused) => self.upstream_failed(idx, ConnEnd::ProxyFailed(refused.to_string())),
        }
    }

    /// Connected to the target (directly or through the proxy): `tls:` starts its
    /// handshake, bounded by `--connect-timeout` (or 10 s); otherwise the stream starts,
    /// the PROXY header of `proxy=v1|v2` first.
    fn tunnel_ready(&mut self, idx: usize, side: usize) {
        let Spec::Dial { tls, .. } = self.spec(idx, side) else {
            return;
        };
        let Some((config, name)) = tls else {
            self.conn_mut(idx).sides[side].dial = None;
            if self.send_proxy_header(idx, side) && self.websocket(idx, side) {
                self.pump(idx);
            }
            return;
        };
        let shake = match Handshake::client(config, name) {
            Ok(shake) => shake,
            Err(text) => return self.tls_failed(idx, side, text),
        };
        let limit = self.tls_limit();
        self.handshake_deadline(idx, side, limit).tls = Some(Box::new(shake));
        self.shake_tls(idx, side);
    }

    /// `ws://`/`wss://`: the side's connected fd becomes the WebSocket threads' end (polled
    /// afresh). False when the connection ended instead.
    fn websocket(&mut self, idx: usize, side: usize) -> bool {
        if !matches!(self.spec(idx, side), Spec::Dial { opts, .. } if opts.ws.is_some()) {
            return true;
        }
        let peer = &mut self.conn_mut(idx).sides[side];
        let polled = peer.polled.take();
        let fd = peer.fd.take().expect("a connected socket");
        for p in polled {
            self.poller.delete(p);
        }
        let Some(fd) = self.ws_fd(idx, side, fd, None) else {
            return false;
        };
        let peer = &mut self.conn_mut(idx).sides[side];
        peer.fd = Some(fd);
        peer.readable = true;
        peer.writable = true;
        self.register(idx, side);
        self.conns[idx].is_some()
    }

    /// The WebSocket client's threads on `fd`: their end, or None (the connection ended).
    /// `tls_end`: under wss, the TLS session's mark for the server's close frame.
    fn ws_fd(
        &mut self,
        idx: usize,
        side: usize,
        fd: std::os::fd::OwnedFd,
        tls_end: Option<tls::bridge::InnerEnd>,
    ) -> Option<std::os::fd::OwnedFd> {
        let Spec::Dial { uri, .. } = self.spec(idx, side) else {
            return Some(fd);
        };
        let endpoint = match crate::endpoint::parse(uri) {
            Ok(endpoint) => endpoint,
            Err(e) => {
                self.tls_failed(idx, side, e.to_string());
                return None;
            }
        };
        match endpoint.websocket(fd, true, tls_end) {
            Ok(fd) => Some(fd),
            Err(e) => {
                self.tls_failed(idx, side, format!("{e:#}"));
                None
            }
        }
    }

    /// A handshake on a connected side starts, due `limit` from now (the connect
    /// timeout's timer says when it is late); the side's dial, to hold it.
    fn handshake_deadline(&mut self, idx: usize, side: usize, limit: Duration) -> &mut Dial {
        let when = Instant::now() + limit;
        let gen = self.gens[idx];
        self.poller
            .timer(when, slot_token(gen, idx, CONNECT_TIMEOUT + side as u64));
        let dial = self.conn_mut(idx).sides[side]
            .dial
            .as_mut()
            .expect("dialing");
        dial.deadline = Some(when);
        dial
    }

    /// How long a `tls:` handshake may take.
    fn tls_limit(&self) -> Duration {
        self.cfg.connect_timeout.unwrap_or(tls::HANDSHAKE_DEADLINE)
    }

    /// The TLS of `side` failed before its stream started: the connection ends so.
    fn tls_failed(&mut self, idx: usize, side: usize, text: String) {
        let side = Side::of(side);
        let end = ConnEnd::Tls {
            side,
            uri: self.conn_side_uri(idx, side),
            text,
        };
        self.upstream_failed(idx, end);
    }

    /// The TLS handshake moves on; once done, the side's fd becomes what the record layer
    /// gives (the socket under kTLS, else the bridge's end), polled afresh.
    fn shake_tls(&mut self, idx: usize, side: usize) {
        let log = self.shared.log.is_some();
        let conn = self.conns[idx].as_mut().expect("a live connection");
        let peer = &mut conn.sides[side];
        let fd = peer.fd.as_ref().expect("a connected socket").as_fd();
        let shake = peer
            .dial
            .as_mut()
            .and_then(|d| d.tls.as_mut())
            .expect("a TLS handshake");
        let failed = match shake.advance(fd) {
            Ok(false) => return,
            Ok(true) => {
                if log {
                    // The socket's peer, before the bridge's end stands in for it.
                    conn.upstream = getpeername(fd.as_raw_fd()).ok();
                }
                let shake = peer.dial.take().and_then(|d| d.tls).expect("a handshake");
                for polled in peer.polled.take() {
                    self.poller.delete(polled);
                }
                let tcp = peer.fd.take().expect("a connected socket");
                // A WebSocket inside needs the plaintext fd: TLS not in the loop.
                let ws =
                    matches!(self.spec(idx, side), Spec::Dial { opts, .. } if opts.ws.is_some());
                match shake.establish(tcp, !ws) {
                    Ok((fd, session)) => {
                        let fd = if ws {
                            self.ws_fd(idx, side, fd, session.inner_end())
                        } else {
                            Some(fd)
                        };
                        let Some(fd) = fd else { return };
                        let conn = self.conns[idx].as_mut().expect("a live connection");
                        if session.in_loop() {
                            // Records go through rustls: no splice either way.
                            let choice = || Flow::new(self.tuning.choice(Policy::Userspace));
                            conn.flows = [choice(), choice()];
                        }
                        let peer = &mut conn.sides[side];
                        peer.fd = Some(fd);
                        peer.tls = Some(Box::new(session));
                        peer.readable = true;
                        peer.writable = true;
                        self.register(idx, side);
                        return self.pump(idx);
                    }
                    Err(text) => text,
                }
            }
            Err(text) => text,
        };
        self.tls_failed(idx, side, failed);
    }

    pub(super) fn dial_failed(&mut self, idx: usize, side: usize, errno: Errno) {
        let Spec::Dial {
            uri, addrs, opts, ..
        } = self.spec(idx, side)
        else {
            return;
        };
        let gen = self.gens[idx];
        let conn = self.conns[idx].as_mut().expect("a live connection");
        // A TLS handshake that stalled (or whose socket failed): no other try.
        if conn.sides[side]
            .dial
            .as_ref()
            .is_some_and(|d| d.tls.is_some())
        {
            let text = if errno == Errno::ETIMEDOUT {
                tls::stalled(self.tls_limit())
            } else {
                format!("TLS handshake: {}", std::io::Error::from(errno))
            };
            return self.tls_failed(idx, side, text);
        }
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
            return self.upstream_failed(idx, ConnEnd::ProxyFailed(text));
        }
        let peer = &mut conn.sides[side];
        if let Some(fd) = peer.fd.take() {
            for polled in peer.polled.take() {
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
        self.upstream_failed(idx, ConnEnd::ConnectFailed { uri, errno });
    }
}

impl Server<'_> {
    /// `proxy=v1|v2`: the header goes first on a connection just made, carrying the
    /// client's addresses (or those its own PROXY header carried). A socket just connected
    /// has an empty send buffer, so the few hundred bytes go out whole; if not, the
    /// connection fails before any payload moved. False when it failed (and was finished).
    fn send_proxy_header(&mut self, idx: usize, side: usize) -> bool {
        let Spec::Dial { uri, opts, .. } = self.spec(idx, side) else {
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
        self.upstream_failed(idx, ConnEnd::ConnectFailed { uri, errno });
        false
    }
}
