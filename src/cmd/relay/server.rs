//! The event loop: accept ([`accept`]), connect ([`dial`]), relay every connection ([`conn`]), time out,
//! shut down.

mod accept;
mod conn;
mod dial;
mod dump;
mod inherit;
mod pick;

pub(super) use pick::run_checks;

use std::collections::VecDeque;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::socket::SockaddrStorage;

use super::end::{ConnEnd, Side};
use super::flow::Flow;
use super::log::ConnLog;
use super::policy::Policy;
use super::poller::{Poller, Ready};
use super::pool::{HeldPipe, Pools, PIPE_BUDGET};
use super::report::{FailedLines, Tally};
use super::{RelayConfig, Tuning};
use crate::endpoint::command::CommandSpec;
use crate::endpoint::outbound;
use crate::endpoint::peer_env::PeerEnv;
use crate::endpoint::proxy::Addresses;
use crate::endpoint::tls::{Handshake, Session};
use crate::endpoint::{Accepted, ConnectOpts, Endpoint, Listener};
use crate::engine::dump::Tap;
use crate::options::Options;
use crate::sys::process;
use crate::sys::socket::set_nonblocking;
use rustls::ClientConfig;
use std::sync::Arc;

const LISTENER: u64 = u64::MAX;
const ACCEPT_RESUME: u64 = u64::MAX - 1;
const GRACE_OVER: u64 = u64::MAX - 2;
/// Look again for children of ended connections that have exited ([`REAP_EVERY`]).
const REAP: u64 = u64::MAX - 3;
/// `--progress`: the running totals' next line ([`PROGRESS_EVERY`]).
const PROGRESS: u64 = u64::MAX - 4;
/// `--exit-idle`: the idle stretch may be over.
const EXIT_IDLE: u64 = u64::MAX - 5;
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// How often children of ended connections are looked at until they exit: the report of
/// their connection waits for them.
const REAP_EVERY: Duration = Duration::from_millis(10);
/// Timer kinds of a connection (low bits of its timer token).
const IDLE: u64 = 0;
const CONNECT_TIMEOUT: u64 = 1; // + side
const RETRY: u64 = 3; // + side
/// A paced direction's tokens are back (`--limit`, `--limit-total`).
const PACE: u64 = 5; // + direction
/// `--linger`'s timer: one direction ended that long ago.
const LINGER: u64 = 7;
/// When socket() itself fails for lack of fds, try again this soon (not an attempt).
const FD_WAIT: Duration = Duration::from_millis(50);
const ACCEPT_BACKOFF_FIRST: Duration = Duration::from_millis(20);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What one side of the relay is, once set up.
pub(super) enum Spec {
    Listen(Listener),
    Dial {
        uri: String,
        /// The target, or with `socks5=`/`connect=` the proxy.
        addrs: Vec<SockaddrStorage>,
        opts: ConnectOpts,
        /// `tcp:HOST:PORT`'s host and port: what a proxy is asked for.
        target: Option<(String, u16)>,
        /// `tls:`: the client configuration (made once) and the name to verify.
        tls: Option<(Arc<ClientConfig>, String)>,
    },
    /// `-` (stdin and stdout) or `fd:N`: one session only.
    Inherited(Endpoint),
    /// `exec:`/`sh:`: a child per connection, its stdout read and its stdin written;
    /// `own_group` (a listener's children): each in a process group of its own.
    Command {
        uri: String,
        spec: CommandSpec,
        own_group: bool,
    },
}

/// A connection attempt in progress (or waiting for its next try).
struct Dial {
    addr: usize,
    attempt: u32,
    /// Connect timeout of the attempt in flight.
    deadline: Option<Instant>,
    waiting: bool,
    /// `socks5=`/`connect=`: connected to the proxy, its handshake under way. Boxed, as
    /// `tls` and [`Peer::tls`]: a plain connection's [`Conn`] stays small, and every move
    /// of it (made, ended) cheap.
    handshake: Option<Box<outbound::Handshake>>,
    /// `tls:`: connected (through the proxy, if any), the TLS handshake under way.
    tls: Option<Box<Handshake>>,
}

impl Dial {
    /// A first attempt, to be started.
    fn new() -> Dial {
        Dial {
            addr: 0,
            attempt: 0,
            deadline: None,
            waiting: true,
            handshake: None,
            tls: None,
        }
    }
}

struct Peer {
    /// The socket, or the read side of an inherited pair.
    fd: Option<OwnedFd>,
    /// The write side when it is a different fd (stdout for `-`).
    wfd: Option<OwnedFd>,
    readable: bool,
    writable: bool,
    /// The read fd reported RDHUP, HUP or ERR ([`super::poller::Ready::hup`]): read on
    /// to EAGAIN or EOF from now on.
    hup: bool,
    /// Its read fd is watched for writing only: the direction it feeds awaits its sink.
    muted: bool,
    socket: bool,
    polled: Polled,
    dial: Option<Dial>,
    /// File status flags to put back on inherited fds (O_NONBLOCK is shared with the
    /// process that gave them to us).
    restore: Vec<(RawFd, OFlag)>,
    /// `exec:`/`sh:`: the child whose stdout is `fd` and stdin `wfd` (closed once the
    /// direction into it is over; a direction over holds nothing, so none writes again).
    /// With whether it leads a process group of its own.
    child: Option<(Child, bool)>,
    /// The growth of the child's pipes, counted in the pipe budget while they live.
    held: Vec<HeldPipe>,
    /// A TLS side: its handshake's outcome and, in userspace, its record layer's thread
    /// (which ends on its own once `fd`, its socketpair's end, is closed).
    tls: Option<Box<Session>>,
}

/// The fds of a side that are in the epoll: its read fd and, when it has one, its write
/// fd — two at most, held in place (a `Vec` cost an allocation and a free a side, a
/// connection; bench/NOTEBOOK.md, `relay: what a short connection paid for`).
#[derive(Debug, Default, Clone, Copy)]
struct Polled {
    fds: [RawFd; 2],
    len: usize,
}

impl Polled {
    fn push(&mut self, fd: RawFd) {
        assert!(self.len < self.fds.len(), "a side has two fds at most");
        self.fds[self.len] = fd;
        self.len += 1;
    }

    fn contains(&self, fd: RawFd) -> bool {
        self.fds[..self.len].contains(&fd)
    }

    fn remove(&mut self, fd: RawFd) {
        if let Some(i) = self.fds[..self.len].iter().position(|&f| f == fd) {
            self.fds.copy_within(i + 1..self.len, i);
            self.len -= 1;
        }
    }

    /// Empties it, handing back what it held.
    fn take(&mut self) -> Polled {
        std::mem::take(self)
    }
}

impl IntoIterator for Polled {
    type Item = RawFd;
    type IntoIter = std::iter::Take<std::array::IntoIter<RawFd, 2>>;

    fn into_iter(self) -> Self::IntoIter {
        self.fds.into_iter().take(self.len)
    }
}

impl Peer {
    fn empty() -> Peer {
        Peer {
            fd: None,
            wfd: None,
            readable: false,
            writable: false,
            hup: false,
            muted: false,
            socket: true,
            polled: Polled::default(),
            dial: None,
            restore: Vec::new(),
            child: None,
            held: Vec::new(),
            tls: None,
        }
    }

    fn open(&self) -> bool {
        self.fd.is_some() && self.dial.is_none()
    }

    /// The relay's own socket (accepted or dialed), not an inherited fd that another
    /// process may hold too (`-`, `fd:N`: those have flags to restore).
    fn owned(&self) -> bool {
        self.restore.is_empty()
    }

    /// A read shorter than asked drained the read fd: it is in epoll (edge-triggered)
    /// and has not hung up. See [`super::flow::Port::short_read_drains`].
    fn short_read_drains(&self) -> bool {
        // A TLS source's reads are records', not the socket's: a short one drains nothing.
        self.tls.is_none()
            && !self.hup
            && self
                .fd
                .as_ref()
                .is_some_and(|fd| self.polled.contains(fd.as_raw_fd()))
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
    /// The client's addresses, for a PROXY header to a backend (`dial`).
    origin: Addresses,
    sides: [Peer; 2],
    /// `flows[0]`: A -> B, `flows[1]`: B -> A.
    flows: [Flow; 2],
    started: Instant,
    last_active: Instant,
    busy: bool,
    /// One direction ended and `--linger`'s timer runs.
    lingering: bool,
    /// The connected upstream's address, taken at the first pump under `--log` (by the
    /// end, a closed socket has no peer to ask).
    upstream: Option<SockaddrStorage>,
    /// Several upstreams: the one B is (or is being connected to), those tried and
    /// failed, and the client's IP address (source-hash's key).
    pick: Option<usize>,
    /// `--limit`: each direction's bucket, and whether a [`PACE`] timer is set for it.
    pace: [Option<super::pace::Bucket>; 2],
    pace_timer: [bool; 2],
    tried: super::upstream::Tried,
    client_ip: Option<std::net::IpAddr>,
}

/// What the workers (`--workers`) share: the count `--max-conns` bounds, connection ids,
/// the order connections end in, the log, and a stop for when a worker fails.
pub(super) struct Shared {
    live: AtomicUsize,
    next_id: AtomicU64,
    ended: AtomicU64,
    pub(super) log: Option<Mutex<ConnLog>>,
    pub(super) stop: AtomicBool,
    /// Text mode's rate-limited line per failed connection, over every worker.
    pub(super) failed_lines: Mutex<FailedLines>,
    /// Bytes of the connections that ended, [A -> B, B -> A], over every worker: the
    /// running totals SIGUSR1 and --progress print.
    pub(super) bytes_done: [AtomicU64; 2],
    pub(super) started: Instant,
    /// When the last totals line was printed, and the bytes done then: its rate is since.
    last_totals: Mutex<Option<(Instant, u64)>>,
    /// Several upstreams: the balancer, and each one's side (B's place).
    pub(super) upstreams: Option<super::upstream::Upstreams>,
    pub(super) upstream_specs: Vec<Spec>,
    /// `--dump`: every connection's directions copy their bytes into it.
    pub(super) dump: Option<Arc<Tap>>,
    /// `--limit-total`: the bucket every direction of every connection draws on.
    pub(super) limit_total: Option<Mutex<super::pace::Bucket>>,
}

impl Shared {
    pub(super) fn new(log: Option<ConnLog>) -> Shared {
        Shared {
            live: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            ended: AtomicU64::new(0),
            log: log.map(Mutex::new),
            stop: AtomicBool::new(false),
            failed_lines: Mutex::new(FailedLines::default()),
            bytes_done: [AtomicU64::new(0), AtomicU64::new(0)],
            started: Instant::now(),
            last_totals: Mutex::new(None),
            upstreams: None,
            upstream_specs: Vec::new(),
            dump: None,
            limit_total: None,
        }
    }
}

pub(super) struct Server<'a> {
    opts: &'a Options,
    cfg: &'a RelayConfig,
    tuning: Tuning,
    specs: &'a [Spec; 2],
    shared: &'a Shared,
    policy: Policy,
    /// Each side's URI as reports name it, made once (formatting an endpoint cost a short
    /// connection more than its getsockopt).
    side_uris: [String; 2],
    /// A side (or an upstream) is a command: only then does a new connection work out the
    /// `ZEROCAT_PEER_*` variables its child gets.
    commands: bool,
    poller: Poller,
    pools: Pools,
    conns: Vec<Option<Conn>>,
    gens: Vec<u32>,
    free: Vec<usize>,
    active: usize,
    busy: VecDeque<u64>,
    accepting: bool,
    listener_polled: bool,
    /// epoll said the listener has connections waiting (level-triggered: it says so again
    /// at the next wait while any are left).
    listener_ready: bool,
    accept_backoff: Duration,
    accept_paused_until: Option<Instant>,
    grace_until: Option<Instant>,
    pub(super) tally: Tally,
    /// Which worker this loop is, from 0 (the log's lines say which).
    worker: usize,
    /// Other workers watch the same listener (`--workers` above 1).
    listener_shared: bool,
    /// Connections that ended, waiting for their command's child to exit.
    reaping: Vec<conn::Reaping>,
    /// A [`REAP`] timer is set.
    reap_timer: bool,
    /// `--exit-idle`: since when no connection has been open.
    idle_since: Option<Instant>,
    /// When this turn of the loop woke: the time an unpaced pump stamps its connection
    /// active with (one clock read a wake-up rather than two a pump: 2-3 % of a small
    /// request's CPU; bench/NOTEBOOK.md, `relay: small requests at the floor`).
    turn: Instant,
}

/// No fd (or no memory) for a new socket: nobody's fault but the load; wait until one is
/// free instead of failing or asking again at once (HAZARDS §2: never spin).
fn out_of_fds(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::EMFILE | Errno::ENFILE | Errno::ENOBUFS | Errno::ENOMEM
    )
}

/// A command side for a new connection: the child started, its stdout to read and its
/// stdin to write, both non-blocking (they are pipes of ours alone).
fn command_side(
    spec: &CommandSpec,
    own_group: bool,
    peer_env: Option<&PeerEnv>,
) -> anyhow::Result<Peer> {
    let duplex = spec.spawn_duplex_for(own_group, peer_env)?;
    set_nonblocking(duplex.read.as_raw_fd())?;
    set_nonblocking(duplex.write.as_raw_fd())?;

    let mut peer = Peer::empty();
    peer.fd = Some(duplex.read);
    peer.wfd = Some(duplex.write);
    peer.socket = false;
    peer.child = Some((duplex.child, own_group));
    Ok(peer)
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
    /// The event loop of worker `worker` of `workers` (the only one: `workers` 1, run on
    /// the calling thread, which gets the signals; else each in a thread of its own).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        opts: &'a Options,
        cfg: &'a RelayConfig,
        tuning: Tuning,
        specs: &'a [Spec; 2],
        policy: Policy,
        shared: &'a Shared,
        worker: usize,
        workers: usize,
    ) -> anyhow::Result<Server<'a>> {
        let poller = if workers > 1 {
            Poller::for_worker()?
        } else {
            Poller::new()?
        };
        Ok(Server {
            opts,
            cfg,
            tuning,
            specs,
            shared,
            policy,
            side_uris: [Side::A, Side::B].map(|side| cfg.side(side).to_string()),
            commands: specs
                .iter()
                .chain(&shared.upstream_specs)
                .any(|spec| matches!(spec, Spec::Command { .. })),
            poller,
            pools: Pools::new(PIPE_BUDGET).share(workers),
            conns: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
            active: 0,
            busy: VecDeque::new(),
            accepting: false,
            listener_polled: false,
            listener_ready: false,
            accept_backoff: ACCEPT_BACKOFF_FIRST,
            accept_paused_until: None,
            grace_until: None,
            tally: Tally::default(),
            worker,
            listener_shared: workers > 1,
            reaping: Vec::new(),
            reap_timer: false,
            idle_since: None,
            turn: Instant::now(),
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
            self.shared.live.fetch_add(1, Ordering::SeqCst);
            self.start_conn(None);
        }
        let mut ready = Vec::new();
        // --progress: one worker prints the running totals every PROGRESS_EVERY.
        if self.opts.progress && self.worker == 0 {
            self.poller.timer(Instant::now() + PROGRESS_EVERY, PROGRESS);
        }
        loop {
            if process::take_progress_request() {
                self.print_totals();
            }
            let stop = process::interrupted() || self.shared.stop.load(Ordering::Relaxed);
            if stop && self.grace_until.is_none() {
                self.begin_grace();
            }
            if self.grace_until.is_some() && self.active > 0 && process::stopped_twice() {
                self.cut_all(); // a second signal: the grace ends now
            }
            if self.grace_until.is_some() && process::stopped_twice() {
                self.kill_children();
            }
            self.arm_exit_idle();
            if self.active == 0 && !self.accepting && self.reaping.is_empty() {
                return Ok(self.grace_until.is_some());
            }
            // Room again (another worker's connection ended): watch the listener again.
            if self.accepting
                && !self.listener_polled
                && self.accept_paused_until.is_none()
                && !self.at_capacity()
            {
                self.poll_listener(true);
            }
            self.poller.wait(!self.busy.is_empty(), &mut ready)?;
            self.turn = Instant::now();
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
            // The buffer budget is spent (sinks that stopped reading hold it): said once
            // per stretch, while the others go on with allowances of their own.
            if self.pools.take_notice() && !self.opts.quiet {
                eprintln!(
                    "zerocat: relay: the buffer budget ({}) is held by directions whose sinks \
                     are not reading; the others go on with {} buffers of their own until \
                     it frees up",
                    crate::units::human_bytes(self.pools.buffer_budget() as u64),
                    crate::units::human_bytes(super::pool::ALLOWANCE as u64)
                );
            }
            // Only when epoll said so: not one accept4 per turn of the loop.
            if std::mem::take(&mut self.listener_ready) && self.accepting && self.listener_polled {
                self.accept_all();
            }
        }
    }

    /// `--exit-idle`: with no connection open (none greeting, none waiting for its child),
    /// the idle stretch starts, and its timer is set.
    fn arm_exit_idle(&mut self) {
        let Some(idle) = self.cfg.exit_idle else {
            return;
        };
        let busy = self.active > 0
            || !self.reaping.is_empty()
            || self.listener().is_some_and(|(_, l)| l.greeting());
        if !self.accepting || busy {
            self.idle_since = None;
        } else if self.idle_since.is_none() {
            let now = Instant::now();
            self.idle_since = Some(now);
            self.poller.timer(now + idle, EXIT_IDLE);
        }
    }

    /// The idle stretch's timer: if it ran its whole length, the relay stops accepting and
    /// ends (exit 0). The listener is inherited and stays open in its giver (systemd), so a
    /// client that connects from now on waits in its backlog for the next activation, and
    /// one epoll already announced is not accepted either. A timer of an earlier stretch
    /// finds a later `idle_since` and does nothing.
    fn exit_if_idle(&mut self, now: Instant) {
        let (Some(since), Some(idle)) = (self.idle_since, self.cfg.exit_idle) else {
            return;
        };
        if self.accepting && self.active == 0 && now >= since + idle {
            self.opts.print_plan(&format!(
                "relay: no connection for {:.3} s (--exit-idle): exiting, the listener left to its giver",
                idle.as_secs_f64()
            ));
            self.stop_accepting();
        }
    }

    fn begin_grace(&mut self) {
        let grace = self.cfg.grace;
        let until = Instant::now() + grace;
        self.grace_until = Some(until);
        if self.accepting {
            self.stop_accepting();
        }
        if self.active > 0 {
            self.opts.print_plan(&format!(
                "interrupted: no new connections; {} in flight get {} s to finish",
                self.active,
                grace.as_secs_f64()
            ));
        }
        if grace.is_zero() {
            self.cut_all();
        } else {
            self.poller.timer(until, GRACE_OVER);
        }
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
            peer.hup |= event.hup;
            if peer.wfd.is_none() {
                peer.writable |= event.writable;
            }
        } else {
            peer.writable |= event.writable;
        }
        if peer
            .dial
            .as_ref()
            .is_some_and(|d| d.handshake.is_some() || d.tls.is_some())
        {
            self.shake(idx, side);
        } else if peer.dial.as_ref().is_some_and(|d| !d.waiting) && event.writable {
            self.dialed(idx, side);
        } else {
            self.pump(idx);
        }
    }

    fn run_timers(&mut self) {
        let now = Instant::now();
        self.turn = now;
        while let Some(token) = self.poller.due(now) {
            match token {
                ACCEPT_RESUME => {
                    self.accept_paused_until = None;
                    if self.accepting && !self.at_capacity() {
                        self.poll_listener(true);
                    }
                }
                GRACE_OVER => self.cut_all(),
                PROGRESS => {
                    self.print_totals();
                    self.poller.timer(now + PROGRESS_EVERY, PROGRESS);
                }
                REAP => {
                    self.reap_timer = false;
                    self.reap();
                }
                EXIT_IDLE => self.exit_if_idle(now),
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
                    let end = if self.cfg.idle_ends_cleanly {
                        ConnEnd::Quiet
                    } else {
                        ConnEnd::IdleTimeout
                    };
                    self.finish(idx, end);
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
            k if (PACE..PACE + 2).contains(&k) => {
                conn.pace_timer[(k - PACE) as usize] = false;
                self.pump(idx);
            }
            LINGER => self.finish(idx, ConnEnd::Linger),
            k if (RETRY..RETRY + 2).contains(&k) => {
                let side = (k - RETRY) as usize;
                if conn.sides[side].dial.as_ref().is_some_and(|d| d.waiting) {
                    self.dial(idx, side);
                }
            }
            _ => {}
        }
    }

    /// A new connection: one accepted socket (with a listener), or none (two
    /// connectors, or stdio and a connector).
    fn start_conn(&mut self, accepted: Option<Accepted>) {
        let idx = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.gens.push(0);
            self.conns.len() - 1
        });
        let now = Instant::now();
        let mut conn = Conn {
            id: self.shared.next_id.fetch_add(1, Ordering::Relaxed),
            peer: String::new(),
            origin: Addresses::Unknown,
            sides: [Peer::empty(), Peer::empty()],
            flows: [0, 1].map(|_| Flow::new(self.tuning.choice(self.policy))),
            started: now,
            last_active: now,
            busy: false,
            lingering: false,
            upstream: None,
            pick: None,
            pace: [0, 1].map(|_| {
                self.opts
                    .limit
                    .map(|rate| super::pace::Bucket::new(rate, now))
            }),
            pace_timer: [false; 2],
            tried: 0,
            client_ip: None,
        };
        self.active += 1;
        // A command side learns the client the listener accepted (inetd style).
        let peer_env = accepted.as_ref().filter(|_| self.commands).map(|a| {
            let tls = a.tls.as_ref().map(|s| s.info.peer_subject.as_deref());
            PeerEnv::of(&a.origin, tls)
        });
        let mut accepted = accepted;
        let mut failure = None;
        let mut picked = false;
        for side in 0..2 {
            if side == pick::UPSTREAM && failure.is_none() && !picked {
                picked = true;
                if let Err(end) = self.first_pick(&mut conn, now) {
                    failure = Some(end);
                    continue;
                }
            }
            match self.spec_at(conn.pick, side) {
                Spec::Listen(_) => {
                    let accepted = accepted.take().expect("an accepted connection");
                    conn.peer = accepted.peer;
                    conn.origin = accepted.origin;
                    conn.sides[side].fd = Some(accepted.fd);
                    if accepted.tls.as_ref().is_some_and(|s| s.in_loop()) {
                        conn.flows =
                            [0, 1].map(|_| Flow::new(self.tuning.choice(Policy::Userspace)));
                        // The handshake's last read may have taken the client's first
                        // records with its Finished: rustls holds them, the socket is
                        // empty, and no edge will ever announce them.
                        conn.sides[side].readable = true;
                    }
                    conn.sides[side].tls = accepted.tls;
                }
                Spec::Inherited(endpoint) => {
                    if let Err(e) = inherit::inherit(endpoint, &mut conn.sides[side]) {
                        failure = Some(ConnEnd::Unusable(format!("{e:#}")));
                    }
                }
                Spec::Command {
                    spec, own_group, ..
                } => match self.command_peer(spec, *own_group, peer_env.as_ref()) {
                    Ok(peer) => conn.sides[side] = peer,
                    Err(e) => {
                        failure.get_or_insert(ConnEnd::CannotRun {
                            side: Side::of(side),
                            text: format!("{e:#}"),
                        });
                    }
                },
                Spec::Dial { .. } => conn.sides[side].dial = Some(Dial::new()),
            }
        }
        if conn.peer.is_empty() {
            conn.peer = self.specs_peer_name();
        }
        self.conns[idx] = Some(conn);
        if let Some(end) = failure {
            self.finish(idx, end);
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

    /// A command side started, the growth of its pipes counted in the pipe budget.
    /// What a command side of connection `idx` learns of its client (an upstream's child,
    /// started after the connection was accepted): its addresses and TLS, as accepted.
    pub(super) fn client_env(&self, idx: usize) -> Option<PeerEnv> {
        let conn = self.conns.get(idx)?.as_ref()?;
        if !matches!(self.specs[0], Spec::Listen(_)) {
            return None;
        }
        let tls = conn.sides[0]
            .tls
            .as_ref()
            .map(|s| s.info.peer_subject.as_deref());
        Some(PeerEnv::of(&conn.origin, tls))
    }

    fn command_peer(
        &mut self,
        spec: &CommandSpec,
        own_group: bool,
        peer_env: Option<&PeerEnv>,
    ) -> anyhow::Result<Peer> {
        let mut peer = command_side(spec, own_group, peer_env)?;
        for fd in [&peer.fd, &peer.wfd].into_iter().flatten() {
            peer.held.extend(self.pools.grow_childs_pipe(fd.as_fd()));
        }
        Ok(peer)
    }

    /// The running totals (SIGUSR1, --progress): "zerocat: relay: 2 open, 14 done, 1.20 MiB
    /// a -> b, 3.40 MiB b -> a (of those done), up 12.3 s, 310 KiB/s since the last line"
    /// (or "since start": the bytes of connections done, both ways, over that time).
    fn print_totals(&self) {
        let done = self.shared.ended.load(Ordering::Relaxed);
        let open = self.live();
        let [ab, ba] = [0, 1].map(|d| self.shared.bytes_done[d].load(Ordering::Relaxed));
        let now = Instant::now();
        let (since, before, when) = match self.shared.last_totals.lock() {
            Ok(mut last) => {
                let (since, before, when) = match *last {
                    Some((at, bytes)) => (at, bytes, "since the last line"),
                    None => (self.shared.started, 0, "since start"),
                };
                *last = Some((now, ab + ba));
                (since, before, when)
            }
            Err(_) => (self.shared.started, 0, "since start"),
        };
        let seconds = now.duration_since(since).as_secs_f64().max(1e-3);
        let rate = ((ab + ba).saturating_sub(before) as f64 / seconds) as u64;
        eprintln!(
            "zerocat: relay: {open} open, {done} done, {} a -> b, {} b -> a (of those done), up {:.1} s, {}/s {when}{}",
            crate::units::human_bytes(ab),
            crate::units::human_bytes(ba),
            self.shared.started.elapsed().as_secs_f64(),
            crate::units::human_bytes(rate),
            self.shared
                .upstreams
                .as_ref()
                .map_or_else(String::new, |u| u.text()),
        );
    }

    /// Connections open in every worker, and those being accepted.
    pub(super) fn live(&self) -> usize {
        self.shared.live.load(Ordering::SeqCst)
    }

    /// Takes a place within `--max-conns` for a connection about to be accepted; false
    /// when there is none. [`Server::unreserve`] gives it back if none came.
    pub(super) fn reserve(&self) -> bool {
        let max = self.cfg.max_conns.unwrap_or(usize::MAX);
        self.shared
            .live
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    pub(super) fn unreserve(&self) {
        self.shared.live.fetch_sub(1, Ordering::SeqCst);
    }

    /// No more connections: the listener (shared by the workers, closed when the relay
    /// ends) stops listening where it is zerocat's own ([`Listener::stop_listening`]).
    pub(super) fn close_listener(&self) {
        if let Some((_, listener)) = self.listener() {
            listener.stop_listening();
        }
    }

    fn specs_peer_name(&self) -> String {
        match &self.specs[0] {
            Spec::Dial { uri, .. } | Spec::Command { uri, .. } => uri.clone(),
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
}
