//! `relay` between UDP and a stream: `relay - udp:HOST:PORT` and `relay udp-listen:PORT -`
//! (interactive `nc -u`: each read of the stream is one datagram, each datagram written to
//! the stream as it comes), and UDP over TCP for a tunnel (`relay udp-listen:PORT
//! tcp:HOST:PORT,frame=len16`, `relay tcp-listen:PORT,frame=len16 udp:HOST:PORT`): in the
//! stream, a 2-byte big-endian length before each datagram, as DNS over TCP.
//!
//! A session is one stream and one peer of datagrams, served by one thread with poll(2):
//! - `udp:` with `-`, `fd:N` or a `tcp:` connector: one session (on the calling thread);
//! - `udp:` with a `tcp-listen:`: a session per connection accepted, each with a UDP socket
//!   of its own connected to the target;
//! - `udp-listen:` with `-`/`fd:N`: the first peer that sends is the session's (nc -u -l);
//! - `udp-listen:` with a `tcp:` connector: a session per client address, each with its
//!   own connection; the listening loop hands a client's datagrams to its session through
//!   a datagram socketpair, and the session answers from the listening socket.
//!
//! Ends: the stream's EOF ends what goes to the datagrams (UDP has no EOF to pass on); an
//! empty datagram, where the stream is raw, is zerocat's end of a UDP stream (`pipe FILE
//! udp:` sends one at its EOF) and ends what goes to the stream (a socket is half-closed).
//! A session with both ways ended, or silent either way for `--idle-timeout` (default
//! [`super::datagram::SESSION_IDLE`]: UDP has no other end), is over; an interactive one
//! (`-`, `fd:N`) without `--idle-timeout` waits as long as its stream is open (nc -u
//! never gives up on a slow typist), then that long. Datagrams never cut:
//! one too long for its way (over 65,535 bytes for `len16`, over the UDP payload for a
//! frame) is dropped and counted.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{self, MsgFlags, SockaddrStorage};

use super::datagram::SESSION_IDLE;
use super::end::{ConnEnd, Side};
use super::log::ConnLog;
use super::report::{ConnReport, Datagrams, FlowReport, Tally};
use super::RelayConfig;
use crate::endpoint::{udp, Endpoint, Frame};
use crate::exit::UsageError;
use crate::options::Options;
use crate::sys::datagram;
use crate::sys::process;

/// The largest datagram `len16` can carry: its length is 16 bits.
pub const LEN16_MAX: usize = 65_535;
/// The largest UDP payload over IPv4 (65,535 less the IP and UDP headers): a raw stream's
/// read is at most this, so it always fits one datagram.
const UDP_PAYLOAD_MAX: usize = 65_507;
/// A receive buffer one byte longer than any datagram that may go on: MSG_TRUNC says the
/// real length of a longer one, which is dropped, never cut.
const RECEIVE_BUFFER: usize = LEN16_MAX + 1;
/// How often a session looks at the stop flag when nothing else wakes it (a signal wakes
/// only the thread it is delivered to).
const STOP_CHECK: Duration = Duration::from_millis(200);

/// A UDP relay whose other side is a stream (`-`, `fd:N`, `tcp:`, `tcp-listen:`).
pub(super) fn is_framed(cfg: &RelayConfig) -> bool {
    let udp = |e: &Endpoint| matches!(e, Endpoint::Udp { .. } | Endpoint::UdpListen { .. });
    udp(&cfg.a) != udp(&cfg.b)
}

/// The usage errors of a UDP side paired with a stream, before anything opens.
pub(super) fn check(cfg: &RelayConfig) -> anyhow::Result<()> {
    let (dgram, stream) = sides(cfg);
    let (dgram, stream) = (cfg.side(dgram), cfg.side(stream));
    let raw_ok = matches!(stream, Endpoint::Stdio | Endpoint::Fd(_));
    match (stream, stream.frame()) {
        (Endpoint::Tcp { connect, .. }, Some(_)) if connect.tls.is_none() => {}
        (Endpoint::TcpListen { listen, .. }, Some(_)) if listen.tls.is_none() => {}
        (_, None) if raw_ok => {}
        (_, None) if matches!(stream, Endpoint::Tcp { .. } | Endpoint::TcpListen { .. }) => {
            return Err(UsageError(format!(
                "relay {} <-> {}: a TCP stream would lose the datagrams' bounds; add \
                 ,frame=len16 to '{stream}' (a 2-byte length before each datagram, as DNS \
                 over TCP), or use '-' for an interactive session (nc -u)",
                cfg.a, cfg.b
            ))
            .into())
        }
        _ => {
            return Err(UsageError(format!(
                "relay {} <-> {}: UDP pairs with udp:/udp-listen:, '-', fd:N, or \
                 tcp:/tcp-listen: with ,frame=len16",
                cfg.a, cfg.b
            ))
            .into())
        }
    }
    if dgram.datagram_size().is_some() && stream.frame().is_some() {
        return Err(UsageError(format!(
            "relay '{dgram}': option 'size' cuts a stream into datagrams; with frame=len16 \
             each frame is one datagram, whole"
        ))
        .into());
    }
    if matches!(dgram, Endpoint::UdpListen { .. }) && stream.listens() {
        return Err(UsageError(
            "relay: both sides listen; one side must connect (udp:, tcp:), or be '-'".into(),
        )
        .into());
    }
    Ok(())
}

/// (the UDP side, the stream side).
fn sides(cfg: &RelayConfig) -> (Side, Side) {
    if matches!(cfg.a, Endpoint::Udp { .. } | Endpoint::UdpListen { .. }) {
        (Side::A, Side::B)
    } else {
        (Side::B, Side::A)
    }
}

/// The plan line of a relay between UDP and a stream.
pub(super) fn plan(cfg: &RelayConfig) -> String {
    let (dgram, stream) = sides(cfg);
    let framing = match cfg.side(stream).frame() {
        Some(Frame::Len16) => {
            "each datagram framed by a 2-byte big-endian length in the stream (over 65,535 \
             bytes: dropped and counted)"
        }
        None => "each read of the stream one datagram, each datagram written whole",
    };
    let sessions = match (cfg.side(dgram), cfg.side(stream).listens()) {
        (Endpoint::UdpListen { .. }, _) if cfg.side(stream).frame().is_some() => {
            "a session (a connection) per client address"
        }
        (Endpoint::UdpListen { .. }, _) => "the first peer that sends is the only one heard",
        (_, true) => "a session (a UDP socket connected to the target) per connection",
        _ => "one session",
    };
    let quiet = cfg.idle_timeout.unwrap_or(SESSION_IDLE).as_secs_f64();
    let interactive = cfg.idle_timeout.is_none() && cfg.side(stream).frame().is_none();
    let after = if interactive {
        " once the stream ended"
    } else {
        ""
    };
    format!(
        "plan: relay {} <-> {} via userspace: {framing}; {sessions}, ended after {quiet:.3} s \
         without a datagram either way{after}",
        cfg.a, cfg.b,
    )
}

/// Serves the relay until its sessions end or a signal: (interrupted, tally, log).
pub(super) fn run(
    opts: &Options,
    cfg: &RelayConfig,
    log: Option<ConnLog>,
) -> anyhow::Result<(bool, Tally, Option<ConnLog>)> {
    let (dgram_side, stream_side) = sides(cfg);
    let mut relay = Relay {
        opts,
        cfg,
        dgram_side,
        frame: cfg.side(stream_side).frame(),
        idle: cfg.idle_timeout.unwrap_or(SESSION_IDLE),
        tally: Tally::default(),
        log,
        next_id: 1,
        stop: Arc::new(AtomicBool::new(false)),
    };
    let stream = cfg.side(stream_side);
    let interrupted = match (cfg.side(dgram_side), stream) {
        (Endpoint::UdpListen { .. }, Endpoint::Tcp { .. }) => relay.clients_to_connections()?,
        (Endpoint::UdpListen { .. }, _) => relay.first_peer()?,
        (_, e) if e.listens() => relay.connections_to_target()?,
        _ => relay.one_session()?,
    };
    Ok((interrupted, relay.tally, relay.log))
}

struct Relay<'a> {
    opts: &'a Options,
    cfg: &'a RelayConfig,
    dgram_side: Side,
    frame: Option<Frame>,
    idle: Duration,
    tally: Tally,
    log: Option<ConnLog>,
    next_id: u64,
    /// Set on a signal: every session thread ends at its next look.
    stop: Arc<AtomicBool>,
}

/// The stream of a session: stdin/stdout, an inherited fd, or a connection.
struct Stream {
    read: RawFd,
    write: RawFd,
    /// A socket (half-closed at the end of what goes to it; closed when dropped).
    socket: Option<OwnedFd>,
    uri: String,
}

impl Stream {
    fn socket(fd: OwnedFd, uri: String) -> Stream {
        Stream {
            read: fd.as_raw_fd(),
            write: fd.as_raw_fd(),
            socket: Some(fd),
            uri,
        }
    }
}

/// Where a session's datagrams come from and go to.
struct Peer {
    /// Datagrams come from here: the connected UDP socket, or the socketpair end the
    /// listening loop hands one client's datagrams into.
    recv: OwnedFd,
    /// Answers go on `recv` itself (connected), or from the listening socket to `to`.
    reply: Reply,
    /// The peer as the report names it.
    name: String,
}

enum Reply {
    Connected,
    To {
        listener: Arc<OwnedFd>,
        addr: SockaddrStorage,
    },
}

impl Peer {
    fn send(&self, payload: &[u8]) -> Result<usize, Errno> {
        match &self.reply {
            Reply::Connected => socket::send(self.recv.as_raw_fd(), payload, MsgFlags::empty()),
            Reply::To { listener, addr } => {
                socket::sendto(listener.as_raw_fd(), payload, addr, MsgFlags::empty())
            }
        }
    }
}

/// What one session did, for its report.
#[derive(Default)]
struct Counts {
    /// [stream -> datagrams, datagrams -> stream]: payload bytes, datagrams.
    bytes: [u64; 2],
    datagrams: [Datagrams; 2],
}

const TO_DATAGRAMS: usize = 0;
const TO_STREAM: usize = 1;

/// A session's configuration, shared with its thread.
#[derive(Clone)]
struct SessionSpec {
    frame: Option<Frame>,
    idle: Duration,
    /// Silence ends the session only once the stream ended (an interactive one, with no
    /// `--idle-timeout`).
    idle_after_eof: bool,
    /// The most a raw stream's read sends as one datagram.
    size: usize,
    stop: Arc<AtomicBool>,
    dgram_uri: String,
    dgram_side: Side,
}

fn stopping(stop: &AtomicBool) -> bool {
    process::interrupted() || stop.load(Ordering::Relaxed)
}

/// Serves one session until both ways ended, silence, a failure or a signal.
fn serve(spec: &SessionSpec, stream: &Stream, peer: &Peer, counts: &mut Counts) -> ConnEnd {
    let stream_side = spec.dgram_side.other();
    let mut from_stream = vec![0u8; spec.size.max(RECEIVE_BUFFER)];
    let mut pending: Vec<u8> = Vec::new();
    let mut from_peer = vec![0u8; RECEIVE_BUFFER];
    let mut framed = Vec::with_capacity(RECEIVE_BUFFER + 2);
    let (mut stream_open, mut peer_open) = (true, true);
    let mut last = Instant::now();
    loop {
        if stopping(&spec.stop) {
            return ConnEnd::Signal;
        }
        if !stream_open && !peer_open {
            return ConnEnd::Eof;
        }
        let quiet = last.elapsed();
        let timed = !(spec.idle_after_eof && stream_open);
        if timed && quiet >= spec.idle {
            return ConnEnd::Quiet;
        }
        let wait = if timed {
            (spec.idle - quiet).min(STOP_CHECK)
        } else {
            STOP_CHECK
        };
        // SAFETY: the fds stay open for the call (owned by `stream` and `peer`).
        let (sfd, pfd) = unsafe {
            (
                BorrowedFd::borrow_raw(stream.read),
                BorrowedFd::borrow_raw(peer.recv.as_raw_fd()),
            )
        };
        let none = PollFlags::empty();
        let mut fds = [
            PollFd::new(sfd, if stream_open { PollFlags::POLLIN } else { none }),
            PollFd::new(pfd, if peer_open { PollFlags::POLLIN } else { none }),
        ];
        let timeout =
            PollTimeout::try_from(wait.as_millis().max(1) as u64).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                return ConnEnd::Unusable(format!(
                    "poll: {}",
                    crate::report::errno_names(&e.to_string())
                ))
            }
        }
        let ready = |fd: &PollFd| {
            fd.revents().is_some_and(|r| {
                r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
            })
        };
        let (stream_ready, peer_ready) = (ready(&fds[0]), ready(&fds[1]));
        if stream_open && stream_ready {
            let want = if spec.frame.is_some() {
                from_stream.len()
            } else {
                spec.size
            };
            match crate::sys::read(sfd, &mut from_stream[..want]) {
                Ok(0) => {
                    stream_open = false;
                    last = Instant::now();
                    // A frame cut by the stream's end cannot go on whole.
                    if !pending.is_empty() {
                        counts.datagrams[TO_DATAGRAMS].dropped += 1;
                        pending.clear();
                    }
                }
                Ok(n) => {
                    last = Instant::now();
                    let sent = match spec.frame {
                        None => send_one(peer, &from_stream[..n], counts),
                        Some(Frame::Len16) => {
                            pending.extend_from_slice(&from_stream[..n]);
                            send_frames(peer, &mut pending, counts)
                        }
                    };
                    if let Err(errno) = sent {
                        return ConnEnd::Write {
                            side: spec.dgram_side,
                            uri: spec.dgram_uri.clone(),
                            errno,
                        };
                    }
                }
                Err(Errno::EINTR | Errno::EAGAIN) => {}
                Err(errno) => {
                    return ConnEnd::Read {
                        side: stream_side,
                        uri: stream.uri.clone(),
                        errno,
                    }
                }
            }
        }
        if peer_open && peer_ready {
            let got = socket::recv(
                peer.recv.as_raw_fd(),
                &mut from_peer,
                MsgFlags::MSG_TRUNC | MsgFlags::MSG_DONTWAIT,
            );
            match got {
                Ok(0) if spec.frame.is_none() => {
                    // zerocat's end of a UDP stream: nothing more goes to the stream.
                    peer_open = false;
                    if let Some(fd) = &stream.socket {
                        let _ = socket::shutdown(fd.as_raw_fd(), socket::Shutdown::Write);
                    }
                }
                Ok(n) => {
                    last = Instant::now();
                    // SAFETY: `stream.write` stays open for the call.
                    let out = unsafe { BorrowedFd::borrow_raw(stream.write) };
                    let written = match spec.frame {
                        Some(Frame::Len16) => write_framed(out, &from_peer, n, &mut framed, counts),
                        None if n > from_peer.len() => {
                            counts.datagrams[TO_STREAM].dropped += 1;
                            Ok(())
                        }
                        None => write_whole(out, &from_peer[..n], counts),
                    };
                    if let Err(errno) = written {
                        if errno == Errno::EINTR && process::interrupted() {
                            return ConnEnd::Signal;
                        }
                        return ConnEnd::Write {
                            side: stream_side,
                            uri: stream.uri.clone(),
                            errno,
                        };
                    }
                }
                Err(Errno::EINTR | Errno::EAGAIN) => {}
                Err(errno) => {
                    // ECONNREFUSED: an earlier datagram found no one at the target.
                    return ConnEnd::Read {
                        side: spec.dgram_side,
                        uri: spec.dgram_uri.clone(),
                        errno,
                    };
                }
            }
        }
    }
}

/// One datagram to the peer. A full socket buffer (EAGAIN, ENOBUFS) drops it, counted;
/// an ICMP error of an earlier datagram (ECONNREFUSED) is reported once and this one
/// sent again.
fn send_one(peer: &Peer, payload: &[u8], counts: &mut Counts) -> Result<(), Errno> {
    let mut refused_once = false;
    loop {
        match peer.send(payload) {
            Ok(_) => {
                counts.datagrams[TO_DATAGRAMS].sent += 1;
                counts.bytes[TO_DATAGRAMS] += payload.len() as u64;
                return Ok(());
            }
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN | Errno::ENOBUFS | Errno::EMSGSIZE) => {
                counts.datagrams[TO_DATAGRAMS].dropped += 1;
                return Ok(());
            }
            Err(Errno::ECONNREFUSED) if !refused_once => refused_once = true,
            Err(e) => return Err(e),
        }
    }
}

/// The whole frames at the head of `pending`, each one datagram; a partial one stays.
fn send_frames(peer: &Peer, pending: &mut Vec<u8>, counts: &mut Counts) -> Result<(), Errno> {
    let mut at = 0;
    while let Some(len) = next_frame(&pending[at..]) {
        send_one(peer, &pending[at + 2..at + 2 + len], counts)?;
        at += 2 + len;
    }
    pending.drain(..at);
    Ok(())
}

/// The length of the whole `len16` frame at the head of `bytes`, if it is all there.
pub fn next_frame(bytes: &[u8]) -> Option<usize> {
    let len = usize::from(u16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]));
    (bytes.len() >= 2 + len).then_some(len)
}

/// A datagram of `len` bytes (its first `buf.len()` received) as one `len16` frame; one
/// longer than [`LEN16_MAX`] is dropped and counted, never cut.
fn write_framed(
    out: BorrowedFd<'_>,
    buf: &[u8],
    len: usize,
    framed: &mut Vec<u8>,
    counts: &mut Counts,
) -> Result<(), Errno> {
    if !frame_into(framed, &buf[..len.min(buf.len())], len) {
        counts.datagrams[TO_STREAM].dropped += 1;
        return Ok(());
    }
    crate::sys::write_all(out, framed).map_err(|(_, e)| e)?;
    counts.datagrams[TO_STREAM].sent += 1;
    counts.bytes[TO_STREAM] += len as u64;
    Ok(())
}

/// `payload` (a datagram of `len` bytes) as a `len16` frame into `framed`: false when the
/// datagram cannot be one (longer than [`LEN16_MAX`]).
pub fn frame_into(framed: &mut Vec<u8>, payload: &[u8], len: usize) -> bool {
    let Ok(len16) = u16::try_from(len) else {
        return false;
    };
    if payload.len() != len {
        return false;
    }
    framed.clear();
    framed.extend_from_slice(&len16.to_be_bytes());
    framed.extend_from_slice(payload);
    true
}

fn write_whole(out: BorrowedFd<'_>, payload: &[u8], counts: &mut Counts) -> Result<(), Errno> {
    crate::sys::write_all(out, payload).map_err(|(_, e)| e)?;
    counts.datagrams[TO_STREAM].sent += 1;
    counts.bytes[TO_STREAM] += payload.len() as u64;
    Ok(())
}

/// A session over: the stream's socket half-closed after a clean end (FIN, not RST),
/// then closed; its report.
fn finish(stream: Stream, end: &ConnEnd) {
    if let Some(fd) = stream.socket {
        if *end == ConnEnd::Eof || *end == ConnEnd::Quiet {
            crate::cmd::common::finish_socket_sink(fd.as_fd());
        } else {
            crate::sys::socket::abort_socket(fd);
        }
    }
}

impl Relay<'_> {
    fn spec(&self) -> SessionSpec {
        let dgram = self.cfg.side(self.dgram_side);
        SessionSpec {
            frame: self.frame,
            idle: self.idle,
            idle_after_eof: self.cfg.idle_timeout.is_none() && self.frame.is_none(),
            size: dgram.datagram_size().unwrap_or(UDP_PAYLOAD_MAX),
            stop: self.stop.clone(),
            dgram_uri: dgram.to_string(),
            dgram_side: self.dgram_side,
        }
    }

    /// A session's report: [A -> B, B -> A] from [stream -> datagrams, datagrams -> stream].
    fn report(
        &mut self,
        id: u64,
        peer: &str,
        upstream: &str,
        started: Instant,
        counts: &Counts,
        end: ConnEnd,
    ) {
        let order = if self.dgram_side == Side::A {
            [TO_STREAM, TO_DATAGRAMS]
        } else {
            [TO_DATAGRAMS, TO_STREAM]
        };
        let flows = order
            .map(|d| FlowReport::of_datagrams(counts.bytes[d], counts.datagrams[d], end.clone()));
        let report = ConnReport {
            id,
            seq: self.tally.count,
            peer: peer.to_string(),
            upstream: upstream.to_string(),
            upstream_uri: None,
            seconds: started.elapsed().as_secs_f64(),
            flows,
            end,
            mptcp: [None, None],
            children: [None, None],
            datagrams: Some(order.map(|d| counts.datagrams[d])),
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

    fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    /// The stream side when it is one stream: stdio, an inherited fd, or a connection.
    fn open_stream(&self) -> anyhow::Result<Stream> {
        let e = self.cfg.side(self.dgram_side.other());
        Ok(match e {
            Endpoint::Stdio => Stream {
                read: 0,
                write: 1,
                socket: None,
                uri: e.to_string(),
            },
            Endpoint::Fd(n) => Stream {
                read: *n,
                write: *n,
                socket: None,
                uri: e.to_string(),
            },
            _ => Stream::socket(e.connect()?, e.to_string()),
        })
    }

    /// `udp:` with `-`, `fd:N` or a connector: one session.
    fn one_session(&mut self) -> anyhow::Result<bool> {
        let dgram = self.cfg.side(self.dgram_side);
        let target = dgram.datagram_target()?;
        let sock = dgram.sock_opts().cloned().unwrap_or_default();
        let recv =
            udp::connect_to(&target, &sock).with_context(|| format!("cannot use {dgram}"))?;
        set_blocking(&recv)?;
        let stream = self.open_stream()?;
        let peer = Peer {
            recv,
            reply: Reply::Connected,
            name: target.to_string(),
        };
        self.serve_here(stream, peer)
    }

    /// `udp-listen:` with `-` or `fd:N`: the first peer that sends is the session's.
    fn first_peer(&mut self) -> anyhow::Result<bool> {
        let dgram = self.cfg.side(self.dgram_side);
        let recv = dgram.bind_datagram()?;
        let access = dgram.access().cloned().unwrap_or_default();
        match udp::await_first_peer(&recv, &access) {
            Ok(refused) => self.tally.access_refused += refused,
            Err(e) if e.downcast_ref::<crate::exit::Interrupted>().is_some() => return Ok(true),
            Err(e) => return Err(e),
        }
        let name = socket::getpeername::<SockaddrStorage>(recv.as_raw_fd())
            .map_or_else(|_| "?".into(), |a| a.to_string());
        let stream = self.open_stream()?;
        let peer = Peer {
            recv,
            reply: Reply::Connected,
            name,
        };
        self.serve_here(stream, peer)
    }

    fn serve_here(&mut self, stream: Stream, peer: Peer) -> anyhow::Result<bool> {
        let id = self.take_id();
        let started = Instant::now();
        let mut counts = Counts::default();
        let end = serve(&self.spec(), &stream, &peer, &mut counts);
        counts.datagrams[TO_STREAM].dropped +=
            datagram::receive_drops(peer.recv.as_fd()).unwrap_or(0);
        let interrupted = end == ConnEnd::Signal;
        let stream_uri = stream.uri.clone();
        finish(stream, &end);
        self.report(id, &peer.name, &stream_uri, started, &counts, end);
        Ok(interrupted)
    }

    /// `tcp-listen:…,frame=len16` with `udp:`: a session per connection, each with a UDP
    /// socket of its own connected to the target, in a thread of its own.
    fn connections_to_target(&mut self) -> anyhow::Result<bool> {
        let stream_end = self.cfg.side(self.dgram_side.other());
        let target = self.cfg.side(self.dgram_side).datagram_target()?;
        let sock = (self.cfg.side(self.dgram_side).sock_opts().cloned()).unwrap_or_default();
        let listener = stream_end.listen()?;
        let max = self.cfg.max_conns.unwrap_or(usize::MAX);
        let mut sessions: Vec<Running> = Vec::new();
        let mut accepted_once = false;
        loop {
            self.reap(&mut sessions, false);
            if process::interrupted() {
                self.stop.store(true, Ordering::SeqCst);
                self.reap(&mut sessions, true);
                return Ok(true);
            }
            if self.cfg.once && accepted_once {
                if sessions.is_empty() {
                    return Ok(false);
                }
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            if sessions.len() >= max || !readable(listener.as_fd(), STOP_CHECK) {
                if sessions.len() >= max {
                    std::thread::sleep(Duration::from_millis(20));
                }
                continue;
            }
            let accepted = match listener.accept_from() {
                Ok(a) => a,
                Err(e) if e.raw_os_error() == Some(Errno::EINTR as i32) => continue,
                Err(e) => {
                    eprintln!("zerocat: relay: accepting on {stream_end}: {e}");
                    continue;
                }
            };
            accepted_once = true;
            let recv = match udp::connect_to(&target, &sock)
                .and_then(|fd| set_blocking(&fd).map(|()| fd))
            {
                Ok(fd) => fd,
                Err(e) => {
                    eprintln!(
                        "zerocat: relay: no session for {}: cannot connect to {target}: {e}",
                        accepted.peer
                    );
                    continue;
                }
            };
            let stream = Stream::socket(accepted.fd, stream_end.to_string());
            let peer = Peer {
                recv,
                reply: Reply::Connected,
                name: target.to_string(),
            };
            let id = self.take_id();
            sessions.push(spawn(self.spec(), id, accepted.peer, stream, peer));
        }
    }

    /// `udp-listen:` with `tcp:…,frame=len16`: a session per client address, each with a
    /// connection of its own; the client's datagrams reach it through a socketpair.
    fn clients_to_connections(&mut self) -> anyhow::Result<bool> {
        let dgram = self.cfg.side(self.dgram_side);
        // allow=/deny=: a refused client's datagrams are dropped and counted, and open no
        // connection (as the datagram relay's).
        let access = dgram.access().cloned().unwrap_or_default();
        let listener = Arc::new(dgram.bind_datagram()?);
        crate::sys::socket::set_nonblocking(listener.as_raw_fd())?;
        let max = self.cfg.max_conns.unwrap_or(usize::MAX);
        let mut by_client: HashMap<Vec<u8>, (OwnedFd, u64)> = HashMap::new();
        let mut sessions: Vec<Running> = Vec::new();
        let mut buf = vec![0u8; RECEIVE_BUFFER];
        let mut started_once = false;
        loop {
            for done in self.reap(&mut sessions, false) {
                by_client.retain(|_, (_, id)| *id != done);
            }
            if process::interrupted() {
                self.stop.store(true, Ordering::SeqCst);
                self.reap(&mut sessions, true);
                return Ok(true);
            }
            if self.cfg.once && started_once && sessions.is_empty() {
                return Ok(false);
            }
            if !readable(listener.as_fd(), STOP_CHECK) {
                continue;
            }
            loop {
                let (n, from) =
                    match socket::recvfrom::<SockaddrStorage>(listener.as_raw_fd(), &mut buf) {
                        Ok((n, Some(from))) => (n, from),
                        Ok((_, None)) => continue,
                        Err(Errno::EAGAIN) => break,
                        Err(Errno::EINTR | Errno::ECONNREFUSED) => continue,
                        Err(e) => {
                            eprintln!("zerocat: relay: reading {dgram}: {e}");
                            break;
                        }
                    };
                let key = addr_key(&from);
                if !by_client.contains_key(&key) {
                    let ip = match (from.as_sockaddr_in(), from.as_sockaddr_in6()) {
                        (Some(v4), _) => Some(std::net::IpAddr::V4(v4.ip())),
                        (_, Some(v6)) => Some(std::net::IpAddr::V6(v6.ip())),
                        _ => None,
                    };
                    if access.check(ip).is_err() {
                        self.tally.access_refused += 1;
                        continue;
                    }
                    if by_client.len() >= max || (self.cfg.once && started_once) {
                        self.tally.refused += 1;
                        continue;
                    }
                    let (ours, theirs) = match socket::socketpair(
                        socket::AddressFamily::Unix,
                        socket::SockType::Datagram,
                        None,
                        socket::SockFlag::SOCK_CLOEXEC,
                    ) {
                        Ok(pair) => pair,
                        Err(e) => {
                            eprintln!("zerocat: relay: no session for {from}: {e}");
                            continue;
                        }
                    };
                    datagram::grow_receive_queue(theirs.as_fd(), 1 << 20);
                    let id = self.take_id();
                    started_once = true;
                    let peer = Peer {
                        recv: theirs,
                        reply: Reply::To {
                            listener: listener.clone(),
                            addr: from,
                        },
                        name: from.to_string(),
                    };
                    let connector = self.cfg.side(self.dgram_side.other()).clone();
                    sessions.push(spawn_dialing(self.spec(), id, connector, peer));
                    by_client.insert(key.clone(), (ours, id));
                }
                // A session that cannot keep up loses datagrams, as UDP would; counted.
                let (ours, id) = &by_client[&key];
                if socket::send(
                    ours.as_raw_fd(),
                    &buf[..n.min(buf.len())],
                    MsgFlags::MSG_DONTWAIT,
                )
                .is_err()
                {
                    if let Some(r) = sessions.iter_mut().find(|r| r.id == *id) {
                        r.dropped_before += 1;
                    }
                }
            }
        }
    }

    /// Reports the sessions that ended (all of them, waited for, with `all`): their ids.
    fn reap(&mut self, sessions: &mut Vec<Running>, all: bool) -> Vec<u64> {
        let mut done = Vec::new();
        let mut i = 0;
        while i < sessions.len() {
            if all || sessions[i].thread.is_finished() {
                let r = sessions.swap_remove(i);
                if let Ok(mut ended) = r.thread.join() {
                    ended.counts.datagrams[TO_DATAGRAMS].dropped += r.dropped_before;
                    self.report(
                        r.id,
                        &ended.peer,
                        &ended.upstream,
                        ended.started,
                        &ended.counts,
                        ended.end,
                    );
                }
                done.push(r.id);
            } else {
                i += 1;
            }
        }
        done
    }
}

/// A session running in a thread of its own.
struct Running {
    id: u64,
    thread: std::thread::JoinHandle<Ended>,
    /// Datagrams for it the listening loop could not hand over (its queue full).
    dropped_before: u64,
}

struct Ended {
    peer: String,
    upstream: String,
    started: Instant,
    counts: Counts,
    end: ConnEnd,
}

fn spawn(spec: SessionSpec, id: u64, client: String, stream: Stream, peer: Peer) -> Running {
    let thread = std::thread::spawn(move || {
        let started = Instant::now();
        let mut counts = Counts::default();
        let end = serve(&spec, &stream, &peer, &mut counts);
        counts.datagrams[TO_STREAM].dropped +=
            datagram::receive_drops(peer.recv.as_fd()).unwrap_or(0);
        finish(stream, &end);
        Ended {
            peer: client,
            upstream: peer.name,
            started,
            counts,
            end,
        }
    });
    Running {
        id,
        thread,
        dropped_before: 0,
    }
}

/// A client's session: connect to `connector`, then serve.
fn spawn_dialing(spec: SessionSpec, id: u64, connector: Endpoint, peer: Peer) -> Running {
    let thread = std::thread::spawn(move || {
        let started = Instant::now();
        let mut counts = Counts::default();
        let upstream = connector.to_string();
        let end = match connector.connect() {
            Ok(fd) => {
                let stream = Stream::socket(fd, upstream.clone());
                let end = serve(&spec, &stream, &peer, &mut counts);
                finish(stream, &end);
                end
            }
            Err(e) => ConnEnd::Unusable(format!("{e:#}")),
        };
        Ended {
            peer: peer.name,
            upstream,
            started,
            counts,
            end,
        }
    });
    Running {
        id,
        thread,
        dropped_before: 0,
    }
}

fn readable(fd: BorrowedFd<'_>, within: Duration) -> bool {
    crate::sys::wait_within(fd, PollFlags::POLLIN, within).unwrap_or(false)
}

fn set_blocking(fd: &OwnedFd) -> Result<(), Errno> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = OFlag::from_bits_retain(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)?);
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    Ok(())
}

fn addr_key(addr: &SockaddrStorage) -> Vec<u8> {
    addr.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn len16_frames_carry_each_datagram_whole_and_refuse_a_longer_one() {
        let mut framed = Vec::new();
        assert!(frame_into(&mut framed, b"abc", 3));
        assert_eq!(framed, [0, 3, b'a', b'b', b'c']);
        assert!(
            frame_into(&mut framed, b"", 0),
            "an empty datagram is a frame of 0"
        );
        assert_eq!(framed, [0, 0]);
        let big = vec![7u8; LEN16_MAX];
        assert!(frame_into(&mut framed, &big, LEN16_MAX));
        assert_eq!(&framed[..2], [0xff, 0xff]);
        let longer = vec![7u8; LEN16_MAX + 1];
        assert!(
            !frame_into(&mut framed, &longer, LEN16_MAX + 1),
            "dropped, never cut"
        );
        assert!(
            !frame_into(&mut framed, &big, LEN16_MAX + 10),
            "a truncated read is no frame"
        );
    }

    #[test]
    fn a_frame_is_taken_only_when_all_of_it_is_there() {
        assert_eq!(next_frame(&[]), None);
        assert_eq!(next_frame(&[0]), None);
        assert_eq!(next_frame(&[0, 2, b'x']), None);
        assert_eq!(next_frame(&[0, 2, b'x', b'y', 0]), Some(2));
        assert_eq!(next_frame(&[0, 0]), Some(0));
    }
}
