//! Listeners: sockets zerocat binds (`tcp-listen:`, `unix-listen:`) or inherits already
//! listening (`fd:N`, `systemd:`), and the connections they accept.
//!
//! One socket and no PROXY header to read: the caller polls that socket and `accept` is one
//! accept4. Several sockets (`systemd:` with more than one), or `proxy`: the listener keeps
//! an epoll of its own (the sockets, the connections whose header is not complete yet, a
//! timerfd for their deadlines), and that epoll's fd is the one the caller polls: it is
//! readable while something is to be accepted or decided. Either way `accept` blocks unless
//! the caller made [`Listener::as_fd`] non-blocking (the relay does), and then says EAGAIN.

use std::collections::{HashSet, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::libc;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::socket::{self, sockopt, MsgFlags, SockFlag, SockaddrLike, SockaddrStorage};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};

use super::access::Access;
use super::proxy::{self, Addresses};
use super::tls::{Handshake, Session};
use rustls::ServerConfig;
use std::sync::Arc;

/// How long a connection on a `proxy` or TLS listener may take to send its header and
/// finish its handshake when no `--connect-timeout` says otherwise. HAProxy's `timeout
/// client` (which `timeout handshake` defaults to) is typically 5 s to 30 s; 5 s is the short
/// end: a TLS 1.3 handshake is one round trip, so a client even on a 1 s-RTT link fits
/// many times over, and a silent socket is gone soon. (Shedding, not this deadline, is what
/// keeps a flood of silent sockets from locking real clients out.)
pub const GREETING_DEADLINE: Duration = Duration::from_secs(5);
/// Connections still greeting (PROXY header or TLS handshake in flight), at most; beyond,
/// the oldest is closed to make room for the newest (never: stop accepting). The relay
/// lowers it to its `--max-conns` ([`Listener::limit_greetings`]).
const MAX_GREETINGS: usize = 1024;

/// A connection a listener accepted: the socket, the client as reported (the address a
/// PROXY header carried, else the peer's), and the addresses a PROXY header to a backend
/// would carry.
#[derive(Debug)]
pub struct Accepted {
    pub fd: OwnedFd,
    pub peer: String,
    pub origin: Addresses,
    /// A TLS listener's connection: what its handshake negotiated and which record layer
    /// carries it (`fd` is then the TCP socket under kTLS, or the bridge's socketpair end).
    /// Boxed: a plain connection's `Accepted` is moved a few times on its way to the relay's
    /// table, and a session inline made each move copy it.
    pub tls: Option<Box<Session>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({:?})", self.info)
    }
}

/// What a listener reads from every connection before handing it out.
#[derive(Clone, Default)]
pub struct Greet {
    /// A PROXY protocol header (`proxy`).
    pub header: bool,
    /// A TLS server handshake (after the header).
    pub tls: Option<Arc<ServerConfig>>,
    /// How long both may take together.
    pub deadline: Duration,
    /// An established TLS connection keeps its record layer for the caller's event loop
    /// ([`super::tls::Records`]), not a thread of its own (the relay).
    pub tls_in_loop: bool,
    /// `allow=`/`deny=`: checked on the client's address (the one its PROXY header
    /// carried, with `header`) before its TLS handshake and before any byte of its stream.
    pub access: Access,
}

impl Greet {
    fn any(&self) -> bool {
        self.header || self.tls.is_some()
    }
}

/// A connection closed because its PROXY header was missing, malformed or late: never
/// relayed. Comes back from [`Listener::accept`] as an `io::Error` of kind `InvalidData`
/// whose inner error is this.
#[derive(Debug)]
pub struct Rejected {
    /// The peer's own address (no header told us another).
    pub peer: String,
    pub reason: String,
    /// By the listener's `allow=`/`deny=` (the client is not let in), not for how it
    /// greeted.
    pub refused: bool,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.refused { "refused" } else { "closed" };
        write!(
            f,
            "{what} the connection from {}: {}",
            self.peer, self.reason
        )
    }
}
impl std::error::Error for Rejected {}

impl Rejected {
    /// The rejection an accept error carries, if it is one.
    pub fn of(e: &io::Error) -> Option<&Rejected> {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<Rejected>())
    }
}

/// One listening socket.
#[derive(Debug)]
pub(super) struct Socket {
    pub(super) fd: OwnedFd,
    pub(super) local: String,
    /// The socket file we bound, with its (st_dev, st_ino), so Drop removes only that file.
    pub(super) socket_file: Option<(PathBuf, u64, u64)>,
    /// The local address of every connection it accepts, where known without a
    /// getsockname per connection: a TCP socket bound to one address, not a wildcard.
    pub(super) accepts_on: Option<SocketAddr>,
    /// zerocat bound it (tcp-listen:, unix-listen:), so zerocat may stop it; not one it
    /// inherited (fd:N, systemd:), which its giver still listens on.
    pub(super) bound: bool,
}

impl Socket {
    /// A socket with no file of ours to remove; its address from getsockname.
    pub(super) fn named(fd: OwnedFd) -> Socket {
        let local = socket::getsockname::<SockaddrStorage>(fd.as_raw_fd())
            .ok()
            .and_then(|a| format_sockaddr(&a))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "an unnamed socket".to_string());
        Socket {
            fd,
            local,
            socket_file: None,
            accepts_on: None,
            bound: false,
        }
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // Remove only the socket we bound: not a file someone put there since.
        if let Some((path, dev, ino)) = &self.socket_file {
            if let Ok(meta) = std::fs::symlink_metadata(path) {
                if meta.file_type().is_socket() && meta.dev() == *dev && meta.ino() == *ino {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }
}

/// Bound, listening sockets. A unix listener removes its socket file when dropped.
#[derive(Debug)]
pub struct Listener {
    sockets: Vec<Socket>,
    local: String,
    /// `allow=`/`deny=` (the mux's copy decides when it reads PROXY headers).
    access: Access,
    /// Several sockets, or PROXY headers to read: the epoll the caller polls instead.
    mux: Option<Mux>,
    /// `ws-listen:`: every connection is upgraded to a WebSocket (the path served, or any).
    ws: Option<Option<String>>,
}

/// Inner epoll tokens: the sockets are 0..n, a greeting is GREETING + its slot.
const TIMER: u64 = u64::MAX;
const GREETING: u64 = 1 << 32;

struct Mux {
    epoll: Epoll,
    /// The listener's sockets (owned by it, which owns this mux), by token.
    sockets: Vec<RawFd>,
    /// The deadline of the oldest greeting (only with `proxy` or TLS).
    timer: Option<TimerFd>,
    greet: Greet,
    state: Mutex<MuxState>,
}

impl std::fmt::Debug for Mux {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mux({} sockets)", self.sockets.len())
    }
}

#[derive(Default)]
struct MuxState {
    greetings: Vec<Option<Greeting>>,
    free: Vec<usize>,
    waiting: usize,
    /// Greetings in flight at most (all sources), and from one source address.
    cap: usize,
    cap_per_source: usize,
    /// Greetings past their deadline or shed, to report one per accept call.
    expired: VecDeque<Rejected>,
    /// Slots whose greeting a loop took out of the table to advance its handshake, and
    /// those of them whose socket had news meanwhile.
    in_hand: HashSet<usize>,
    missed: HashSet<usize>,
    /// An fd held open to be closed when accept4 says EMFILE and no greeting can be shed:
    /// then one client is accepted and closed at once (told, not left hanging in the
    /// backlog while the level-triggered listener spins; libuv's trick).
    reserve: Option<OwnedFd>,
}

/// A connection whose PROXY header has not all arrived, or whose TLS handshake is not done.
struct Greeting {
    fd: OwnedFd,
    peer: String,
    real: Addresses,
    /// The address it connected from (not one a PROXY header names): what the bound per
    /// source counts.
    source: Option<std::net::IpAddr>,
    due: Instant,
    /// Its PROXY header is still awaited.
    header: bool,
    shake: Option<Handshake>,
}

impl Listener {
    /// Listening sockets, announced on stderr (`zerocat: listening on ADDR`, one line each,
    /// also under -q: scripts read the port from it). `proxy`: every connection must
    /// first send a PROXY header, within `deadline`.
    pub(super) fn new(sockets: Vec<Socket>, greet: Greet) -> anyhow::Result<Listener> {
        let local = sockets
            .iter()
            .map(|s| s.local.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let access = greet.access.clone();
        let mux = if sockets.len() > 1 || greet.any() {
            Some(Mux::new(&sockets, greet)?)
        } else {
            None
        };
        for socket in &sockets {
            super::announce_listening(&socket.local);
        }
        Ok(Listener {
            sockets,
            local,
            access,
            mux,
            ws: None,
        })
    }

    /// Accept one connection (CLOEXEC, blocking even if the listener is O_NONBLOCK).
    /// Returns the fd and a printable peer address ("127.0.0.1:5555", or "unix" for an
    /// unnamed unix peer). Errors come back raw, EINTR and EAGAIN included, for the relay's
    /// accept loop to judge; a connection closed for its PROXY header is a [`Rejected`].
    pub fn accept(&self) -> io::Result<(OwnedFd, String)> {
        self.accept_from().map(|a| (a.fd, a.peer))
    }

    /// Several sockets, or connections waiting for their PROXY header: accepting goes
    /// through state of this listener's own (its epoll, the greetings in flight).
    pub fn is_multiplexed(&self) -> bool {
        self.mux.is_some()
    }

    /// [`Listener::accept`], with the addresses a PROXY header would carry.
    pub fn accept_from(&self) -> io::Result<Accepted> {
        self.accept_with(SockFlag::SOCK_CLOEXEC)
    }

    /// [`Listener::accept_from`] for an event loop: the connection comes O_NONBLOCK (from
    /// accept4 itself, no fcntl after).
    pub fn accept_nonblocking(&self) -> io::Result<Accepted> {
        self.accept_with(SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK)
    }

    fn accept_with(&self, flags: SockFlag) -> io::Result<Accepted> {
        let accepted = match &self.mux {
            None => accept_on(&self.sockets[0], flags).and_then(|a| admit(&self.access, a)),
            Some(mux) => {
                let blocking = fcntl(mux.epoll.0.as_raw_fd(), FcntlArg::F_GETFL)
                    .map(|f| !OFlag::from_bits_retain(f).contains(OFlag::O_NONBLOCK))
                    .unwrap_or(true);
                mux.step(&self.sockets, blocking, flags)
            }
        }?;
        let Some(path) = &self.ws else {
            return Ok(accepted);
        };
        // The upgrade and the frames run in the connection's threads; the caller gets
        // the socketpair end at once (its first bytes come after the upgrade).
        let role = super::websocket::bridge::Role::Server { path: path.clone() };
        let nonblocking = flags.contains(SockFlag::SOCK_NONBLOCK);
        let tls_end = accepted.tls.as_deref().and_then(Session::inner_end);
        let on_close = tls_end.map(|end| Box::new(move || end.ended()) as _);
        let fd = super::websocket::bridge::start(
            accepted.fd,
            role,
            nonblocking,
            accepted.peer.clone(),
            on_close,
        )?;
        Ok(Accepted { fd, ..accepted })
    }

    /// `ws-listen:`: every connection accepted from now on is a WebSocket server's.
    pub fn serve_websocket(&mut self, path: Option<String>) {
        self.ws = Some(path);
    }

    /// The bound addresses as announced: `127.0.0.1:43211`, `[::1]:8080`, a path or
    /// `@name`; several joined by ", ".
    pub fn local_addr(&self) -> &str {
        &self.local
    }

    /// No more connections: every socket zerocat bound is shut down, so new clients are
    /// refused at once rather than left in a backlog nobody reads. An inherited one (fd:N,
    /// systemd:) is left listening: it is its giver's (systemd queues the next clients for
    /// the next activation), and zerocat only closes its own dup of it, when dropped.
    pub fn stop_listening(&self) {
        for socket in self.sockets.iter().filter(|s| s.bound) {
            let _ = socket::shutdown(socket.fd.as_raw_fd(), socket::Shutdown::Both);
        }
    }

    /// The listener stopped accepting (a signal, `--once`): the connections still greeting
    /// (their PROXY header or TLS handshake not complete) are closed, and returned for the
    /// caller to report, so none disappears from the count.
    pub fn abandon_greetings(&self) -> Vec<Rejected> {
        let Some(mux) = &self.mux else {
            return Vec::new();
        };
        let mut state = mux.state.lock().unwrap_or_else(|e| e.into_inner());
        let slots: Vec<usize> = (0..state.greetings.len())
            .filter(|&i| state.greetings[i].is_some())
            .collect();
        slots
            .into_iter()
            .filter_map(|slot| mux.forget(&mut state, slot))
            .map(|g| Rejected {
                refused: false,
                peer: g.peer,
                reason: if g.header {
                    "closed before its PROXY header was complete: the relay stopped accepting"
                } else {
                    "closed during its TLS handshake: the relay stopped accepting"
                }
                .to_string(),
            })
            .collect()
    }

    /// Connections accepted are still greeting (a PROXY header or TLS handshake in flight).
    pub fn greeting(&self) -> bool {
        self.mux.as_ref().is_some_and(|mux| {
            let state = mux.state.lock().unwrap_or_else(|e| e.into_inner());
            state.greetings.iter().any(Option::is_some)
        })
    }

    /// At most `max` connections greeting at once (a TLS handshake or PROXY header in
    /// flight; at most 1,024 whatever `max`), and at most half of them from one address;
    /// beyond, the oldest greeting (of that address, if it is the one over) is closed.
    pub fn limit_greetings(&self, max: usize) {
        if let Some(mux) = &self.mux {
            let mut state = mux.state.lock().unwrap_or_else(|e| e.into_inner());
            state.cap = max.clamp(1, MAX_GREETINGS);
            state.cap_per_source = (state.cap / 2).max(1);
        }
    }

    /// TLS connections keep their record layer for the caller's event loop (the relay).
    pub fn keep_tls_in_loop(&mut self) {
        if self.ws.is_some() {
            return; // the WebSocket's threads need the plaintext fd
        }
        if let Some(mux) = &mut self.mux {
            mux.greet.tls_in_loop = true;
        }
    }

    /// The fd to poll for connections: the socket, or the listener's own epoll.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        match &self.mux {
            Some(mux) => mux.epoll.0.as_fd(),
            None => self.sockets[0].fd.as_fd(),
        }
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        Listener::as_fd(self)
    }
}

/// One accept4 on a listening socket (blocking or not, as the socket is), with `flags`
/// for the new one; the peer's address comes from accept4 too.
fn accept_on(listener: &Socket, flags: SockFlag) -> io::Result<Accepted> {
    let (local, listener) = (listener.accepts_on, &listener.fd);
    // SAFETY: zeroed storage is a valid sockaddr_storage.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: addr and len point to our storage and its size, as accept4 wants.
    let raw = Errno::result(unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::addr_of_mut!(addr).cast(),
            &mut len,
            flags.bits(),
        )
    })?;
    // SAFETY: accept4 just returned this descriptor; nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: accept4 wrote an address of `len` bytes (capped at the storage's size).
    let peer = unsafe {
        SockaddrStorage::from_raw(
            std::ptr::addr_of!(addr).cast(),
            Some(len.min(std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t)),
        )
    };
    let (peer, origin) = addresses_of(&fd, peer, local);
    Ok(Accepted {
        fd,
        peer,
        origin,
        tls: None,
    })
}

/// A connected socket's peer as printed, and its (peer, local) addresses; `peer` as
/// accept4 reported it, `local` if the listener knows it. getsockname only for a TCP peer
/// on a wildcard listener (one syscall of the twenty a short connection costs).
fn addresses_of(
    fd: &OwnedFd,
    peer: Option<SockaddrStorage>,
    local: Option<SocketAddr>,
) -> (String, Addresses) {
    let shown = peer
        .as_ref()
        .and_then(format_sockaddr)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unix".to_string());
    let origin = match peer.as_ref().and_then(inet) {
        Some(src) => match local.or_else(|| {
            socket::getsockname::<SockaddrStorage>(fd.as_raw_fd())
                .ok()
                .as_ref()
                .and_then(inet)
        }) {
            Some(dst) => Addresses::Inet { src, dst },
            None => Addresses::Unknown,
        },
        None => Addresses::Unknown,
    };
    (shown, origin)
}

fn inet(addr: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    addr.as_sockaddr_in6()
        .map(|v6| SocketAddr::V6((*v6).into()))
}

impl Mux {
    fn new(sockets: &[Socket], greet: Greet) -> anyhow::Result<Mux> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(io::Error::from)?;
        for (i, socket) in sockets.iter().enumerate() {
            // Several sockets are tried in turn: none may block.
            crate::sys::socket::set_nonblocking(socket.fd.as_raw_fd()).map_err(io::Error::from)?;
            epoll
                .add(&socket.fd, EpollEvent::new(EpollFlags::EPOLLIN, i as u64))
                .map_err(io::Error::from)?;
        }
        let timer = match greet.any() {
            true => {
                let timer = TimerFd::new(
                    ClockId::CLOCK_MONOTONIC,
                    TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK,
                )
                .map_err(io::Error::from)?;
                epoll
                    .add(timer.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, TIMER))
                    .map_err(io::Error::from)?;
                Some(timer)
            }
            false => None,
        };
        Ok(Mux {
            epoll,
            sockets: sockets.iter().map(|s| s.fd.as_raw_fd()).collect(),
            timer,
            greet,
            state: Mutex::new(MuxState {
                cap: MAX_GREETINGS,
                cap_per_source: MAX_GREETINGS / 2,
                reserve: reserve_fd(),
                ..MuxState::default()
            }),
        })
    }

    /// Handles what the epoll says is ready, one event at a time, until a connection is
    /// ready to hand out (or one is rejected). Not `blocking`: EAGAIN when nothing more is
    /// ready. `blocking`: waits (the event that wakes it is the one handled: a greeting's
    /// is edge-triggered and comes once); EINTR for the caller to judge.
    fn step(&self, sockets: &[Socket], blocking: bool, flags: SockFlag) -> io::Result<Accepted> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(rejected) = state.expired.pop_front() {
                return Err(io::Error::new(io::ErrorKind::InvalidData, rejected));
            }
            let mut events = [EpollEvent::empty()];
            let timeout = if blocking {
                EpollTimeout::NONE
            } else {
                EpollTimeout::ZERO
            };
            let n = match self.epoll.wait(&mut events, timeout) {
                Ok(n) => n,
                Err(Errno::EINTR) if blocking => return Err(Errno::EINTR.into()),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                return Err(Errno::EAGAIN.into());
            }
            let token = events[0].data();
            if token == TIMER {
                self.expire(&mut state);
                continue;
            }
            if token >= GREETING {
                let slot = (token - GREETING) as usize;
                if state.in_hand.contains(&slot) {
                    // Another loop is advancing its handshake: it looks again after.
                    state.missed.insert(slot);
                    continue;
                }
                let result;
                (state, result) = self.greet(state, slot);
                match result {
                    Some(result) => return result,
                    None => continue,
                }
            }
            let Some(socket) = sockets.get(token as usize) else {
                continue;
            };
            // Without a PROXY header to read, the client is checked at once: before its
            // TLS handshake, before any byte.
            let accepted = match accept_on(socket, flags) {
                Ok(accepted) if !self.greet.header => admit(&self.greet.access, accepted),
                other => other,
            };
            match accepted {
                Ok(accepted) if self.timer.is_none() => return Ok(accepted),
                // Its header is read when the socket says it arrived (at once, when it came
                // with the connection: epoll reports data already there).
                Ok(accepted) => self.wait_for_header(&mut state, accepted)?,
                Err(e) if e.raw_os_error() == Some(Errno::EAGAIN as i32) => continue,
                Err(e) if is_out_of_fds(&e) && self.timer.is_some() => {
                    // Out of fds: a greeting makes way for the client waiting (the oldest,
                    // which a flood of silent sockets holds), else one client is told.
                    if !self.shed_oldest(&mut state, None, "out of file descriptors") {
                        if let Some(rejected) = accept_and_close(&mut state, socket, &e) {
                            return Err(io::Error::new(io::ErrorKind::InvalidData, rejected));
                        }
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Puts an accepted connection among those whose header is awaited; at the bound (of
    /// its source, or of all), the oldest greeting makes way.
    fn wait_for_header(&self, state: &mut MuxState, accepted: Accepted) -> io::Result<()> {
        let source = match &accepted.origin {
            Addresses::Inet { src, .. } => Some(src.ip()),
            _ => None,
        };
        let from_source = |state: &MuxState| {
            state
                .greetings
                .iter()
                .flatten()
                .filter(|g| source.is_some() && g.source == source)
                .count()
        };
        if source.is_some() && from_source(state) >= state.cap_per_source {
            let why = format!(
                "{} connections from its address were greeting",
                state.cap_per_source
            );
            self.shed_oldest(state, source, &why);
        }
        if state.waiting >= state.cap {
            let why = format!("{} connections were greeting", state.cap);
            self.shed_oldest(state, None, &why);
        }
        let slot = state.free.pop().unwrap_or_else(|| {
            state.greetings.push(None);
            state.greetings.len() - 1
        });
        // Edge-triggered: the header is peeked, not read, until it is complete, so a
        // partial one must not keep the epoll ready. A handshake may also wait to send.
        let shake = match &self.greet.tls {
            Some(config) => Some(Handshake::server(config).map_err(io::Error::other)?),
            None => None,
        };
        let mut flags = EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP | EpollFlags::EPOLLET;
        if shake.is_some() {
            flags |= EpollFlags::EPOLLOUT;
        }
        self.epoll
            .add(&accepted.fd, EpollEvent::new(flags, GREETING + slot as u64))?;
        state.greetings[slot] = Some(Greeting {
            fd: accepted.fd,
            peer: accepted.peer,
            real: accepted.origin,
            source,
            due: Instant::now() + self.greet.deadline,
            header: self.greet.header,
            shake,
        });
        state.waiting += 1;
        self.arm(state);
        Ok(())
    }

    /// Closes the oldest greeting (from `source`, if given) to make room, and queues its
    /// report; false when there is none.
    fn shed_oldest(
        &self,
        state: &mut MuxState,
        source: Option<std::net::IpAddr>,
        why: &str,
    ) -> bool {
        let oldest = state
            .greetings
            .iter()
            .enumerate()
            .filter_map(|(i, g)| g.as_ref().map(|g| (i, g)))
            .filter(|(_, g)| source.is_none() || g.source == source)
            .min_by_key(|(_, g)| g.due)
            .map(|(i, _)| i);
        let Some(greeting) = oldest.and_then(|slot| self.forget(state, slot)) else {
            return false;
        };
        let stage = if greeting.header {
            "its PROXY header"
        } else {
            "its TLS handshake"
        };
        state.expired.push_back(Rejected {
            refused: false,
            peer: greeting.peer,
            reason: format!("closed during {stage} to make room for a newer client: {why}"),
        });
        true
    }

    /// A greeting's socket has news: its header complete, wrong, or still partial, its
    /// handshake done, failed or waiting (None while it waits). The handshake's work (the
    /// CPU of a TLS handshake) is done with the lock released, so every `--workers` loop
    /// takes handshakes; its greeting is meanwhile `in_hand`, out of the table.
    fn greet<'a>(
        &'a self,
        mut state: MutexGuard<'a, MuxState>,
        slot: usize,
    ) -> (MutexGuard<'a, MuxState>, Option<io::Result<Accepted>>) {
        let Some(greeting) = state.greetings.get_mut(slot).and_then(|g| g.as_mut()) else {
            return (state, None);
        };
        let mut failed = None;
        if greeting.header {
            match read_header(greeting.fd.as_fd()) {
                None => return (state, None),
                Some(Ok(header)) => {
                    let origin = header.addresses.unwrap_or(greeting.real.clone());
                    greeting.peer = origin.source().unwrap_or(greeting.peer.clone());
                    greeting.real = origin;
                    greeting.header = false;
                    // The address the header carried is the client's: checked now, before
                    // the TLS handshake.
                    if let Err(reason) = self.greet.access.check(client_ip(&greeting.real)) {
                        let greeting = self.forget(&mut state, slot).expect("in the table");
                        let peer = greeting.peer.clone();
                        crate::sys::socket::abort_socket(greeting.fd);
                        let refused = Rejected {
                            peer,
                            reason,
                            refused: true,
                        };
                        let error = io::Error::new(io::ErrorKind::InvalidData, refused);
                        return (state, Some(Err(error)));
                    }
                }
                Some(Err(reason)) => failed = Some(reason),
            }
        }
        if failed.is_none() && greeting.shake.is_some() {
            let mut greeting = state.greetings[slot].take().expect("checked");
            state.in_hand.insert(slot);
            let shake = greeting.shake.as_mut().expect("checked");
            let advanced = loop {
                drop(state);
                // The ClientHello may have come with the header: no edge will announce it.
                let advanced = shake.advance(greeting.fd.as_fd());
                state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                // An edge that came while it was in hand: the socket may have more now.
                if !(advanced == Ok(false) && state.missed.remove(&slot)) {
                    break advanced;
                }
            };
            state.in_hand.remove(&slot);
            state.missed.remove(&slot);
            state.greetings[slot] = Some(greeting);
            self.arm(&state); // a deadline the timer may have passed over meanwhile
            match advanced {
                Ok(false) => return (state, None),
                Ok(true) => {}
                Err(reason) => failed = Some(reason),
            }
        }
        let result = self.finish_greeting(&mut state, slot, failed);
        (state, result)
    }

    /// A greeting is over (`failed`, or its header read and handshake done): out of the
    /// table, and the connection or its rejection for the caller.
    fn finish_greeting(
        &self,
        state: &mut MuxState,
        slot: usize,
        failed: Option<String>,
    ) -> Option<io::Result<Accepted>> {
        let greeting = self.forget(state, slot)?;
        let reject = |peer: String, reason: String| {
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                Rejected {
                    peer,
                    reason,
                    refused: false,
                },
            ))
        };
        if let Some(reason) = failed {
            return Some(reject(greeting.peer, reason));
        }
        let (fd, tls) = match greeting.shake {
            Some(shake) => match shake.establish(greeting.fd, self.greet.tls_in_loop) {
                Ok((fd, session)) => (fd, Some(Box::new(session))),
                Err(reason) => return Some(reject(greeting.peer, reason)),
            },
            None => (greeting.fd, None),
        };
        Some(Ok(Accepted {
            fd,
            peer: greeting.peer,
            origin: greeting.real,
            tls,
        }))
    }

    /// Takes a greeting out of the epoll and the table.
    fn forget(&self, state: &mut MuxState, slot: usize) -> Option<Greeting> {
        let greeting = state.greetings.get_mut(slot)?.take()?;
        let _ = self.epoll.delete(&greeting.fd);
        state.free.push(slot);
        state.waiting -= 1;
        self.arm(state);
        Some(greeting)
    }

    /// The timer fired: every greeting past its deadline is closed and reported.
    fn expire(&self, state: &mut MuxState) {
        if let Some(timer) = &self.timer {
            let _ = timer.wait(); // non-blocking: clears the expiry
        }
        let now = Instant::now();
        let late: Vec<usize> = state
            .greetings
            .iter()
            .enumerate()
            .filter_map(|(i, g)| g.as_ref().filter(|g| g.due <= now).map(|_| i))
            .collect();
        for slot in late {
            if let Some(greeting) = self.forget(state, slot) {
                let reason = if greeting.header {
                    format!(
                        "no PROXY header within {:.3} s",
                        self.greet.deadline.as_secs_f64()
                    )
                } else {
                    super::tls::stalled(self.greet.deadline)
                };
                state.expired.push_back(Rejected {
                    refused: false,
                    peer: greeting.peer,
                    reason,
                });
            }
        }
        self.arm(state);
    }

    /// Sets the timer to the earliest deadline (or off).
    fn arm(&self, state: &MuxState) {
        let Some(timer) = &self.timer else { return };
        let next = state.greetings.iter().flatten().map(|g| g.due).min();
        match next {
            Some(due) => {
                let wait = due
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_micros(1));
                let _ = timer.set(
                    Expiration::OneShot(TimeSpec::from_duration(wait)),
                    TimerSetTimeFlags::empty(),
                );
            }
            None => {
                let _ = timer.unset();
            }
        }
    }
}

/// The client's address as `allow=`/`deny=` see it (a PROXY header's, once read).
fn client_ip(origin: &Addresses) -> Option<std::net::IpAddr> {
    match origin {
        Addresses::Inet { src, .. } => Some(src.ip()),
        _ => None,
    }
}

/// A connection just accepted, checked against `access`: a refused client is reset at
/// once (nothing of it read) and comes back as a [`Rejected`] that says so.
fn admit(access: &Access, accepted: Accepted) -> io::Result<Accepted> {
    if !access.any() {
        return Ok(accepted);
    }
    match access.check(client_ip(&accepted.origin)) {
        Ok(()) => Ok(accepted),
        Err(reason) => {
            crate::sys::socket::abort_socket(accepted.fd);
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                Rejected {
                    peer: accepted.peer,
                    reason,
                    refused: true,
                },
            ))
        }
    }
}

fn is_out_of_fds(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// The fd kept for [`accept_and_close`]: /dev/null, opened CLOEXEC.
fn reserve_fd() -> Option<OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(OwnedFd::from)
}

/// Out of fds with no greeting to shed: the reserve fd is closed, one client accepted and
/// closed at once (it sees its connection end, rather than hang in a backlog nobody can
/// read), and the reserve taken again. None when there is no reserve or no client.
fn accept_and_close(state: &mut MuxState, socket: &Socket, e: &io::Error) -> Option<Rejected> {
    drop(state.reserve.take()?);
    let accepted = accept_on(socket, SockFlag::SOCK_CLOEXEC);
    state.reserve = reserve_fd();
    let accepted = accepted.ok()?;
    Some(Rejected {
        refused: false,
        peer: accepted.peer,
        reason: format!("closed at once: {e}"),
    })
}

/// A PROXY header from a connection's socket: None while it is partial (it is peeked until
/// complete, then exactly its bytes are taken: the payload stays), else the header or why
/// it is wrong.
fn read_header(fd: BorrowedFd<'_>) -> Option<Result<proxy::Header, String>> {
    let mut buf = [0u8; proxy::MAX_HEADER];
    let header = match socket::recv(
        fd.as_raw_fd(),
        &mut buf,
        MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(0) => return Some(Err("closed before sending its PROXY header".to_string())),
        Ok(n) => match proxy::parse(&buf[..n]) {
            Ok(None) => return None,
            Ok(Some(header)) => header,
            Err(e) => return Some(Err(format!("bad PROXY header: {e}"))),
        },
        Err(Errno::EAGAIN | Errno::EINTR) => return None,
        Err(e) => {
            return Some(Err(format!(
                "reading its PROXY header: {}",
                io::Error::from(e)
            )))
        }
    };
    let mut taken = 0;
    while taken < header.len {
        match socket::recv(
            fd.as_raw_fd(),
            &mut buf[taken..header.len],
            MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(0) => return Some(Err("closed inside its PROXY header".to_string())),
            Ok(n) => taken += n,
            Err(Errno::EINTR) => {}
            Err(e) => return Some(Err(format!("reading its PROXY header: {e}"))),
        }
    }
    Some(Ok(header))
}

/// `127.0.0.1:80`, `[::1]:80`, a socket path, `@name`; None for an unnamed unix peer.
pub(super) fn format_sockaddr(addr: &SockaddrStorage) -> Option<String> {
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(format_v4(&std::net::SocketAddrV4::from(*v4)));
    }
    if let Some(v6) = addr.as_sockaddr_in6() {
        return Some(std::net::SocketAddrV6::from(*v6).to_string());
    }
    let unix = addr.as_unix_addr()?;
    if let Some(path) = unix.path() {
        return Some(path.display().to_string());
    }
    unix.as_abstract()
        .map(|name| format!("@{}", String::from_utf8_lossy(name)))
}

/// `a.b.c.d:port`, as `SocketAddrV4`'s Display writes it, without the formatting machinery:
/// every accepted connection's peer is written so, and `to_string` cost it ~1,600
/// instructions (bench/NOTEBOOK.md, `relay: what a short connection paid for`).
fn format_v4(addr: &std::net::SocketAddrV4) -> String {
    /// Writes `n`'s decimal digits at the end of `out[..at]`; where they start.
    fn decimal(out: &mut [u8], mut at: usize, mut n: u32) -> usize {
        loop {
            at -= 1;
            out[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                return at;
            }
        }
    }
    // Written backwards from the end: the port, ':', then each octet from the last.
    let mut out = [0u8; "255.255.255.255:65535".len()];
    let end = out.len();
    let mut at = decimal(&mut out, end, u32::from(addr.port()));
    at -= 1;
    out[at] = b':';
    for (i, octet) in addr.ip().octets().into_iter().rev().enumerate() {
        if i > 0 {
            at -= 1;
            out[at] = b'.';
        }
        at = decimal(&mut out, at, u32::from(octet));
    }
    std::str::from_utf8(&out[at..])
        .expect("ASCII digits")
        .to_string()
}

/// Whether `fd` is a listening socket (SO_ACCEPTCONN); an error when it is not open or
/// not a socket at all.
pub(super) fn is_listening(fd: RawFd) -> Result<bool, Errno> {
    // SAFETY: only queried; a closed fd answers EBADF.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    socket::getsockopt(&borrowed, sockopt::AcceptConn)
}

#[cfg(test)]
mod tests {
    use super::format_v4;
    use std::net::{Ipv4Addr, SocketAddrV4};

    #[test]
    fn format_v4_writes_what_display_writes() {
        for (ip, port) in [
            ([127, 0, 0, 1], 54321),
            ([0, 0, 0, 0], 0),
            ([255, 255, 255, 255], 65535),
            ([10, 9, 100, 1], 80),
            ([192, 168, 0, 10], 1),
        ] {
            let addr = SocketAddrV4::new(Ipv4Addr::from(ip), port);
            assert_eq!(format_v4(&addr), addr.to_string());
        }
    }
}
