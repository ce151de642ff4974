//! The event loop: accept, connect, relay every connection, time out, shut down.

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::sys::socket::{self, sockopt, SockFlag, SockType, SockaddrLike, SockaddrStorage};

use super::flow::{Blame, Flow, Port, Turn};
use super::policy::{Choice, Policy, FIRST_TRIAL};
use super::poller::{Poller, Ready};
use super::pool::{Pools, PIPE_BUDGET};
use super::{ConnEnd, ConnReport, FlowReport, RelayConfig, Tally, GRACE};
use crate::endpoint::{is_retryable_connect, ConnectOpts, Endpoint, Listener};
use crate::options::Options;
use crate::sys::socket::{abort_socket, set_nonblocking};
use crate::units::human_bytes;

const LISTENER: u64 = u64::MAX;
const ACCEPT_RESUME: u64 = u64::MAX - 1;
const GRACE_OVER: u64 = u64::MAX - 2;
/// Timer kinds of a connection (low bits of its timer token).
const IDLE: u64 = 0;
const CONNECT_TIMEOUT: u64 = 1; // + side
const RETRY: u64 = 3; // + side
/// When socket() itself fails for lack of fds, try again this soon (not an attempt).
const FD_WAIT: Duration = Duration::from_millis(50);
const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(20);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What one side of the relay is, once set up.
pub(super) enum Spec {
    Listen(Listener),
    Dial {
        uri: String,
        addrs: Vec<SockaddrStorage>,
        opts: ConnectOpts,
    },
    /// `-` (stdin and stdout) or `fd:N`: one session only.
    Inherited(Endpoint),
}

/// A connection attempt in progress (or waiting for its next try).
struct Dial {
    addr: usize,
    attempt: u32,
    /// Connect timeout of the attempt in flight.
    deadline: Option<Instant>,
    waiting: bool,
}

struct Peer {
    /// The socket, or the read side of an inherited pair.
    fd: Option<OwnedFd>,
    /// The write side when it is a different fd (stdout for `-`).
    wfd: Option<OwnedFd>,
    readable: bool,
    writable: bool,
    socket: bool,
    polled: Vec<RawFd>,
    dial: Option<Dial>,
    /// File status flags to put back on inherited fds (O_NONBLOCK is shared with the
    /// process that gave them to us).
    restore: Vec<(RawFd, OFlag)>,
}

impl Peer {
    fn empty() -> Peer {
        Peer {
            fd: None,
            wfd: None,
            readable: false,
            writable: false,
            socket: true,
            polled: Vec::new(),
            dial: None,
            restore: Vec::new(),
        }
    }

    fn open(&self) -> bool {
        self.fd.is_some() && self.dial.is_none()
    }

    fn read_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_ref().expect("an open peer").as_fd()
    }

    fn write_fd(&self) -> BorrowedFd<'_> {
        self.wfd
            .as_ref()
            .or(self.fd.as_ref())
            .expect("an open peer")
            .as_fd()
    }
}

struct Conn {
    id: u64,
    peer: String,
    sides: [Peer; 2],
    /// flows[0]: A -> B, flows[1]: B -> A.
    flows: [Flow; 2],
    started: Instant,
    last_active: Instant,
    busy: bool,
    /// In `Server::starved`.
    starved: bool,
}

pub(super) struct Server<'a> {
    opts: &'a Options,
    cfg: &'a RelayConfig,
    specs: [Spec; 2],
    policy: Policy,
    poller: Poller,
    pools: Pools,
    conns: Vec<Option<Conn>>,
    gens: Vec<u32>,
    free: Vec<usize>,
    active: usize,
    busy: VecDeque<u64>,
    /// Connections with a direction waiting for a buffer (pool::BUFFER_BUDGET).
    starved: VecDeque<u64>,
    next_id: u64,
    accepting: bool,
    listener_polled: bool,
    /// epoll said the listener has connections waiting (level-triggered: it says so again
    /// at the next wait while any are left).
    listener_ready: bool,
    accept_backoff: Duration,
    accept_paused_until: Option<Instant>,
    grace_until: Option<Instant>,
    pub(super) tally: Tally,
}

fn slot_token(gen: u32, idx: usize, low: u64) -> u64 {
    (u64::from(gen) << 32) | ((idx as u64) << 3) | low
}

fn split_token(token: u64) -> (u32, usize, u64) {
    (
        (token >> 32) as u32,
        ((token & 0xffff_ffff) >> 3) as usize,
        token & 7,
    )
}

impl<'a> Server<'a> {
    pub(super) fn new(
        opts: &'a Options,
        cfg: &'a RelayConfig,
        specs: [Spec; 2],
        policy: Policy,
    ) -> anyhow::Result<Server<'a>> {
        Ok(Server {
            opts,
            cfg,
            specs,
            policy,
            poller: Poller::new()?,
            pools: Pools::new(PIPE_BUDGET, cfg.grow_pipes),
            conns: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
            active: 0,
            busy: VecDeque::new(),
            starved: VecDeque::new(),
            next_id: 1,
            accepting: false,
            listener_polled: false,
            listener_ready: false,
            accept_backoff: ACCEPT_BACKOFF_FIRST,
            accept_paused_until: None,
            grace_until: None,
            tally: Tally::default(),
        })
    }

    fn listener(&self) -> Option<(usize, &Listener)> {
        self.specs.iter().enumerate().find_map(|(i, s)| match s {
            Spec::Listen(l) => Some((i, l)),
            _ => None,
        })
    }

    /// Runs until every connection ended (and, with a listener, until a signal or
    /// `--once`). Returns true when a signal stopped it.
    pub(super) fn run(&mut self) -> anyhow::Result<bool> {
        if let Some((_, listener)) = self.listener() {
            set_nonblocking(listener.as_fd().as_raw_fd())?;
            self.accepting = true;
            self.poll_listener(true);
        } else {
            self.start_conn(None);
        }
        let mut ready = Vec::new();
        loop {
            if crate::sys::process::interrupted() && self.grace_until.is_none() {
                self.begin_grace();
            }
            if self.active == 0 && !self.accepting {
                return Ok(self.grace_until.is_some());
            }
            self.poller.wait(!self.busy.is_empty(), &mut ready)?;
            for event in ready.drain(..) {
                self.on_event(event);
            }
            self.run_timers();
            for _ in 0..self.busy.len() {
                let Some(token) = self.busy.pop_front() else {
                    break;
                };
                let (gen, idx, _) = split_token(token);
                if self.gens.get(idx) == Some(&gen) {
                    if let Some(conn) = self.conns[idx].as_mut() {
                        conn.busy = false;
                    }
                    self.pump(idx);
                }
            }
            // A buffer came back: the connections waiting for one take their turn (those
            // that still find none wait again, so this never spins).
            if !self.starved.is_empty() && self.pools.buffer_free() {
                for token in std::mem::take(&mut self.starved) {
                    let (gen, idx, _) = split_token(token);
                    if self.gens.get(idx) != Some(&gen) {
                        continue;
                    }
                    if let Some(conn) = self.conns[idx].as_mut() {
                        conn.starved = false;
                        if !conn.busy {
                            conn.busy = true;
                            self.busy.push_back(token);
                        }
                    }
                }
            }
            // Only when epoll said so: not one accept4 per turn of the loop.
            if std::mem::take(&mut self.listener_ready) && self.accepting && self.listener_polled {
                self.accept_all();
            }
        }
    }

    fn poll_listener(&mut self, on: bool) {
        let Some((_, listener)) = self.listener() else {
            return;
        };
        let fd = listener.as_fd().as_raw_fd();
        if on && !self.listener_polled {
            if self.poller.add_listener(fd, LISTENER).is_ok() {
                self.listener_polled = true;
            }
        } else if !on && self.listener_polled {
            self.poller.delete(fd);
            self.listener_polled = false;
        }
    }

    fn stop_accepting(&mut self) {
        self.poll_listener(false);
        self.accepting = false;
        // Dropping the listener closes it (and removes a unix socket file).
        for spec in &mut self.specs {
            if matches!(spec, Spec::Listen(_)) {
                *spec = Spec::Inherited(Endpoint::Stdio);
            }
        }
    }

    fn begin_grace(&mut self) {
        let until = Instant::now() + GRACE;
        self.grace_until = Some(until);
        if self.accepting {
            self.stop_accepting();
        }
        if self.active > 0 {
            self.opts.print_plan(&format!(
                "interrupted: no new connections; {} in flight get {} s to finish",
                self.active,
                GRACE.as_secs()
            ));
        }
        self.poller.timer(until, GRACE_OVER);
    }

    fn on_event(&mut self, event: Ready) {
        if event.token == LISTENER {
            self.listener_ready = true; // accept_all runs after the events
            return;
        }
        let (gen, idx, slot) = split_token(event.token);
        if self.gens.get(idx) != Some(&gen) {
            return;
        }
        let Some(conn) = self.conns[idx].as_mut() else {
            return;
        };
        let side = (slot >> 1) as usize;
        let peer = &mut conn.sides[side];
        if slot & 1 == 0 {
            peer.readable |= event.readable;
            if peer.wfd.is_none() {
                peer.writable |= event.writable;
            }
        } else {
            peer.writable |= event.writable;
        }
        if peer.dial.as_ref().is_some_and(|d| !d.waiting) && event.writable {
            self.dialed(idx, side);
        } else {
            self.pump(idx);
        }
    }

    fn run_timers(&mut self) {
        let now = Instant::now();
        while let Some(token) = self.poller.due(now) {
            match token {
                ACCEPT_RESUME => {
                    self.accept_paused_until = None;
                    if self.accepting && !self.at_capacity() {
                        self.poll_listener(true);
                    }
                }
                GRACE_OVER => {
                    for idx in 0..self.conns.len() {
                        if self.conns[idx].is_some() {
                            self.finish(idx, ConnEnd::Signal);
                        }
                    }
                }
                _ => self.conn_timer(token, now),
            }
        }
    }

    fn conn_timer(&mut self, token: u64, now: Instant) {
        let (gen, idx, kind) = split_token(token);
        if self.gens.get(idx) != Some(&gen) {
            return;
        }
        let Some(conn) = self.conns[idx].as_mut() else {
            return;
        };
        match kind {
            IDLE => {
                let Some(idle) = self.cfg.idle_timeout else {
                    return;
                };
                let due = conn.last_active + idle;
                if due <= now {
                    self.finish(idx, ConnEnd::IdleTimeout);
                } else {
                    self.poller.timer(due, token);
                }
            }
            k if (CONNECT_TIMEOUT..CONNECT_TIMEOUT + 2).contains(&k) => {
                let side = (k - CONNECT_TIMEOUT) as usize;
                let expired = conn.sides[side]
                    .dial
                    .as_ref()
                    .and_then(|d| d.deadline)
                    .is_some_and(|d| d <= now && conn.sides[side].fd.is_some());
                if expired {
                    self.dial_failed(idx, side, Errno::ETIMEDOUT);
                }
            }
            k if (RETRY..RETRY + 2).contains(&k) => {
                let side = (k - RETRY) as usize;
                if conn.sides[side].dial.as_ref().is_some_and(|d| d.waiting) {
                    self.dial(idx, side);
                }
            }
            _ => {}
        }
    }

    fn at_capacity(&self) -> bool {
        self.cfg.max_conns.is_some_and(|max| self.active >= max)
    }

    fn accept_all(&mut self) {
        loop {
            if !self.accepting || self.accept_paused_until.is_some() {
                return;
            }
            if self.at_capacity() {
                // Beyond --max-conns, clients wait in the backlog.
                self.poll_listener(false);
                return;
            }
            let Some((_, listener)) = self.listener() else {
                return;
            };
            match listener.accept() {
                Ok((fd, peer)) => {
                    self.accept_backoff = ACCEPT_BACKOFF_FIRST;
                    if set_nonblocking(fd.as_raw_fd()).is_err() {
                        continue;
                    }
                    self.start_conn(Some((fd, peer)));
                    if self.cfg.once {
                        self.stop_accepting();
                        return;
                    }
                }
                Err(e) => match e.raw_os_error().map(Errno::from_raw) {
                    Some(Errno::EAGAIN) => return,
                    Some(Errno::EMFILE | Errno::ENFILE | Errno::ENOBUFS | Errno::ENOMEM) => {
                        // Out of fds: the client stays in the backlog. Stop asking until
                        // a connection ends or the backoff passes (HAZARDS §2: never spin).
                        eprintln!(
                            "zerocat: cannot accept on {}: {e}; {} connections open, \
                             retrying in {} ms or when one ends",
                            listener.local_addr(),
                            self.active,
                            self.accept_backoff.as_millis()
                        );
                        let until = Instant::now() + self.accept_backoff;
                        self.accept_paused_until = Some(until);
                        self.accept_backoff = (self.accept_backoff * 2).min(ACCEPT_BACKOFF_MAX);
                        self.poll_listener(false);
                        self.poller.timer(until, ACCEPT_RESUME);
                        return;
                    }
                    // accept(2): errors of the pending connection; treat like EAGAIN, retry.
                    _ => continue,
                },
            }
        }
    }

    /// A new connection: one accepted socket (with a listener), or none (two
    /// connectors, or stdio and a connector).
    fn start_conn(&mut self, accepted: Option<(OwnedFd, String)>) {
        let idx = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.gens.push(0);
            self.conns.len() - 1
        });
        let now = Instant::now();
        let mut conn = Conn {
            id: self.next_id,
            peer: String::new(),
            sides: [Peer::empty(), Peer::empty()],
            flows: [0, 1].map(|_| {
                let first_trial = self.cfg.first_trial.unwrap_or(FIRST_TRIAL);
                Flow::new(Choice::new(
                    self.policy,
                    !self.cfg.splice_first,
                    first_trial,
                ))
            }),
            started: now,
            last_active: now,
            busy: false,
            starved: false,
        };
        self.next_id += 1;
        self.active += 1;
        let mut accepted = accepted;
        let mut failure = None;
        for side in 0..2 {
            match &self.specs[side] {
                Spec::Listen(_) => {
                    let (fd, peer) = accepted.take().expect("an accepted connection");
                    conn.peer = peer;
                    conn.sides[side].fd = Some(fd);
                }
                Spec::Inherited(endpoint) => {
                    if let Err(e) = inherit(endpoint, &mut conn.sides[side]) {
                        failure = Some(format!("{e:#}"));
                    }
                }
                Spec::Dial { .. } => {
                    conn.sides[side].dial = Some(Dial {
                        addr: 0,
                        attempt: 0,
                        deadline: None,
                        waiting: true,
                    });
                }
            }
        }
        if conn.peer.is_empty() {
            conn.peer = self.specs_peer_name();
        }
        self.conns[idx] = Some(conn);
        if let Some(message) = failure {
            self.finish(idx, ConnEnd::Error(message));
            return;
        }
        let gen = self.gens[idx];
        for side in 0..2 {
            if self.conn_mut(idx).sides[side].fd.is_some() {
                self.register(idx, side);
            } else {
                self.dial(idx, side);
            }
            if self.conns[idx].is_none() {
                return;
            }
        }
        if let Some(idle) = self.cfg.idle_timeout {
            self.poller.timer(now + idle, slot_token(gen, idx, IDLE));
        }
        self.pump(idx);
    }

    fn specs_peer_name(&self) -> String {
        match &self.specs[0] {
            Spec::Dial { uri, .. } => uri.clone(),
            Spec::Inherited(e) => e.to_string(),
            Spec::Listen(l) => l.local_addr().to_string(),
        }
    }

    fn conn_mut(&mut self, idx: usize) -> &mut Conn {
        self.conns[idx].as_mut().expect("a live connection")
    }

    /// Puts a side's fds into epoll. An fd epoll refuses (a regular file, /dev/null) is
    /// always ready.
    fn register(&mut self, idx: usize, side: usize) {
        let gen = self.gens[idx];
        let conn = self.conns[idx].as_mut().expect("a live connection");
        let peer = &mut conn.sides[side];
        let read = peer.fd.as_ref().map(|f| f.as_raw_fd());
        let write = peer.wfd.as_ref().map(|f| f.as_raw_fd());
        for (slot, fd) in [(0u64, read), (1u64, write)] {
            let Some(fd) = fd else { continue };
            let token = slot_token(gen, idx, (side as u64) << 1 | slot);
            match self.poller.add(fd, token) {
                Ok(()) => peer.polled.push(fd),
                Err(_) => {
                    if slot == 0 {
                        peer.readable = true;
                        if write.is_none() {
                            peer.writable = true;
                        }
                    } else {
                        peer.writable = true;
                    }
                }
            }
        }
    }

    /// Starts (or restarts) a connection attempt to a Dial side.
    fn dial(&mut self, idx: usize, side: usize) {
        let Spec::Dial { addrs, .. } = &self.specs[side] else {
            return;
        };
        let gen = self.gens[idx];
        let conn = self.conns[idx].as_mut().expect("a live connection");
        let dial = conn.sides[side].dial.as_mut().expect("dialing");
        let addr = &addrs[dial.addr.min(addrs.len() - 1)];
        dial.waiting = false;
        let family = addr.family().unwrap_or(socket::AddressFamily::Unix);
        let fd = match socket::socket(
            family,
            SockType::Stream,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        ) {
            Ok(fd) => fd,
            Err(Errno::EMFILE | Errno::ENFILE | Errno::ENOBUFS | Errno::ENOMEM) => {
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
                conn.sides[side].dial = None;
                self.register(idx, side);
                self.pump(idx);
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
    fn dialed(&mut self, idx: usize, side: usize) {
        let conn = self.conn_mut(idx);
        let fd = conn.sides[side].read_fd();
        match socket::getsockopt(&fd, sockopt::SocketError) {
            Ok(0) => {
                conn.sides[side].dial = None;
                self.pump(idx);
            }
            Ok(err) => self.dial_failed(idx, side, Errno::from_raw(err)),
            Err(errno) => self.dial_failed(idx, side, errno),
        }
    }

    fn dial_failed(&mut self, idx: usize, side: usize, errno: Errno) {
        let Spec::Dial { uri, addrs, opts } = &self.specs[side] else {
            return;
        };
        let gen = self.gens[idx];
        let conn = self.conns[idx].as_mut().expect("a live connection");
        let peer = &mut conn.sides[side];
        if let Some(fd) = peer.fd.take() {
            for polled in peer.polled.drain(..) {
                self.poller.delete(polled);
            }
            drop(fd);
        }
        peer.readable = false;
        peer.writable = false;
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
        let message = format!("cannot connect to {uri}: {}", std::io::Error::from(errno));
        self.finish(idx, ConnEnd::ConnectFailed(message));
    }

    /// Moves bytes both ways on a connection whose sides are both open.
    fn pump(&mut self, idx: usize) {
        let gen = self.gens[idx];
        let Some(conn) = self.conns[idx].as_mut() else {
            return;
        };
        if !(conn.sides[0].open() && conn.sides[1].open()) {
            return;
        }
        let mut moved = 0u64;
        let mut done = 0;
        let mut busy = false;
        let mut starved = false;
        for d in 0..2 {
            let [s0, s1] = &mut conn.sides;
            let (src, dst) = if d == 0 { (s0, s1) } else { (s1, s0) };
            let src_fd = src.fd.as_ref().expect("open").as_fd();
            let dst_fd = dst.wfd.as_ref().or(dst.fd.as_ref()).expect("open").as_fd();
            let result = conn.flows[d].pump(
                Port {
                    fd: src_fd,
                    ready: &mut src.readable,
                    socket: src.socket,
                },
                Port {
                    fd: dst_fd,
                    ready: &mut dst.writable,
                    socket: dst.socket,
                },
                &mut self.pools,
                &mut moved,
            );
            match result {
                Ok(Turn::Done) => done += 1,
                Ok(Turn::Busy) => busy = true,
                Ok(Turn::Idle) => {}
                Ok(Turn::Starved) => starved = true,
                Err(e) => {
                    let name = |s: usize| if s == 0 { "A" } else { "B" };
                    let err = std::io::Error::from(e.errno);
                    let message = match e.blame {
                        Blame::Source => {
                            format!("reading {} ({}): {err}", name(d), self.side_uri(d))
                        }
                        Blame::Sink => {
                            let s = 1 - d;
                            format!("writing {} ({}): {err}", name(s), self.side_uri(s))
                        }
                        Blame::Relay if e.errno == Errno::ENOBUFS => format!(
                            "no pipe for {} -> {}: the relay's pipe budget ({} in all) is spent",
                            name(d),
                            name(1 - d),
                            human_bytes(self.pools.pipe_budget() as u64)
                        ),
                        Blame::Relay => {
                            format!("no pipe for {} -> {}: {err}", name(d), name(1 - d))
                        }
                    };
                    let end = if matches!(e.errno, Errno::ECONNRESET | Errno::EPIPE) {
                        ConnEnd::Reset(message)
                    } else {
                        ConnEnd::Error(message)
                    };
                    self.finish(idx, end);
                    return;
                }
            }
        }
        if moved > 0 {
            conn.last_active = Instant::now();
        }
        if done == 2 {
            self.finish(idx, ConnEnd::Eof);
        } else if busy && !conn.busy {
            conn.busy = true;
            self.busy.push_back(slot_token(gen, idx, 0));
        } else if starved && !conn.busy && !conn.starved {
            conn.starved = true;
            self.starved.push_back(slot_token(gen, idx, 0));
        }
    }

    fn side_uri(&self, side: usize) -> String {
        let endpoint = if side == 0 { &self.cfg.a } else { &self.cfg.b };
        endpoint.to_string()
    }

    /// Ends a connection: a clean end closes both sides (FIN was sent by the half-close);
    /// any other end delivers what it can without waiting, then resets sockets
    /// (SO_LINGER 0), so a peer never takes an abort for a clean end.
    fn finish(&mut self, idx: usize, end: ConnEnd) {
        let Some(mut conn) = self.conns[idx].take() else {
            return;
        };
        let abort = !matches!(end, ConnEnd::Eof);
        let undelivered = [0, 1].map(|d| {
            let dst = &conn.sides[1 - d];
            let left = if dst.open() {
                conn.flows[d].flush_now(dst.write_fd(), &mut self.pools)
            } else {
                conn.flows[d].held()
            };
            // Drained as far as the sink took it; the rest is lost (and said so): the
            // pipe is pooled only if empty, and its capacity returns to the budget.
            conn.flows[d].close(&mut self.pools);
            left as u64
        });
        for peer in &mut conn.sides {
            for fd in peer.polled.drain(..) {
                self.poller.delete(fd);
            }
            for (fd, flags) in peer.restore.drain(..) {
                let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
            }
            shared_flags::forget();
            let socket = peer.socket;
            if let Some(fd) = peer.fd.take() {
                if abort && socket {
                    abort_socket(fd);
                }
            }
            peer.wfd.take();
        }
        let report = ConnReport {
            id: conn.id,
            peer: conn.peer.clone(),
            seconds: conn.started.elapsed().as_secs_f64(),
            flows: [0, 1].map(|d| FlowReport {
                record: conn.flows[d].record.clone(),
                bytes: conn.flows[d].delivered,
                switches: conn.flows[d].switches(),
                ended: if conn.flows[d].shut {
                    ConnEnd::Eof
                } else {
                    end.clone()
                },
                undelivered: undelivered[d],
            }),
            end,
        };
        if self.opts.verbose {
            eprintln!("zerocat: {}", report.line());
        }
        self.tally.add(report);
        self.gens[idx] = self.gens[idx].wrapping_add(1);
        self.free.push(idx);
        self.active -= 1;
        if self.accepting && self.accept_paused_until.is_none() && !self.at_capacity() {
            self.poll_listener(true);
        }
        if self.accepting && self.accept_paused_until.is_some() {
            // An fd just came free: try again now rather than at the end of the backoff.
            self.accept_paused_until = None;
            self.poll_listener(true);
        }
    }
}

/// Opens `-` (stdin + stdout) or `fd:N` as one side: duplicated, non-blocking (the old
/// flags are put back at the end: O_NONBLOCK is shared with whoever gave us the fd).
fn inherit(endpoint: &Endpoint, peer: &mut Peer) -> anyhow::Result<()> {
    let (read, write) = match endpoint {
        Endpoint::Stdio => (0, Some(1)),
        Endpoint::Fd(n) => (*n, None),
        other => anyhow::bail!("relay cannot use {other} as a side"),
    };
    let dup = |fd: RawFd| -> anyhow::Result<OwnedFd> {
        let new = fcntl(fd, FcntlArg::F_DUPFD_CLOEXEC(3))
            .map_err(|e| anyhow::anyhow!("cannot use fd {fd}: {e}"))?;
        // SAFETY: fcntl just returned this descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(new) })
    };
    let rfd = dup(read)?;
    let flags = set_nonblocking(rfd.as_raw_fd())?;
    shared_flags::remember(read, flags);
    peer.restore.push((rfd.as_raw_fd(), flags));
    peer.socket = crate::sys::fdkind::FdInfo::of(rfd.as_fd())
        .map(|i| i.kind == crate::sys::fdkind::FdKind::Socket)
        .unwrap_or(false);
    if let Some(w) = write {
        let wfd = dup(w)?;
        let flags = set_nonblocking(wfd.as_raw_fd())?;
        shared_flags::remember(w, flags);
        peer.restore.push((wfd.as_raw_fd(), flags));
        peer.wfd = Some(wfd);
        // stdout is only written: never half-close a socket we only hold one way.
        peer.socket = false;
    }
    peer.fd = Some(rfd);
    Ok(())
}

/// The file status flags of inherited fds, put back on every way out: the normal end of the
/// connection ([`Server::finish`]), a panic (a hook), and a signal whose default action kills
/// (SIGHUP, SIGQUIT: a handler puts the flags back, then dies of the signal as before).
/// O_NONBLOCK lives on the file description, which the shell that gave us stdin/stdout still
/// uses: left set, its next read fails with EAGAIN. SIGINT/SIGTERM end through `finish`.
mod shared_flags {
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::Once;

    use nix::libc;

    /// (fd, flags) pairs; fd -1 is a free slot. Atomics: a signal handler reads them.
    static SAVED: [(AtomicI32, AtomicI32); 2] = [
        (AtomicI32::new(-1), AtomicI32::new(0)),
        (AtomicI32::new(-1), AtomicI32::new(0)),
    ];

    pub(super) fn remember(fd: i32, flags: nix::fcntl::OFlag) {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(install);
        for (slot_fd, slot_flags) in &SAVED {
            if slot_fd.load(Ordering::SeqCst) == -1 {
                slot_flags.store(flags.bits(), Ordering::SeqCst);
                slot_fd.store(fd, Ordering::SeqCst);
                return;
            }
        }
    }

    /// The flags are back (the connection ended): nothing left to restore.
    pub(super) fn forget() {
        for (slot_fd, _) in &SAVED {
            slot_fd.store(-1, Ordering::SeqCst);
        }
    }

    /// Async-signal-safe: atomics and fcntl only.
    fn restore() {
        for (slot_fd, slot_flags) in &SAVED {
            let fd = slot_fd.load(Ordering::SeqCst);
            if fd >= 0 {
                // SAFETY: F_SETFL on an fd number; at worst EBADF.
                unsafe { libc::fcntl(fd, libc::F_SETFL, slot_flags.load(Ordering::SeqCst)) };
            }
        }
    }

    extern "C" fn on_fatal_signal(signal: libc::c_int) {
        restore();
        // SA_RESETHAND put the default action back; the signal is blocked while this runs,
        // so it kills us as soon as the handler returns.
        // SAFETY: raise is async-signal-safe.
        unsafe { libc::raise(signal) };
    }

    fn install() {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        for signal in [libc::SIGHUP, libc::SIGQUIT] {
            // SAFETY: a zeroed sigaction with a handler that is async-signal-safe.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_fatal_signal as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESETHAND;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, std::ptr::null(), &mut old);
                // An ignored signal stays ignored (nohup).
                if old.sa_sigaction != libc::SIG_IGN {
                    libc::sigaction(signal, &action, std::ptr::null_mut());
                }
            }
        }
    }
}
