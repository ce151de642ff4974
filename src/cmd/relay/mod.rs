//! `zerocat relay A B`: bytes from A to B and from B to A at once.
//!
//! A listener on either side serves every connection it accepts, concurrently, each paired
//! with a fresh connection to the other side (`--once`: one). Two connectors, or `-` and a
//! connector, relay one session. With a listener, `--workers` threads each run an epoll
//! loop ([`poller`]) over the one shared listener; one session runs one. Each direction
//! of each connection is a [`flow::Flow`]: splice through a pipe of our own, or read/write
//! through a pooled buffer ([`pool`]), chosen per direction and adaptively under
//! `--via auto` ([`mod@policy`]).
//!
//! Ends: EOF from one side is passed on as a half-close (`shutdown(SHUT_WR)`) once every
//! byte is delivered, and the other direction keeps going until its own EOF (no cut-off
//! timer). A reset or an error on one side resets the other (SO_LINGER 0). SIGINT/SIGTERM:
//! stop accepting, give connections in flight `--grace` (default [`GRACE`]) to finish,
//! cut the rest (a second signal cuts them at once), report, exit 130.

mod datagram;
mod end;
mod flow;
mod framed;
mod log;
mod pace;
mod policy;
mod poller;
mod pool;
mod report;
mod server;
mod upstream;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};

use crate::endpoint::Endpoint;
use crate::engine::{DataPath, Via};
use crate::exit::{ExitCode, UsageError};
use crate::options::Options;
use crate::sys::fdkind::FdKind;
use crate::units::human_bytes;

use end::Side;
use policy::Policy;
use report::{ConnReport, Summary, Tally};
use server::{Server, Shared, Spec};
pub use upstream::Balance;

/// How long connections in flight may go on after SIGINT/SIGTERM when `--grace` is not
/// given (the CLI's default, "2s", says the same).
pub const GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub a: Endpoint,
    pub b: Endpoint,
    /// Upstreams beside B: a connection gets one of B and these ([`upstream`]).
    pub more: Vec<Endpoint>,
    pub balance: Balance,
    /// Skip an upstream that failed for this long.
    pub down_for: Duration,
    /// Probe the upstreams this often.
    pub check_interval: Option<Duration>,
    /// `--limit-total`: every connection's bytes together, each way, per second.
    pub limit_total: Option<u64>,
    /// Exit after this long with no connection open (an inherited listener only).
    pub exit_idle: Option<Duration>,
    /// Serve one connection, then exit.
    pub once: bool,
    /// Connections served at once; beyond, clients wait in the listen backlog.
    pub max_conns: Option<usize>,
    /// Close a connection that moved no byte either way for this long.
    pub idle_timeout: Option<Duration>,
    /// The idle timeout is how a connection ends, cleanly (nc -w: "silently closed",
    /// exit 0), not a failure.
    pub idle_ends_cleanly: bool,
    /// Give up a connection attempt after this long (each attempt of `retry=N`).
    pub connect_timeout: Option<Duration>,
    /// `--linger` (nc -q): once one direction has ended, the other gets at most this long,
    /// then the connection ends cleanly.
    pub linger: Option<Duration>,
    /// After SIGINT/SIGTERM, how long connections in flight may go on before they are cut.
    pub grace: Duration,
    /// `--log`: a JSON line per connection into this file (`-`: stderr).
    pub log: Option<std::path::PathBuf>,
    /// Event loops serving a listener (threads); None: one per CPU available.
    pub workers: Option<usize>,
}

impl RelayConfig {
    /// A relay between `a` and `b` with every option at its default (`--balance
    /// failover`, `--down-for 10s`, the grace, no limits): what a caller that is not the
    /// command line (the `nc` name) starts from.
    pub fn between(a: Endpoint, b: Endpoint) -> RelayConfig {
        RelayConfig {
            a,
            b,
            more: Vec::new(),
            balance: Balance::default(),
            down_for: Duration::from_secs(10),
            check_interval: None,
            limit_total: None,
            exit_idle: None,
            once: false,
            max_conns: None,
            idle_timeout: None,
            idle_ends_cleanly: false,
            connect_timeout: None,
            linger: None,
            grace: GRACE,
            log: None,
            workers: None,
        }
    }

    /// B and the upstreams after it.
    fn upstreams(&self) -> impl Iterator<Item = &Endpoint> {
        std::iter::once(&self.b).chain(&self.more)
    }

    /// Several upstreams: the balancer's state, none picked yet.
    fn balancer(&self) -> Option<upstream::Upstreams> {
        (!self.more.is_empty()).then(|| {
            upstream::Upstreams::new(
                self.upstreams().map(Endpoint::to_string).collect(),
                self.balance,
                self.down_for,
            )
        })
    }

    /// The endpoint of side A or B.
    fn side(&self, side: Side) -> &Endpoint {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }
}

/// Knobs for tests and measurements, set by hidden flags: not options of the product, so
/// they travel beside [`RelayConfig`], and [`Tuning::default`] is the product's behaviour.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tuning {
    /// `--splice-first`: under auto, start every direction with splice, as if a bulk read
    /// had moved it there.
    pub splice_first: bool,
}

impl Tuning {
    /// How a new direction chooses its path under `policy`.
    fn choice(&self, policy: Policy) -> policy::Choice {
        policy::Choice::new(policy, !self.splice_first)
    }
}

pub fn run(opts: &Options, cfg: &RelayConfig, tuning: &Tuning) -> anyhow::Result<ExitCode> {
    let policy = policy(opts.via)?;
    check_limit(cfg, opts.limit.or(cfg.limit_total))?;
    if opts.size.is_some() {
        return Err(UsageError(
            "--size: a relay moves no one stream of a known size (it is for pipe, tee and copy)"
                .into(),
        )
        .into());
    }
    check_sides(cfg)?;
    upstream::check(cfg)?;
    let max_conns = Some(cfg.max_conns.unwrap_or_else(default_max_conns));
    let planned = RelayConfig {
        max_conns,
        ..cfg.clone()
    };
    if framed::is_framed(cfg) {
        if policy == Policy::Splice {
            return Err(UsageError(
                "--via splice: datagrams move in userspace (the kernel splices no datagram)".into(),
            )
            .into());
        }
        opts.print_plan(&framed::plan(&planned));
    } else if is_datagram(cfg) {
        if policy == Policy::Splice {
            return Err(UsageError(
                "--via splice: datagrams move in userspace (the kernel splices no datagram)".into(),
            )
            .into());
        }
        opts.print_plan(&datagram_plan(&planned));
    } else {
        opts.print_plan(&(plan(&planned, policy) + &pace_words(opts.limit, cfg.limit_total)));
    }
    if opts.dump.is_some() && (framed::is_framed(cfg) || is_datagram(cfg)) {
        return Err(UsageError(
            "--dump: a relay of datagrams is not dumped yet (streams are)".into(),
        )
        .into());
    }
    if opts.explain {
        return Ok(ExitCode::Success);
    }
    // Before anything listens: a dump that cannot be written fails the run now.
    let dump = crate::cmd::common::start_dump(opts)?;
    let log = match &cfg.log {
        Some(path) => Some(log::ConnLog::open(
            &path.to_string_lossy(),
            &cfg.a.to_string(),
            &cfg.b.to_string(),
        )?),
        None => None,
    };
    if framed::is_framed(cfg) {
        let started = Instant::now();
        let (interrupted, tally, log) = framed::run(opts, &planned, log)?;
        let log_error = log.and_then(log::ConnLog::finish);
        let one_session = cfg.once || !(cfg.a.listens() || cfg.b.listens());
        return conclude(
            opts,
            cfg,
            &tally,
            interrupted,
            log_error,
            started,
            one_session,
            (None, None),
        );
    }
    if is_datagram(cfg) {
        let started = Instant::now();
        let cfg_run = RelayConfig {
            max_conns,
            ..cfg.clone()
        };
        let balancer = cfg.balancer();
        let (interrupted, tally, log) = datagram::run(opts, &cfg_run, log, balancer.as_ref())?;
        let log_error = log.and_then(log::ConnLog::finish);
        return conclude(
            opts,
            cfg,
            &tally,
            interrupted,
            log_error,
            started,
            cfg.once,
            (balancer.as_ref(), None),
        );
    }
    // A program that is not there fails the run before anything listens (exit 1), not
    // every connection.
    for e in std::iter::once(&cfg.a).chain(cfg.upstreams()) {
        if let Endpoint::Command(spec) = e {
            spec.check_runnable()?;
        }
        if let Endpoint::Http { .. } = e {
            return Err(crate::exit::UsageError(format!(
                "relay: {e} is an HTTP exchange, not a stream to relay: use pipe, tee or copy"
            ))
            .into());
        }
    }
    // A socket option the kernel refuses (mark= without CAP_NET_ADMIN) is said now, once,
    // before anything listens, not at every connection.
    for e in [&cfg.a, &cfg.b] {
        check_socket_options(e)?;
    }
    let listens = cfg.a.listens() || cfg.b.listens();
    let specs = [
        spec(&cfg.a, cfg.connect_timeout, listens)?,
        spec(&cfg.b, cfg.connect_timeout, listens)?,
    ];
    crate::cmd::common::say_socket_options(opts, &[&cfg.a, &cfg.b]);
    // Connections still greeting hold places of --max-conns too: a flood of silent
    // sockets sheds its own oldest, never runs the relay out of fds.
    for spec in &specs {
        if let (Spec::Listen(listener), Some(max)) = (spec, max_conns) {
            listener.limit_greetings(max);
        }
    }
    let single_session = !specs.iter().any(|s| matches!(s, Spec::Listen(_)));
    let once = cfg.once || specs.iter().any(|s| matches!(s, Spec::Inherited(_)));
    let cfg_run = RelayConfig {
        once,
        max_conns,
        ..cfg.clone()
    };
    // One session, or --once: one loop. A listener: --workers loops share it (a
    // multiplexed one too: each loop takes its greetings' handshakes).
    // --exit-idle: one loop, whose idle stretch is the relay's.
    let workers = if single_session || once || cfg.exit_idle.is_some() {
        1
    } else {
        cfg.workers.unwrap_or_else(default_workers)
    };
    // The plan said what was asked; say what runs where it differs (an inherited
    // connection, which the plan could not know about).
    if let Some(asked) = cfg
        .workers
        .filter(|&n| n != workers && !cfg.once && listens)
    {
        opts.print_plan(&format!(
            "plan: --workers {asked}: 1 event loop runs (an inherited connection is one session)"
        ));
    }
    let started = Instant::now();
    let mut shared = Shared::new(log);
    shared.dump = dump.as_ref().map(|d| std::sync::Arc::clone(d.tap()));
    shared.limit_total = cfg
        .limit_total
        .map(|rate| std::sync::Mutex::new(pace::Bucket::new(rate, Instant::now())));
    shared.upstreams = cfg.balancer();
    if shared.upstreams.is_some() {
        shared.upstream_specs = cfg
            .upstreams()
            .map(|e| spec(e, cfg.connect_timeout, listens))
            .collect::<anyhow::Result<_>>()?;
    }
    let checks_over = std::sync::atomic::AtomicBool::new(false);
    let (interrupted, tally) = std::thread::scope(|scope| {
        if let (Some(every), Some(ups)) = (cfg.check_interval, &shared.upstreams) {
            let (specs, over) = (&shared.upstream_specs, &checks_over);
            let timeout = cfg.connect_timeout.unwrap_or(every);
            scope.spawn(move || server::run_checks(ups, specs, every, timeout, over));
        }
        let served = serve(opts, &cfg_run, tuning, &specs, policy, &shared, workers);
        checks_over.store(true, std::sync::atomic::Ordering::SeqCst);
        served
    })?;
    drop(specs);
    shared.dump = None;
    let dump = crate::cmd::common::finish_dump(opts, dump);
    let log_error = shared
        .log
        .and_then(|log| log.into_inner().ok())
        .and_then(log::ConnLog::finish);
    conclude(
        opts,
        cfg,
        &tally,
        interrupted,
        log_error,
        started,
        single_session || once,
        (shared.upstreams.as_ref(), dump.as_ref()),
    )
}

/// The event loops: one on this thread, or `workers` in threads of their own.
fn serve(
    opts: &Options,
    cfg_run: &RelayConfig,
    tuning: &Tuning,
    specs: &[Spec; 2],
    policy: Policy,
    shared: &Shared,
    workers: usize,
) -> anyhow::Result<(bool, Tally)> {
    Ok(if workers == 1 {
        let mut server = Server::new(opts, cfg_run, *tuning, specs, policy, shared, 0, workers)?;
        let interrupted = server.run()?;
        (interrupted, std::mem::take(&mut server.tally))
    } else {
        run_workers(opts, cfg_run, tuning, specs, policy, shared, workers)?
    })
}

/// The report, and the exit code: 130 after a signal; for one session (or `--once`) its
/// end is the run's end.
#[allow(clippy::too_many_arguments)]
fn conclude(
    opts: &Options,
    cfg: &RelayConfig,
    tally: &Tally,
    interrupted: bool,
    log_error: Option<String>,
    started: Instant,
    one_session: bool,
    (upstreams, dump): (
        Option<&upstream::Upstreams>,
        Option<&crate::engine::dump::DumpTotals>,
    ),
) -> anyhow::Result<ExitCode> {
    if cfg.a.is_websocket() || cfg.b.is_websocket() {
        // The report counts the WebSocket threads' payload bytes: they first send what
        // they still hold (the engine's ends are closed), else the counts come up short.
        crate::endpoint::websocket::bridge::finish_all(std::time::Duration::from_secs(5));
    }
    let seconds = started.elapsed().as_secs_f64();
    let summary = Summary {
        cfg,
        tally,
        upstreams,
        seconds,
        interrupted,
        log_error: log_error.as_deref(),
        dump,
    };
    opts.print_report(&summary.render(opts.stats));
    if interrupted {
        return Ok(ExitCode::Interrupted);
    }
    if one_session {
        if let Some(r) = &tally.first {
            if !r.end.is_clean() {
                if writes_stdout_broke(cfg, r) {
                    return Ok(ExitCode::BrokenPipe);
                }
                return Err(anyhow!(
                    "{}",
                    r.end.text().unwrap_or_else(|| r.end.word().into())
                ));
            }
        }
    }
    Ok(ExitCode::Success)
}

/// `--workers` event loops, each in a thread of its own, serving the one listener; the
/// main thread only waits (it is the one the stop signals reach). Returns whether a
/// signal stopped them, and their tallies added up.
fn run_workers(
    opts: &Options,
    cfg: &RelayConfig,
    tuning: &Tuning,
    specs: &[Spec; 2],
    policy: Policy,
    shared: &Shared,
    workers: usize,
) -> anyhow::Result<(bool, Tally)> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                scope.spawn(move || {
                    let _stop = StopOnPanic(&shared.stop);
                    let served =
                        Server::new(opts, cfg, *tuning, specs, policy, shared, worker, workers)
                            .and_then(|mut server| {
                                let interrupted = server.run()?;
                                Ok((interrupted, std::mem::take(&mut server.tally)))
                            });
                    if served.is_err() {
                        // The others stop as on a signal (their grace, then the report).
                        shared.stop.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    served
                })
            })
            .collect();
        let mut interrupted = false;
        let mut tally = Tally::default();
        let mut failure = None;
        let mut panicked = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok((stopped, t))) => {
                    interrupted |= stopped;
                    tally.merge(t);
                }
                Ok(Err(e)) => failure = Some(e),
                // The others were stopped (StopOnPanic); the panic goes on once they end.
                Err(panic) => panicked = Some(panic),
            }
        }
        if let Some(panic) = panicked {
            std::panic::resume_unwind(panic);
        }
        match failure {
            Some(e) => Err(e),
            None => Ok((interrupted, tally)),
        }
    })
}

/// Stops the other workers (as on a signal) when a worker panics: the scope that runs
/// them waits for every one.
struct StopOnPanic<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Below this many CPUs, `--workers` defaults to one event loop.
const CPUS_FOR_MORE_WORKERS: usize = 4;

/// `--workers` when not given: the CPUs this process may run on (its affinity mask and
/// cgroup quota, as `std::thread::available_parallelism` reads them), but one below
/// [`CPUS_FOR_MORE_WORKERS`]: there the relay shares the few CPUs with the programs on either
/// side of it (its backends and clients on the same machine, the kernel's TCP work of its
/// traffic), and a second loop competes with them rather than adding work done — on 2 CPUs
/// `--workers 2` served 6-9 % fewer requests than one (bench/NOTEBOOK.md, `relay: where it
/// runs`).
fn default_workers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < CPUS_FOR_MORE_WORKERS {
        1
    } else {
        cpus
    }
}

/// Fds a place of `--max-conns` may hold: two sockets and a pipe (two fds) each way for a
/// connection, and one for a connection still greeting (a TLS handshake or PROXY header
/// in flight, bounded by the same number).
const FDS_PER_CONN: u64 = 7;
/// Fds kept for everything else: stdio, epoll, the listener, a dial in flight.
const FDS_RESERVED: u64 = 16;

/// `--max-conns` when not given: as many connections as the open-file limit holds, so idle
/// clients wait in the backlog instead of running the relay out of fds. The soft limit is
/// raised to the hard one first (the relay uses epoll, never select(), so the 1,024 soft
/// default is only there for other programs; systemd's advice).
fn default_max_conns() -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let soft = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Ok((soft, _)) => soft,
        Err(_) => 1024,
    };
    (soft.saturating_sub(FDS_RESERVED) / FDS_PER_CONN).clamp(1, 1 << 20) as usize
}

/// The session's stdout (`-` as a side) stopped taking bytes (EPIPE): exit 141, as a
/// pipeline's writer would.
fn writes_stdout_broke(cfg: &RelayConfig, r: &ConnReport) -> bool {
    [&cfg.a, &cfg.b]
        .iter()
        .position(|e| matches!(e, Endpoint::Stdio))
        .is_some_and(|side| r.end.broke_pipe_writing(Side::of(side)))
}

fn policy(via: Via) -> anyhow::Result<Policy> {
    match via {
        Via::Auto => Ok(Policy::Auto),
        Via::Forced(DataPath::Splice) => Ok(Policy::Splice),
        Via::Forced(DataPath::Userspace) => Ok(Policy::Userspace),
        Via::Forced(other) => Err(UsageError(format!(
            "--via {other}: relay moves streams with splice or userspace"
        ))
        .into()),
    }
}

/// `--limit`, `--limit-total` pace streams; datagrams are not paced (a UDP relay would
/// have to drop or queue them), so a datagram relay refuses them rather than ignore them.
fn check_limit(cfg: &RelayConfig, limit: Option<u64>) -> anyhow::Result<()> {
    if limit.is_some() && (is_datagram(cfg) || framed::is_framed(cfg)) {
        return Err(UsageError(
            "--limit/--limit-total pace a stream relay's connections; a UDP relay passes \
             datagrams unpaced (use a shaper such as tc to hold UDP to a rate)"
                .into(),
        )
        .into());
    }
    Ok(())
}

/// A datagram relay: `udp-listen:` on one side, `udp:` on the other.
fn is_datagram(cfg: &RelayConfig) -> bool {
    matches!(
        (&cfg.a, &cfg.b),
        (Endpoint::UdpListen { .. }, Endpoint::Udp { .. })
            | (Endpoint::Udp { .. }, Endpoint::UdpListen { .. })
    )
}

/// UDP relays datagram for datagram: `udp-listen:` with `udp:`, each datagram whole; with
/// a stream on the other side, `-`/`fd:N` (a read is a datagram) or `frame=len16` keeps
/// their bounds ([`framed`]; socat just concatenates them): anything else is refused
/// rather than guessed.
fn check_datagram_sides(cfg: &RelayConfig) -> anyhow::Result<()> {
    let udp = |e: &Endpoint| matches!(e, Endpoint::Udp { .. } | Endpoint::UdpListen { .. });
    if !udp(&cfg.a) && !udp(&cfg.b) {
        if let Some(e) = [&cfg.a, &cfg.b].into_iter().find(|e| e.frame().is_some()) {
            return Err(UsageError(format!(
                "relay '{e}': option 'frame' frames datagrams; the other side must be udp: or \
                 udp-listen:"
            ))
            .into());
        }
        return Ok(());
    }
    if framed::is_framed(cfg) {
        return framed::check(cfg);
    }
    for e in [&cfg.a, &cfg.b] {
        if e.datagram_size().is_some() {
            return Err(UsageError(format!(
                "relay '{e}': option 'size' cuts a stream into datagrams; a relay passes each \
                 datagram on whole"
            ))
            .into());
        }
    }
    Ok(())
}

fn check_sides(cfg: &RelayConfig) -> anyhow::Result<()> {
    check_datagram_sides(cfg)?;
    for (name, e) in [("A", &cfg.a), ("B", &cfg.b)] {
        if matches!(e, Endpoint::File { .. }) {
            return Err(UsageError(format!(
                "relay {name} '{e}': a file is one-way; relay needs a socket, '-' or fd:N \
                 (use `zerocat pipe` to move a file)"
            ))
            .into());
        }
        if matches!(e, Endpoint::S3 { .. }) {
            return Err(UsageError(format!(
                "relay {name} '{e}': an S3 object is one-way; relay needs a socket, '-' or \
                 fd:N (use `zerocat pipe` to move an object)"
            ))
            .into());
        }
    }
    if cfg.a.listens() && cfg.b.listens() {
        return Err(UsageError(
            "relay: both sides listen; one side must connect (tcp:, unix:), or be '-'".into(),
        )
        .into());
    }
    // `- fd:N` relays an inherited connected stream socket (nc's connected stream, a
    // socket a parent passed); `- -`, or an fd that is no such socket, has nothing to
    // relay between.
    let connected_socket = |e: &Endpoint| match e {
        // fstat of a number: a closed fd is simply not a socket.
        Endpoint::Fd(n) if !e.listens() => nix::sys::stat::fstat(*n)
            .is_ok_and(|st| FdKind::from_mode(st.st_mode) == FdKind::Socket),
        _ => false,
    };
    let inherited = |e: &Endpoint| matches!(e, Endpoint::Stdio | Endpoint::Fd(_)) && !e.listens();
    if inherited(&cfg.a)
        && inherited(&cfg.b)
        && !connected_socket(&cfg.a)
        && !connected_socket(&cfg.b)
    {
        return Err(
            UsageError("relay: neither side is a socket to connect or listen on".into()).into(),
        );
    }
    let inherited_listener = matches!(cfg.a, Endpoint::Systemd { .. } | Endpoint::FdTls { .. })
        || matches!(cfg.a, Endpoint::Fd(_) if cfg.a.listens());
    if cfg.exit_idle.is_some() && !inherited_listener {
        return Err(UsageError(
            "--exit-idle: the relay exits when idle only with an inherited listener as A              (systemd:, fd:N), which stays open for the next activation; a listener of its              own would drop the clients in its backlog"
                .into(),
        )
        .into());
    }
    if cfg.max_conns == Some(0) {
        return Err(UsageError("--max-conns must be at least 1".into()).into());
    }
    Ok(())
}

/// A connector's socket options, tried on a socket of its first address's family.
fn check_socket_options(endpoint: &Endpoint) -> anyhow::Result<()> {
    let asks = endpoint.sock_opts().is_some_and(|s| s.any());
    if !asks || !matches!(endpoint, Endpoint::Tcp { .. }) {
        return Ok(());
    }
    let (addrs, opts) = endpoint
        .connect_addrs()
        .with_context(|| format!("cannot use '{endpoint}'"))?;
    if let Some(addr) = addrs.iter().find_map(inet_addr) {
        opts.sock
            .probe(&addr, true)
            .with_context(|| format!("cannot use '{endpoint}'"))?;
    }
    Ok(())
}

/// An IPv4 or IPv6 socket address, as std writes it.
fn inet_addr(addr: &nix::sys::socket::SockaddrStorage) -> Option<std::net::SocketAddr> {
    addr.as_sockaddr_in()
        .map(|v4| std::net::SocketAddr::V4((*v4).into()))
        .or_else(|| {
            addr.as_sockaddr_in6()
                .map(|v6| std::net::SocketAddr::V6((*v6).into()))
        })
}

/// A side, set up; a `proxy` listener waits `header_deadline` (or 5 s) for a PROXY header.
/// `listens`: the other side is a listener (a command's children then get process groups
/// of their own).
fn spec(
    endpoint: &Endpoint,
    header_deadline: Option<Duration>,
    listens: bool,
) -> anyhow::Result<Spec> {
    Ok(match endpoint {
        e if e.listens() => {
            let mut listener = e.listen_within(header_deadline)?;
            listener.keep_tls_in_loop();
            Spec::Listen(listener)
        }
        Endpoint::Tcp { .. } | Endpoint::Unix { .. } => {
            let (addrs, opts) = endpoint
                .connect_addrs()
                .with_context(|| format!("cannot use '{endpoint}'"))?;
            let target = match endpoint {
                Endpoint::Tcp { host, port, .. } => Some((host.clone(), *port)),
                _ => None,
            };
            let tls = match (&opts.tls, &target) {
                (Some(tls), Some((host, _))) => {
                    let config = crate::endpoint::tls::client_config(tls)
                        .with_context(|| format!("{endpoint}"))?;
                    if tls.insecure {
                        eprintln!(
                            "{}",
                            crate::endpoint::tls::insecure_warning(&endpoint.to_string())
                        );
                    }
                    Some((config, tls.sni.clone().unwrap_or_else(|| host.clone())))
                }
                _ => None,
            };
            Spec::Dial {
                uri: endpoint.to_string(),
                addrs,
                opts,
                target,
                tls,
            }
        }
        Endpoint::Command(spec) => Spec::Command {
            uri: endpoint.to_string(),
            spec: spec.clone(),
            own_group: listens,
        },
        other => Spec::Inherited(other.clone()),
    })
}

/// "; each direction limited to 1.00 MiB/s; all together to 10.0 MiB/s", or nothing.
fn pace_words(limit: Option<u64>, total: Option<u64>) -> String {
    let mut s = String::new();
    if let Some(rate) = limit {
        let _ = write!(s, "; each direction limited to {}/s", human_bytes(rate));
    }
    if let Some(rate) = total {
        let _ = write!(
            s,
            "; all connections together limited to {}/s each way",
            human_bytes(rate)
        );
    }
    s
}

fn datagram_plan(cfg: &RelayConfig) -> String {
    let mut s = format!(
        "plan: relay {} <-> {} via userspace: datagrams, each whole, {} per recvmmsg/sendmmsg; \
         a session (a socket connected to the target) per client address, ended after {:.3} s \
         without a datagram",
        cfg.a,
        cfg.b,
        datagram::BATCH,
        cfg.idle_timeout
            .unwrap_or(datagram::SESSION_IDLE)
            .as_secs_f64()
    );
    if let Some(n) = cfg.max_conns {
        let _ = write!(s, "; at most {n} sessions");
    }
    if cfg.once {
        s.push_str("; --once: until the first session ends");
    }
    if let Some(path) = &cfg.log {
        let _ = write!(s, "; a log line per session into {}", path.display());
    }
    s
}

fn plan(cfg: &RelayConfig, policy: Policy) -> String {
    let paths = match policy {
        Policy::Auto => {
            "userspace, then splice for a bulk stream (a read of 64 KiB or more), per direction"
        }
        Policy::Splice => "splice",
        Policy::Userspace => "userspace",
    };
    let mut s = format!(
        "plan: relay {} <-> {} via {paths}; pipes of 64 KiB, grown to {} for busy streams, {} in all at most; buffers of {}, {} in all, then {} of a direction's own",
        cfg.a,
        cfg.b,
        human_bytes(pool::PIPE_GROWN as u64),
        human_bytes(pool::PIPE_BUDGET as u64),
        human_bytes(pool::BUFFER_SIZE as u64),
        human_bytes(pool::BUFFER_BUDGET as u64),
        human_bytes(pool::ALLOWANCE as u64),
    );
    if let Some(n) = cfg.max_conns {
        let _ = write!(s, "; at most {n} connections");
    }
    if let Some(d) = cfg.idle_timeout {
        let _ = write!(s, "; idle timeout {:.3} s", d.as_secs_f64());
    }
    if let Some(d) = cfg.connect_timeout {
        let _ = write!(s, "; connect timeout {:.3} s", d.as_secs_f64());
    }
    if let Some(d) = cfg.linger {
        let _ = write!(s, "; linger {:.3} s", d.as_secs_f64());
    }
    if cfg.grace != GRACE {
        let _ = write!(s, "; grace {:.3} s", cfg.grace.as_secs_f64());
    }
    // What runs: one loop for one session or --once, whatever was asked.
    match cfg.workers {
        Some(n) if !(cfg.a.listens() || cfg.b.listens()) => {
            let _ = write!(
                s,
                "; --workers {n}: 1 event loop (one session, no listener)"
            );
        }
        Some(n) if cfg.once => {
            let _ = write!(s, "; --workers {n}: 1 event loop (--once)");
        }
        Some(n) => {
            let _ = write!(s, "; {n} workers (with a listener)");
        }
        None => {}
    }
    if let Some(path) = &cfg.log {
        let _ = write!(s, "; a log line per connection into {}", path.display());
    }
    s
}
