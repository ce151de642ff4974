//! `relay udp-listen:[HOST:]PORT udp:HOST:PORT` (either order): datagrams both ways, one
//! session per client address. A session is a UDP socket of its own connected to the
//! target (so the target's answers come back on it, and the kernel drops anyone else's);
//! its answers go back to the client from the listening socket. Every datagram is passed
//! on whole, in the order it came, in userspace — the kernel has no zero-copy path for
//! datagrams — with `recvmmsg`/`sendmmsg` moving a batch per call (`sys::datagram`).
//!
//! A session ends after `--idle-timeout` without a datagram either way (default
//! [`SESSION_IDLE`]); `--max-conns` bounds the sessions open, and a datagram from a new
//! client beyond it is dropped and counted (`refused`). A datagram the kernel will not take
//! without waiting (a full socket buffer) is dropped and counted too: UDP's own loss,
//! which one slow session must not turn into a stall of every other. SIGINT/SIGTERM end
//! every session at once (there is nothing in flight to finish).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::errno::Errno;
use nix::libc;
use nix::sys::socket::{MsgFlags, SockaddrLike, SockaddrStorage};

use super::end::{ConnEnd, Side};
use super::log::ConnLog;
use super::poller::Poller;
use super::report::{ConnReport, Datagrams, FlowReport, Gso, Tally};
use super::upstream::Upstreams;
use super::RelayConfig;
use crate::endpoint::access::Access;
use crate::endpoint::sockopt::SockOpts;
use crate::endpoint::{udp, Endpoint};
use crate::options::Options;
use crate::sys::datagram::{self, Batch, GSO_BYTES, GSO_SEGMENTS};
use crate::sys::process;

/// `--idle-timeout` of a datagram session when none is given (as socat's and conntrack's
/// UDP defaults are of this order: a session has no end but silence).
pub const SESSION_IDLE: Duration = Duration::from_secs(60);
/// Datagrams per recvmmsg/sendmmsg call.
pub const BATCH: usize = 32;
/// Batches a socket may move in one turn of the loop before the others get theirs.
const BATCHES_PER_TURN: usize = 4;
/// The receive queue asked for the listening socket (every client's datagrams wait there
/// while the loop serves answers): a burst is held instead of dropped.
const LISTENER_QUEUE: usize = 8 << 20;
/// The receive queue asked for each session's socket (the target's answers).
const SESSION_QUEUE: usize = 1 << 20;

const LISTENER: u64 = u64::MAX;
/// Timer tokens: a session's idle check (slot index | this bit, and its generation).
const IDLE_BIT: u64 = 1 << 31;

/// A client address as the map's key: the sockaddr bytes the kernel gave.
type ClientKey = [u8; 28];

struct Session {
    id: u64,
    client: libc::sockaddr_storage,
    client_len: libc::socklen_t,
    key: ClientKey,
    /// Which of the targets (several upstreams: picked once, for the session's life).
    target: usize,
    upstream: OwnedFd,
    /// epoll said the upstream socket has datagrams (edge-triggered: until EAGAIN).
    readable: bool,
    started: Instant,
    last_active: Instant,
    /// [client -> target, target -> client].
    bytes: [u64; 2],
    datagrams: [Datagrams; 2],
    /// The last error the target's socket gave (ECONNREFUSED: nothing listens there).
    error: Option<Errno>,
}

/// The datagram relay of `cfg` (one side `udp-listen:`, the other `udp:`).
pub(super) fn run(
    opts: &Options,
    cfg: &RelayConfig,
    log: Option<ConnLog>,
    upstreams: Option<&Upstreams>,
) -> anyhow::Result<(bool, Tally, Option<ConnLog>)> {
    let listens = if matches!(cfg.a, Endpoint::UdpListen { .. }) {
        Side::A
    } else {
        Side::B
    };
    let targets = match upstreams {
        Some(_) => cfg
            .upstreams()
            .map(Endpoint::datagram_target)
            .collect::<anyhow::Result<Vec<_>>>()?,
        None => vec![cfg.side(listens.other()).datagram_target()?],
    };
    let sock = cfg
        .side(listens.other())
        .sock_opts()
        .cloned()
        .unwrap_or_default();
    // A refused socket option is said once, now, not at every session.
    if let Some(first) = targets.first() {
        sock.probe(first, false)
            .with_context(|| format!("cannot use {}", cfg.side(listens.other())))?;
    }
    let access = cfg.side(listens).access().cloned().unwrap_or_default();
    let listener = cfg.side(listens).bind_datagram()?;
    crate::sys::socket::set_nonblocking(listener.as_raw_fd())?;
    datagram::grow_receive_queue(listener.as_fd(), LISTENER_QUEUE);
    let gro = datagram::enable_gro(listener.as_fd());
    let mut relay = DatagramRelay {
        opts,
        cfg,
        targets,
        upstreams,
        sock,
        access,
        listens,
        listener,
        listener_ready: false,
        poller: Poller::new()?,
        sessions: Vec::new(),
        gens: Vec::new(),
        free: Vec::new(),
        by_client: HashMap::new(),
        batch: Batch::new(BATCH),
        next_id: 1,
        idle: cfg.idle_timeout.unwrap_or(SESSION_IDLE),
        max: cfg.max_conns.unwrap_or(usize::MAX),
        tally: Tally::default(),
        log,
        ended_once: false,
        gso: Gso::default(),
        gro: false,
    };
    relay.gro = gro;
    relay
        .poller
        .add(relay.listener.as_raw_fd(), LISTENER)
        .context("cannot watch the UDP listener")?;
    let interrupted = relay.serve()?;
    // Clients' datagrams the kernel dropped at the listening socket before they were read.
    relay.tally.lost_on_arrival = datagram::receive_drops(relay.listener.as_fd()).unwrap_or(0);
    relay.tally.gso = Some(relay.gso);
    relay.tally.gro = relay.gro;
    Ok((interrupted, relay.tally, relay.log))
}

struct DatagramRelay<'a> {
    opts: &'a Options,
    cfg: &'a RelayConfig,
    targets: Vec<SocketAddr>,
    upstreams: Option<&'a Upstreams>,
    /// The socket options of the `udp:` side, set on every session's socket.
    sock: SockOpts,
    /// `allow=`/`deny=` of the `udp-listen:` side: whose datagrams open a session.
    access: Access,
    /// The side that listens (A: A -> B is client -> target).
    listens: Side,
    listener: OwnedFd,
    listener_ready: bool,
    poller: Poller,
    sessions: Vec<Option<Session>>,
    gens: Vec<u32>,
    free: Vec<usize>,
    by_client: HashMap<ClientKey, usize>,
    batch: Batch,
    next_id: u64,
    idle: Duration,
    max: usize,
    tally: Tally,
    log: Option<ConnLog>,
    /// `--once`: a session ended, so the relay does too.
    ended_once: bool,
    gso: Gso,
    /// The kernel took UDP_GRO on the listening socket.
    gro: bool,
}

/// What one forward of a run of slots did.
#[derive(Debug, Default)]
struct Forwarded {
    sent: u64,
    dropped: u64,
    bytes: u64,
    error: Option<Errno>,
}

/// The slots from `start` that one GSO send can carry: a GRO slot alone (its segment
/// size), or plain datagrams of one size (the last may be shorter), at most
/// [`GSO_SEGMENTS`] and [`GSO_BYTES`]. None: slot `start` goes without GSO.
fn gso_group(batch: &Batch, start: usize, end: usize) -> Option<(usize, usize)> {
    let seg = batch.segment(start);
    if seg > 0 {
        return Some((start + 1, seg));
    }
    let size = batch.payload(start).len();
    if size == 0 {
        return None;
    }
    let mut j = start + 1;
    let mut bytes = size;
    while j < end
        && j - start < GSO_SEGMENTS
        && batch.segment(j) == 0
        && bytes + batch.payload(j).len() <= GSO_BYTES
    {
        let len = batch.payload(j).len();
        if len > size || len == 0 {
            break;
        }
        bytes += len;
        j += 1;
        if len < size {
            break; // a shorter datagram ends a GSO send
        }
    }
    (j - start >= 2).then_some((j, size))
}

/// Sends slots `range` on `fd` (`to`: each to its slot's address), in order: runs of
/// equal-size datagrams as GSO sends (one pass down the stack for up to 64 datagrams),
/// the rest with sendmmsg. A GRO slot (several datagrams the kernel coalesced) goes out
/// as the same datagrams: one GSO send, or, where GSO is refused, one send each.
fn forward(
    batch: &Batch,
    fd: std::os::fd::BorrowedFd<'_>,
    range: std::ops::Range<usize>,
    to: bool,
    gso: &mut Gso,
) -> Forwarded {
    let mut out = Forwarded::default();
    let mut i = range.start;
    while i < range.end {
        if !gso.refused {
            if let Some((j, seg)) = gso_group(batch, i, range.end) {
                let datagrams: u64 = (i..j).map(|k| batch.datagrams_in(k)).sum();
                let bytes: u64 = (i..j).map(|k| batch.payload(k).len() as u64).sum();
                match batch.send_segmented(fd, i..j, seg, to) {
                    Ok(true) => {
                        out.sent += datagrams;
                        out.bytes += bytes;
                        gso.sends += 1;
                        gso.datagrams += datagrams;
                        i = j;
                        continue;
                    }
                    Ok(false) => {
                        out.dropped += datagrams;
                        i = j;
                        continue;
                    }
                    Err(Errno::EINVAL | Errno::EIO | Errno::ENOPROTOOPT | Errno::EOPNOTSUPP) => {
                        gso.refused = true;
                    }
                    Err(e) => {
                        out.error = Some(e);
                        out.dropped += datagrams;
                        i = j;
                        continue;
                    }
                }
            }
        }
        if batch.segment(i) > 0 {
            // GRO without GSO: each coalesced datagram on its own.
            let seg = batch.segment(i);
            let (addr, len) = batch.addr(i);
            // SAFETY: the kernel filled `len` bytes of this sockaddr_storage.
            let dest = unsafe {
                SockaddrStorage::from_raw((addr as *const _) as *const libc::sockaddr, Some(len))
            };
            for piece in batch.payload(i).chunks(seg) {
                let sent = match (&dest, to) {
                    (Some(dest), true) => nix::sys::socket::sendto(
                        fd.as_raw_fd(),
                        piece,
                        dest,
                        MsgFlags::MSG_DONTWAIT,
                    ),
                    _ => nix::sys::socket::send(fd.as_raw_fd(), piece, MsgFlags::MSG_DONTWAIT),
                };
                if sent.is_ok() {
                    out.sent += 1;
                    out.bytes += piece.len() as u64;
                } else {
                    out.dropped += 1;
                }
            }
            i += 1;
            continue;
        }
        // Plain datagrams up to the next GSO group or GRO slot: one sendmmsg.
        let mut j = i + 1;
        while j < range.end
            && batch.segment(j) == 0
            && (gso.refused || gso_group(batch, j, range.end).is_none())
        {
            j += 1;
        }
        let sent = match batch.send(fd, i..j, to) {
            Ok(sent) => sent,
            Err(Errno::EAGAIN) => 0,
            Err(e) => {
                out.error = Some(e);
                0
            }
        };
        out.sent += sent as u64;
        out.dropped += (j - i - sent) as u64;
        out.bytes += (i..i + sent)
            .map(|k| batch.payload(k).len() as u64)
            .sum::<u64>();
        i = j;
    }
    out
}

/// Where a client's datagram goes: its session, or nowhere (`--max-conns` sessions are
/// open, or no socket could be had; or `allow=`/`deny=` refuse the client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Session(usize),
    Full,
    Denied,
}

fn key_of(addr: &libc::sockaddr_storage, len: libc::socklen_t) -> ClientKey {
    let mut key = [0u8; 28];
    let n = (len as usize).min(key.len());
    // SAFETY: sockaddr_storage is at least 128 bytes; we read `n` <= 28 of them.
    let bytes = unsafe { std::slice::from_raw_parts((addr as *const _) as *const u8, n) };
    key[..n].copy_from_slice(bytes);
    key
}

fn addr_text(addr: &libc::sockaddr_storage, len: libc::socklen_t) -> String {
    // SAFETY: the kernel filled `len` bytes of a sockaddr_storage.
    unsafe { SockaddrStorage::from_raw((addr as *const _) as *const libc::sockaddr, Some(len)) }
        .map_or_else(|| "?".into(), |a| a.to_string())
}

impl DatagramRelay<'_> {
    /// Until a signal (true) or, with `--once`, the end of the first session (false).
    fn serve(&mut self) -> anyhow::Result<bool> {
        let mut ready = Vec::new();
        loop {
            if process::interrupted() {
                self.end_all(ConnEnd::Signal);
                return Ok(true);
            }
            if self.ended_once {
                self.end_all(ConnEnd::Quiet);
                return Ok(false);
            }
            let busy = self.listener_ready || self.sessions.iter().flatten().any(|s| s.readable);
            self.poller.wait(busy, &mut ready)?;
            for event in ready.drain(..) {
                if event.token == LISTENER {
                    self.listener_ready |= event.readable;
                } else if let Some(s) = self.session_mut(event.token) {
                    s.readable |= event.readable;
                }
            }
            let now = Instant::now();
            while let Some(token) = self.poller.due(now) {
                self.idle_check(token, now);
            }
            if self.listener_ready {
                self.relay_client_datagrams();
            }
            for idx in 0..self.sessions.len() {
                if self.sessions[idx].as_ref().is_some_and(|s| s.readable) {
                    self.relay_target_answers(idx);
                }
            }
        }
    }

    fn session_mut(&mut self, token: u64) -> Option<&mut Session> {
        let (gen, idx) = ((token >> 32) as u32, (token & 0xffff_ffff) as usize);
        if self.gens.get(idx) != Some(&gen) {
            return None;
        }
        self.sessions.get_mut(idx)?.as_mut()
    }

    fn token(&self, idx: usize) -> u64 {
        (u64::from(self.gens[idx]) << 32) | idx as u64
    }

    /// Datagrams from clients, a few batches: each run of one client's datagrams goes to
    /// its session's target in one sendmmsg.
    fn relay_client_datagrams(&mut self) {
        for _ in 0..BATCHES_PER_TURN {
            let n = match self.batch.receive(self.listener.as_fd(), true) {
                Ok(0) | Err(Errno::EAGAIN) => {
                    self.listener_ready = false;
                    return;
                }
                Ok(n) => n,
                // ICMP errors of earlier answers surface here (ECONNREFUSED): not ours.
                Err(Errno::EINTR | Errno::ECONNREFUSED) => continue,
                Err(e) => {
                    eprintln!(
                        "zerocat: relay: reading {}: {e}",
                        self.cfg.side(self.listens)
                    );
                    self.listener_ready = false;
                    return;
                }
            };
            let sessions: Vec<Route> = (0..n)
                .map(|i| {
                    let (addr, len) = self.batch.addr(i);
                    let (addr, len) = (*addr, len);
                    self.session_for(&addr, len)
                })
                .collect();
            let mut i = 0;
            while i < n {
                let run_end = (i..n).find(|&j| sessions[j] != sessions[i]).unwrap_or(n);
                match sessions[i] {
                    Route::Session(idx) => self.send_to_target(idx, i..run_end),
                    Route::Full => self.tally.refused += (run_end - i) as u64,
                    Route::Denied => self.tally.access_refused += (run_end - i) as u64,
                }
                i = run_end;
            }
            if n < self.batch.capacity() {
                self.listener_ready = false;
                return;
            }
        }
    }

    /// Slots `range` of the batch (one client's) go to its session's target.
    fn send_to_target(&mut self, idx: usize, range: std::ops::Range<usize>) {
        let Some(s) = self.sessions[idx].as_mut() else {
            return;
        };
        let out = forward(&self.batch, s.upstream.as_fd(), range, false, &mut self.gso);
        s.datagrams[0].sent += out.sent;
        s.datagrams[0].dropped += out.dropped;
        s.bytes[0] += out.bytes;
        s.error = out.error.or(s.error);
        s.last_active = Instant::now();
    }

    /// Datagrams from session `idx`'s target, a few batches, back to its client.
    fn relay_target_answers(&mut self, idx: usize) {
        for _ in 0..BATCHES_PER_TURN {
            let Some(s) = self.sessions[idx].as_mut() else {
                return;
            };
            let n = match self.batch.receive(s.upstream.as_fd(), false) {
                Ok(n) => n,
                Err(Errno::EAGAIN) => {
                    s.readable = false;
                    return;
                }
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    // ECONNREFUSED: an earlier datagram found no one at the target.
                    s.error = Some(e);
                    continue;
                }
            };
            if n == 0 {
                s.readable = false;
                return;
            }
            self.batch.address_all(&s.client, s.client_len);
            let out = forward(
                &self.batch,
                self.listener.as_fd(),
                0..n,
                true,
                &mut self.gso,
            );
            s.datagrams[1].sent += out.sent;
            s.datagrams[1].dropped += out.dropped;
            s.bytes[1] += out.bytes;
            s.error = out.error.or(s.error);
            s.last_active = Instant::now();
            if n < self.batch.capacity() {
                s.readable = false;
                return;
            }
        }
    }

    /// The session of this client, opened now if it is new, `allow=`/`deny=` admit it
    /// and `--max-conns` allows.
    fn session_for(&mut self, addr: &libc::sockaddr_storage, len: libc::socklen_t) -> Route {
        let key = key_of(addr, len);
        if let Some(&idx) = self.by_client.get(&key) {
            return Route::Session(idx);
        }
        if self.access.any() {
            // SAFETY: the kernel filled `len` bytes of a sockaddr_storage.
            let client = unsafe {
                SockaddrStorage::from_raw((addr as *const _) as *const libc::sockaddr, Some(len))
            };
            let ip = client.and_then(|c| {
                c.as_sockaddr_in()
                    .map(|v4| std::net::IpAddr::V4(v4.ip()))
                    .or_else(|| c.as_sockaddr_in6().map(|v6| std::net::IpAddr::V6(v6.ip())))
            });
            if self.access.check(ip).is_err() {
                return Route::Denied;
            }
        }
        if self.by_client.len() >= self.max {
            return Route::Full;
        }
        let target = match self.upstreams {
            Some(ups) => {
                let client = addr_text(addr, len).parse::<SocketAddr>().ok();
                match ups.pick(client.map(|a| a.ip()), 0, Instant::now()) {
                    Some(target) => target,
                    None => return Route::Full,
                }
            }
            None => 0,
        };
        let upstream = match udp::connect_to(&self.targets[target], &self.sock) {
            Ok(fd) => fd,
            Err(e) => {
                eprintln!(
                    "zerocat: relay: no session for {}: cannot connect to {}: {e}",
                    addr_text(addr, len),
                    self.targets[target]
                );
                if let Some(ups) = self.upstreams {
                    ups.leave(target, false);
                    ups.failed(target, Instant::now());
                }
                return Route::Full;
            }
        };
        let idx = self.free.pop().unwrap_or_else(|| {
            self.sessions.push(None);
            self.gens.push(0);
            self.sessions.len() - 1
        });
        datagram::grow_receive_queue(upstream.as_fd(), SESSION_QUEUE);
        if self.gro {
            datagram::enable_gro(upstream.as_fd());
        }
        let token = self.token(idx);
        if self.poller.add(upstream.as_raw_fd(), token).is_err() {
            self.free.push(idx);
            return Route::Full;
        }
        let now = Instant::now();
        self.sessions[idx] = Some(Session {
            id: self.next_id,
            client: *addr,
            client_len: len,
            key,
            target,
            upstream,
            readable: false,
            started: now,
            last_active: now,
            bytes: [0; 2],
            datagrams: [Datagrams::default(); 2],
            error: None,
        });
        self.next_id += 1;
        self.by_client.insert(key, idx);
        self.poller.timer(now + self.idle, token | IDLE_BIT);
        Route::Session(idx)
    }

    fn idle_check(&mut self, token: u64, now: Instant) {
        let token = token & !IDLE_BIT;
        let idle = self.idle;
        let Some(s) = self.session_mut(token) else {
            return;
        };
        let due = s.last_active + idle;
        if due <= now {
            let idx = (token & 0xffff_ffff) as usize;
            self.end(idx, ConnEnd::Quiet);
            if self.cfg.once {
                self.ended_once = true;
            }
        } else {
            self.poller.timer(due, token | IDLE_BIT);
        }
    }

    fn end_all(&mut self, end: ConnEnd) {
        for idx in 0..self.sessions.len() {
            if self.sessions[idx].is_some() {
                self.end(idx, end.clone());
            }
        }
    }

    /// A session is over: closed (out of the epoll with its socket), reported, logged.
    fn end(&mut self, idx: usize, end: ConnEnd) {
        let Some(mut s) = self.sessions[idx].take() else {
            return;
        };
        // The target's answers the kernel dropped before they were read: lost on the way
        // back to the client, counted with those the relay could not send.
        s.datagrams[1].dropped += datagram::receive_drops(s.upstream.as_fd()).unwrap_or(0);
        self.by_client.remove(&s.key);
        self.gens[idx] = self.gens[idx].wrapping_add(1);
        self.free.push(idx);
        // [A -> B, B -> A] from [client -> target, target -> client].
        let order = if self.listens == Side::A {
            [0, 1]
        } else {
            [1, 0]
        };
        if let Some(ups) = self.upstreams {
            ups.leave(s.target, true);
            // Nothing listened there: new sessions go elsewhere for --down-for.
            if s.error == Some(Errno::ECONNREFUSED) {
                ups.failed(s.target, Instant::now());
            }
        }
        let end = match (end, s.error) {
            (ConnEnd::Quiet, Some(errno)) => ConnEnd::Write {
                side: self.listens.other(),
                uri: self.cfg.side(self.listens.other()).to_string(),
                errno,
            },
            (end, _) => end,
        };
        let flows =
            order.map(|d| FlowReport::of_datagrams(s.bytes[d], s.datagrams[d], end.clone()));
        let report = ConnReport {
            id: s.id,
            seq: self.tally.count,
            peer: addr_text(&s.client, s.client_len),
            upstream: self.targets[s.target].to_string(),
            upstream_uri: self.upstreams.map(|u| u.uri(s.target).to_string()),
            seconds: s.started.elapsed().as_secs_f64(),
            flows,
            end,
            mptcp: [None, None],
            children: [None, None],
            datagrams: Some(order.map(|d| s.datagrams[d])),
            tls: [None, None],
        };
        if self.opts.verbose {
            eprintln!("zerocat: {}", crate::report::errno_names(&report.line()));
        }
        if let Some(log) = &mut self.log {
            log.connection(&report, 0);
        }
        self.tally.add(report);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(sizes: &[usize]) -> Batch {
        let mut b = Batch::new(sizes.len());
        // SAFETY: zeroes are a valid sockaddr_storage (no address: a connected socket).
        let none: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        for &n in sizes {
            assert!(b.push(&vec![7u8; n], &none, 0));
        }
        b
    }

    #[test]
    fn gso_groups_equal_datagrams_and_a_shorter_last_one_only() {
        let b = batch(&[1400, 1400, 1400, 100, 1400]);
        assert_eq!(
            gso_group(&b, 0, 5),
            Some((4, 1400)),
            "three of 1,400 and a short last"
        );
        assert_eq!(
            gso_group(&b, 4, 5),
            None,
            "one datagram alone goes by sendmmsg"
        );
        let b = batch(&[100, 1400, 1400]);
        assert_eq!(gso_group(&b, 0, 3), None, "a longer datagram cannot follow");
        assert_eq!(gso_group(&b, 1, 3), Some((3, 1400)));
        let b = batch(&[0, 0]);
        assert_eq!(
            gso_group(&b, 0, 2),
            None,
            "empty datagrams are not segmented"
        );
        let b = batch(&vec![64; 100]);
        assert_eq!(
            gso_group(&b, 0, 100),
            Some((GSO_SEGMENTS, 64)),
            "at most 64 a send"
        );
        let b = batch(&[30_000, 30_000, 30_000]);
        assert_eq!(
            gso_group(&b, 0, 3),
            Some((2, 30_000)),
            "at most GSO_BYTES a send"
        );
    }
}
