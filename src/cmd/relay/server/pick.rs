//! Several upstreams: the one a connection gets, and the next one when it fails before any
//! byte moved (never after: bytes the upstream may have taken are not sent twice).

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{self, SockaddrLike, SockaddrStorage};

use super::{Conn, Dial, Peer, Server, Shared, Spec};
use crate::cmd::relay::end::{ConnEnd, Side};
use crate::cmd::relay::flow::Flow;
use crate::cmd::relay::upstream::{Balance, Upstreams};
use crate::endpoint::proxy::Addresses;
use crate::endpoint::tls::Handshake;
use crate::sys::socket::{abort_socket, stream_socket};

/// The side a relay with several upstreams connects to: B (A listens, or is `-`/fd:N).
pub(super) const UPSTREAM: usize = 1;

impl<'a> Server<'a> {
    /// What side `side` of a connection whose upstream is `pick` is: with several
    /// upstreams, B is the one picked.
    pub(super) fn spec_at(&self, pick: Option<usize>, side: usize) -> &'a Spec {
        let (specs, shared): (&'a [Spec; 2], &'a Shared) = (self.specs, self.shared);
        match pick {
            Some(p) if side == UPSTREAM => &shared.upstream_specs[p],
            _ => &specs[side],
        }
    }

    /// [`Server::spec_at`] for connection `idx`.
    pub(super) fn spec(&self, idx: usize, side: usize) -> &'a Spec {
        let pick = self.conns[idx].as_ref().and_then(|c| c.pick);
        self.spec_at(pick, side)
    }

    /// The URI of a connection's side: the upstream it got, with several.
    pub(super) fn conn_side_uri(&self, idx: usize, side: Side) -> String {
        let pick = self.conns[idx].as_ref().and_then(|c| c.pick);
        match (pick, &self.shared.upstreams) {
            (Some(p), Some(ups)) if side == Side::B => ups.uri(p).to_string(),
            _ => self.side_uri(side),
        }
    }

    /// A new connection's upstream (with several), as of `now`: None when every one is
    /// down.
    pub(super) fn first_pick(&self, conn: &mut Conn, now: Instant) -> Result<(), ConnEnd> {
        let Some(ups) = &self.shared.upstreams else {
            return Ok(());
        };
        // Only source-hash asks who the client is.
        if ups.balance == Balance::SourceHash {
            conn.client_ip = client_ip(&conn.origin, &conn.peer);
        }
        conn.pick = ups.pick(conn.client_ip, 0, now);
        match conn.pick {
            Some(_) => Ok(()),
            None => Err(ConnEnd::NoUpstream(String::new())),
        }
    }

    /// Side B's try failed (or the upstream failed the stream): with several upstreams and
    /// no byte moved to or from it, the connection goes on with the next one (this one is
    /// down for `--down-for`); otherwise it ends so.
    pub(super) fn upstream_failed(&mut self, idx: usize, end: ConnEnd) {
        if !self.next_upstream(idx, &end) {
            self.finish(idx, end);
        }
    }

    fn next_upstream(&mut self, idx: usize, end: &ConnEnd) -> bool {
        let Some(ups) = &self.shared.upstreams else {
            return false;
        };
        let about_upstream = match end {
            ConnEnd::Read { side, .. }
            | ConnEnd::Write { side, .. }
            | ConnEnd::Tls { side, .. }
            | ConnEnd::CannotRun { side, .. } => *side == Side::B,
            ConnEnd::ConnectFailed { .. } | ConnEnd::ProxyFailed(_) => true,
            _ => false,
        };
        let Some(conn) = self.conns[idx].as_mut() else {
            return false;
        };
        let Some(pick) = conn.pick else {
            return false;
        };
        // Nothing went to the upstream (the client's bytes read so far are still held, and
        // go to the next one), and nothing came from it.
        let untouched = conn.flows[0].delivered == 0
            && !conn.flows[0].shut
            && conn.flows[1].untouched()
            && conn.sides[UPSTREAM].child.is_none();
        if !about_upstream || !untouched {
            return false;
        }
        let now = Instant::now();
        ups.leave(pick, false);
        ups.failed(pick, now);
        conn.tried |= 1 << pick;
        conn.pick = None;
        conn.upstream = None;
        // The failed side goes: its fds out of the epoll, its socket reset.
        let mut peer = std::mem::replace(&mut conn.sides[UPSTREAM], Peer::empty());
        for fd in peer.polled.take() {
            self.poller.delete(fd);
        }
        if let Some(tls) = &peer.tls {
            tls.cut();
        }
        if let Some(fd) = peer.fd.take() {
            if peer.socket {
                abort_socket(fd);
            }
        }
        let conn = self.conns[idx].as_mut().expect("a live connection");
        conn.flows[1].close(&mut self.pools);
        // --dump's tap stays (it has seen nothing of this direction yet).
        let tap = conn.flows[1].tap.take();
        conn.flows[1] = Flow::new(self.tuning.choice(self.policy));
        conn.flows[1].tap = tap;
        let last = end.text().unwrap_or_else(|| end.word().into());
        let Some(next) = ups.pick(conn.client_ip, conn.tried, now) else {
            self.finish(idx, ConnEnd::NoUpstream(last));
            return true;
        };
        conn.pick = Some(next);
        self.start_upstream(idx);
        true
    }

    /// Side B of connection `idx` on its (newly) picked upstream: a dial started, or a
    /// command's child running.
    fn start_upstream(&mut self, idx: usize) {
        match self.spec(idx, UPSTREAM) {
            Spec::Dial { .. } => {
                self.conn_mut(idx).sides[UPSTREAM].dial = Some(Dial::new());
                self.dial(idx, UPSTREAM);
            }
            Spec::Command {
                spec, own_group, ..
            } => match self.command_peer(spec, *own_group, self.client_env(idx).as_ref()) {
                Ok(peer) => {
                    self.conn_mut(idx).sides[UPSTREAM] = peer;
                    self.register(idx, UPSTREAM);
                    self.pump(idx);
                }
                Err(e) => self.upstream_failed(
                    idx,
                    ConnEnd::CannotRun {
                        side: Side::B,
                        text: format!("{e:#}"),
                    },
                ),
            },
            // The parser takes only connectors and commands as upstreams.
            Spec::Listen(_) | Spec::Inherited(_) => {}
        }
    }
}

/// The client's IP address, for source-hash: the PROXY header's when it carried one, else
/// the accepted socket's peer.
fn client_ip(origin: &Addresses, peer: &str) -> Option<IpAddr> {
    match origin {
        Addresses::Inet { src, .. } => Some(src.ip()),
        _ => peer.parse::<SocketAddr>().ok().map(|a| a.ip()),
    }
}

/// `--check-interval`: every `every`, each upstream is probed (a connect; for `tls:` a
/// handshake too, within `timeout`): one that fails is down for `--down-for`, one that
/// answers is up again. A thread of its own, apart from the event loops (a probe blocks for
/// at most `timeout`); it ends once `over` is set.
pub(in crate::cmd::relay) fn run_checks(
    ups: &Upstreams,
    specs: &[Spec],
    every: Duration,
    timeout: Duration,
    over: &AtomicBool,
) {
    let mut next = Instant::now();
    while !over.load(Ordering::SeqCst) {
        if Instant::now() >= next {
            for (i, spec) in specs.iter().enumerate() {
                if let Some(up) = probe(spec, timeout) {
                    ups.mark(i, up, Instant::now());
                }
            }
            next = Instant::now() + every;
        }
        // Short naps, so the relay's end is not held up by a long interval.
        std::thread::sleep(CHECK_NAP.min(every));
    }
}

const CHECK_NAP: Duration = Duration::from_millis(20);

/// Whether `spec` answers: Some(true) or Some(false); None for what has nothing to probe
/// (a command).
fn probe(spec: &Spec, timeout: Duration) -> Option<bool> {
    let Spec::Dial {
        addrs, opts, tls, ..
    } = spec
    else {
        return None;
    };
    // Through a proxy, the proxy is what can be reached.
    let tls = tls.as_ref().filter(|_| opts.via.is_none());
    Some(addrs.iter().any(|addr| probe_addr(addr, tls, timeout)))
}

fn probe_addr(
    addr: &SockaddrStorage,
    tls: Option<&(std::sync::Arc<rustls::ClientConfig>, String)>,
    timeout: Duration,
) -> bool {
    let deadline = Instant::now() + timeout;
    let family = addr.family().unwrap_or(socket::AddressFamily::Unix);
    let flags = socket::SockFlag::SOCK_NONBLOCK | socket::SockFlag::SOCK_CLOEXEC;
    let Ok((fd, _)) = stream_socket(family, flags, false) else {
        return false;
    };
    match socket::connect(fd.as_raw_fd(), addr) {
        Ok(()) => {}
        Err(Errno::EINPROGRESS | Errno::EINTR) => {
            if !wait_for(fd.as_fd(), PollFlags::POLLOUT, deadline)
                || socket::getsockopt(&fd, socket::sockopt::SocketError) != Ok(0)
            {
                return false;
            }
        }
        Err(_) => return false,
    }
    let Some((config, name)) = tls else {
        return true;
    };
    let Ok(mut shake) = Handshake::client(config, name) else {
        return false;
    };
    loop {
        match shake.advance(fd.as_fd()) {
            Ok(true) => return true,
            Ok(false) => {
                if !wait_for(fd.as_fd(), PollFlags::POLLIN, deadline) {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
}

/// Waits until `fd` is ready for `what`, or `deadline`: true when ready.
fn wait_for(fd: BorrowedFd<'_>, what: PollFlags, deadline: Instant) -> bool {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let ms = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(fd, what)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => return true,
            Err(_) => return false,
        }
    }
}
