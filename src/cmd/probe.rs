//! `zerocat probe TARGET...`: is something answering there? (nc -z, wait-for-it.) Each
//! target is connected to and closed at once (a `tls:` one after its handshake); targets
//! are tried in parallel, non-blocking, at most [`IN_FLIGHT`] at a time, from one poll loop.
//! `--wait` repeats the targets not open yet until all are, or the time runs out.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, SockaddrLike, SockaddrStorage};

use crate::endpoint::tls::{self, Handshake, PeerSummary};
use crate::endpoint::Endpoint;
use crate::exit::{ExitCode, UsageError};
use crate::options::Options;
use crate::report::{JsonObject, StatsFormat};
use crate::units::human_duration;

#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// `tcp:`, `tls:` and `unix:` connectors, one per argument.
    pub targets: Vec<Target>,
    /// `--wait`: retry the targets not open yet until this long has passed.
    pub wait: Option<Duration>,
    /// Each try of one target (connect, and a `tls:` handshake) ends after this long.
    pub connect_timeout: Duration,
}

/// `--connect-timeout` when none is given: a port that drops SYNs (a firewall) would
/// otherwise hold a try for the kernel's two minutes of retransmissions.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections being made at once (over all threads). Enough that 1,000 loopback ports cost
/// a few round trips of the poll loop, few enough for the default open-file limit of 1,024.
const IN_FLIGHT: usize = 256;
/// Targets a thread takes at least: below that, one thread (a healthcheck's one port starts
/// no thread); above, one poll loop per CPU, at most [`MAX_THREADS`]. A refused loopback
/// port is all kernel work (socket, SYN, RST), so a second CPU halves a range's time
/// (bench/NOTEBOOK.md#probe-threads-and-reused-sockets).
const PER_THREAD_MIN: usize = 64;
const MAX_THREADS: usize = 4;
/// Under `--wait`, the pause between two rounds (wait-for-it's is 1 s; a container's start
/// is worth the quarter).
const WAIT_PAUSE: Duration = Duration::from_millis(250);
/// The most ports one range may name (1-65535).
const PORT_MAX: u32 = 65_535;

/// One TARGET argument: a connector and, for a `tcp:`/`tls:` range, its last port. A range
/// stays a range until a try needs its port: as an endpoint a port, 1,000 ports were 600 KB,
/// copied at each step of the start and a third of `probe -q`'s page faults
/// (bench/NOTEBOOK.md#probe-start-up).
#[derive(Debug, Clone)]
pub struct Target {
    /// The endpoint, with a range's first port.
    pub endpoint: Endpoint,
    /// A range's last port; None for one target.
    pub last_port: Option<u16>,
}

impl Target {
    /// How many targets this argument names: one, or its range's ports.
    fn count(&self) -> usize {
        match (&self.endpoint, self.last_port) {
            (Endpoint::Tcp { port, .. }, Some(last)) => usize::from(last - port) + 1,
            _ => 1,
        }
    }

    /// The port of its `nth` target (0 where it names no port).
    fn port(&self, nth: usize) -> u16 {
        match &self.endpoint {
            Endpoint::Tcp { port, .. } => *port + nth as u16,
            _ => 0,
        }
    }
}

/// One target of the run: its argument (an index of [`ProbeConfig::targets`]) and port.
#[derive(Debug, Clone, Copy)]
struct Spot {
    arg: usize,
    port: u16,
}

/// What became of one try at one target.
#[derive(Debug, Clone)]
pub enum State {
    /// Connected (and, for `tls:`, the handshake completed; boxed: a range's thousand
    /// answers need not each hold room for it).
    Open(Option<Box<PeerSummary>>),
    /// Nobody listens: ECONNREFUSED, or no socket at a unix path (ENOENT).
    Refused(Errno),
    /// No answer within `--connect-timeout` (a dropped SYN, a full backlog, a stalled
    /// handshake).
    Timeout,
    /// No route: EHOSTUNREACH, ENETUNREACH.
    Unreachable(Errno),
    /// Anything else: a name that does not resolve, a TLS handshake refused.
    Failed(String),
}

impl State {
    fn word(&self) -> &'static str {
        match self {
            State::Open(_) => "open",
            State::Refused(_) => "refused",
            State::Timeout => "timeout",
            State::Unreachable(_) => "unreachable",
            State::Failed(_) => "failed",
        }
    }

    fn of_errno(errno: Errno) -> State {
        match errno {
            Errno::ECONNREFUSED | Errno::ENOENT | Errno::ECONNRESET => State::Refused(errno),
            Errno::EHOSTUNREACH | Errno::ENETUNREACH | Errno::EADDRNOTAVAIL => {
                State::Unreachable(errno)
            }
            Errno::ETIMEDOUT => State::Timeout,
            other => State::Failed(format!("{} ({other:?})", other.desc())),
        }
    }
}

/// One target's answer: its last try, how long that took, and how many tries it had.
#[derive(Debug, Clone)]
struct Answer {
    state: State,
    seconds: f64,
    tries: u32,
}

/// `tcp:HOST:LO-HI` (and `tls:`): a target per port. Anything else is one target, which
/// must be a connector probe can try. Errors name the argument (usage errors).
pub fn parse_target(arg: &str) -> Result<Target, String> {
    let range = port_range(arg)?;
    let (text, last_port) = match &range {
        Some((text, hi)) => (text.as_str(), Some(*hi)),
        None => (arg, None),
    };
    let endpoint = crate::endpoint::parse(text).map_err(|e| e.to_string())?;
    check_target(arg, &endpoint)?;
    Ok(Target {
        endpoint,
        last_port,
    })
}

/// A range's endpoint text with its first port, and its last port; None when `arg` names no
/// range. `tcp:h:30-20`, `tcp:h:0-10`, `tcp:h:1-70000` are errors.
fn port_range(arg: &str) -> Result<Option<(String, u16)>, String> {
    let Some((word, rest)) = arg.split_once(':') else {
        return Ok(None);
    };
    if !["tcp", "tls"].contains(&word.to_ascii_lowercase().as_str()) {
        return Ok(None);
    }
    let (address, options) = rest.split_at(rest.find(',').unwrap_or(rest.len()));
    let Some((host, ports)) = address.rsplit_once(':') else {
        return Ok(None);
    };
    let Some((lo, hi)) = ports.split_once('-') else {
        return Ok(None);
    };
    let number = |text: &str| -> Result<u32, String> {
        match text.parse::<u32>() {
            Ok(n) if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
            _ => Err(format!(
                "'{arg}': '{ports}' is not a port range; expected LO-HI, such as 20-30"
            )),
        }
    };
    let (lo, hi) = (number(lo)?, number(hi)?);
    if lo > hi {
        return Err(format!(
            "'{arg}': the port range {lo}-{hi} is backwards; write {hi}-{lo}"
        ));
    }
    if lo == 0 || hi > PORT_MAX {
        return Err(format!(
            "'{arg}': the port range {lo}-{hi} goes past the ports there are (1-{PORT_MAX})"
        ));
    }
    Ok(Some((format!("{word}:{host}:{lo}{options}"), hi as u16)))
}

/// What probe can try: a `tcp:`, `tls:` or `unix:` connector, without the options that
/// would make the try something else than "is it answering" (a proxy hop, a PROXY header,
/// retries: `--wait` is probe's own).
fn check_target(arg: &str, endpoint: &Endpoint) -> Result<(), String> {
    let connect = match endpoint {
        Endpoint::Tcp { connect, .. } | Endpoint::Unix { connect, .. } => connect,
        other => {
            return Err(format!(
                "'{arg}': probe connects to tcp:HOST:PORT (a range: tcp:HOST:20-30), \
                 tls:HOST:PORT and unix:PATH; this is {}",
                other.scheme()
            ))
        }
    };
    let refused = [
        (
            connect.via.is_some(),
            "socks5=/connect= (probe connects directly)",
        ),
        (connect.proxy.is_some(), "proxy= (probe sends no byte)"),
        (
            connect.retry > 0 || connect.interval.is_some(),
            "retry=/interval= (probe's --wait retries)",
        ),
        (connect.mptcp, "mptcp"),
    ];
    match refused.iter().find(|(set, _)| *set) {
        Some((_, what)) => Err(format!("'{arg}': probe does not take {what}")),
        None => Ok(()),
    }
}

pub fn run(opts: &Options, cfg: &ProbeConfig) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let deadline = cfg.wait.map(|wait| started + wait);
    let targets = Targets::prepare(&cfg.targets)?;
    let mut answers: Vec<Option<Answer>> = vec![None; targets.spots.len()];
    loop {
        let pending: Vec<usize> = (0..targets.spots.len())
            .filter(|&i| {
                !matches!(
                    answers[i],
                    Some(Answer {
                        state: State::Open(_),
                        ..
                    })
                )
            })
            .collect();
        if pending.is_empty() {
            break;
        }
        // The last try of a --wait ends with it.
        let limit = match deadline {
            Some(deadline) => cfg
                .connect_timeout
                .min(deadline.saturating_duration_since(Instant::now()))
                .max(Duration::from_millis(1)),
            None => cfg.connect_timeout,
        };
        let round = run_round(&targets, &pending, limit)?;
        for (i, state, seconds) in round {
            let tries = answers[i].as_ref().map_or(0, |a| a.tries) + 1;
            if opts.verbose && deadline.is_some() && !matches!(state, State::Open(_)) {
                eprintln!(
                    "zerocat: {}: {} (try {tries}), trying again",
                    targets.endpoint(cfg, i),
                    state.word()
                );
            }
            answers[i] = Some(Answer {
                state,
                seconds,
                tries,
            });
        }
        let Some(deadline) = deadline else { break };
        let all_open = answers.iter().all(|a| {
            matches!(
                a,
                Some(Answer {
                    state: State::Open(_),
                    ..
                })
            )
        });
        let left = deadline.saturating_duration_since(Instant::now());
        if all_open || left.is_zero() {
            break;
        }
        std::thread::sleep(WAIT_PAUSE.min(left));
        if crate::sys::process::interrupted() {
            return Ok(ExitCode::Interrupted);
        }
    }
    let mut open = 0;
    // One write for all the lines: a range's thousand lines are not a thousand writes.
    let mut lines = String::new();
    for (i, answer) in answers.iter().enumerate() {
        let answer = answer.as_ref().expect("every target tried at least once");
        open += usize::from(matches!(answer.state, State::Open(_)));
        if opts.quiet && opts.stats == StatsFormat::Text {
            continue;
        }
        let endpoint = targets.endpoint(cfg, i);
        lines += &match opts.stats {
            StatsFormat::Text => text_line(&endpoint, answer, cfg),
            StatsFormat::Json => json_line(&endpoint, answer),
        };
        lines.push('\n');
    }
    if !lines.is_empty() {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(lines.as_bytes()).and_then(|()| out.flush()) {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return Ok(ExitCode::BrokenPipe);
            }
            return Err(anyhow::anyhow!("cannot write to stdout: {e}"));
        }
    }
    if opts.verbose {
        eprintln!(
            "zerocat: {open} of {} open in {}",
            answers.len(),
            human_duration(started.elapsed().as_secs_f64())
        );
    }
    Ok(match open == answers.len() {
        true => ExitCode::Success,
        false => ExitCode::Failure,
    })
}

/// "tcp:127.0.0.1:22 open (0.21 ms)", "tls:localhost:443 open (3.1 ms): TLSv1.3,
/// subject CN=localhost, expires 2027-01-01 00:00:00 UTC", "tcp:…:23 refused (0.1 ms):
/// ECONNREFUSED", "tcp:…:9 timeout (5.00 s): no answer within 5.00 s".
fn text_line(endpoint: &Endpoint, answer: &Answer, cfg: &ProbeConfig) -> String {
    let mut line = format!(
        "{endpoint} {} ({})",
        answer.state.word(),
        human_duration(answer.seconds)
    );
    let detail = match &answer.state {
        State::Open(None) => None,
        State::Open(Some(peer)) => Some(format!(
            "{} {}, subject {}, expires {}",
            peer.version,
            peer.cipher,
            peer.subject.as_deref().unwrap_or("(none)"),
            peer.not_after.as_deref().unwrap_or("(unknown)")
        )),
        State::Refused(errno) | State::Unreachable(errno) => Some(format!("{errno:?}")),
        State::Timeout => Some(format!(
            "no answer within {}",
            human_duration(cfg.connect_timeout.as_secs_f64())
        )),
        State::Failed(why) => Some(why.clone()),
    };
    if let Some(detail) = detail {
        line.push_str(": ");
        line.push_str(&detail);
    }
    if answer.tries > 1 {
        line.push_str(&format!(" (after {} tries)", answer.tries));
    }
    line
}

/// One JSON object: target, state, seconds, tries, errno or reason, and tls.
fn json_line(endpoint: &Endpoint, answer: &Answer) -> String {
    let mut o = JsonObject::new();
    o.str("target", &endpoint.to_string())
        .str("state", answer.state.word())
        .float("seconds", answer.seconds)
        .num("tries", u64::from(answer.tries));
    match &answer.state {
        State::Open(Some(peer)) => {
            let mut t = JsonObject::new();
            t.str("version", peer.version)
                .str("cipher", &peer.cipher)
                .str_or_null("subject", peer.subject.as_deref())
                .str_or_null("not_after", peer.not_after.as_deref());
            o.raw("tls", &t.finish());
        }
        State::Refused(errno) | State::Unreachable(errno) => {
            o.str("errno", &format!("{errno:?}"));
        }
        State::Failed(why) => {
            o.str("reason", why);
        }
        State::Open(None) | State::Timeout => {}
    }
    o.finish()
}

/// The targets, resolved once (a name once, whatever the number of its ports), with each
/// `tls:` one's client configuration.
struct Targets {
    /// One per argument.
    each: Vec<Prepared>,
    /// Every target of the run, a range's ports one each.
    spots: Vec<Spot>,
}

struct Prepared {
    /// The addresses to try in order (a `tcp:` one's port 0: each spot has its own), or
    /// why there are none.
    addrs: Result<Vec<SockaddrStorage>, String>,
    /// A `tls:` target's configuration and the name it verifies.
    tls: Option<(Arc<rustls::ClientConfig>, String)>,
}

impl Targets {
    fn prepare(targets: &[Target]) -> anyhow::Result<Targets> {
        // A few arguments: a list, not a hash map (whose keys would ask for randomness).
        let mut resolved: Vec<(&str, Result<Vec<SockaddrStorage>, String>)> = Vec::new();
        let mut configs: Vec<(crate::endpoint::TlsOpts, Arc<rustls::ClientConfig>)> = Vec::new();
        let mut each = Vec::with_capacity(targets.len());
        let mut spots = Vec::with_capacity(targets.iter().map(Target::count).sum());
        for (arg, target) in targets.iter().enumerate() {
            let endpoint = &target.endpoint;
            spots.extend((0..target.count()).map(|nth| Spot {
                arg,
                port: target.port(nth),
            }));
            let (addrs, tls) = match endpoint {
                Endpoint::Tcp { host, connect, .. } => {
                    let addrs = match resolved.iter().find(|(h, _)| h == host) {
                        Some((_, addrs)) => addrs.clone(),
                        None => {
                            let addrs = resolve(host);
                            resolved.push((host, addrs.clone()));
                            addrs
                        }
                    };
                    let tls = match &connect.tls {
                        None => None,
                        Some(opts) => {
                            let config = match configs.iter().find(|(o, _)| o == opts) {
                                Some((_, config)) => config.clone(),
                                None => {
                                    let config = tls::client_config(opts)
                                        .map_err(|e| UsageError(format!("{endpoint}: {e:#}")))?;
                                    if opts.insecure {
                                        eprintln!(
                                            "{}",
                                            tls::insecure_warning(&endpoint.to_string())
                                        );
                                    }
                                    configs.push((opts.clone(), config.clone()));
                                    config
                                }
                            };
                            Some((config, opts.sni.clone().unwrap_or_else(|| host.clone())))
                        }
                    };
                    (addrs, tls)
                }
                _ => (
                    endpoint
                        .connect_addrs()
                        .map(|(addrs, _)| addrs)
                        .map_err(|e| format!("{e:#}")),
                    None,
                ),
            };
            each.push(Prepared { addrs, tls });
        }
        Ok(Targets { each, spots })
    }

    /// Target `i`'s argument.
    fn prepared(&self, i: usize) -> &Prepared {
        &self.each[self.spots[i].arg]
    }

    /// Target `i`'s address `addr`, with its port.
    fn sockaddr(&self, i: usize, addr: usize) -> SockaddrStorage {
        match &self.prepared(i).addrs {
            Ok(addrs) => with_port(addrs[addr], self.spots[i].port),
            Err(_) => unreachable!("a try starts at an address there is"),
        }
    }

    /// Target `i` as an endpoint, for its line.
    fn endpoint(&self, cfg: &ProbeConfig, i: usize) -> Endpoint {
        let spot = self.spots[i];
        let mut one = cfg.targets[spot.arg].endpoint.clone();
        if let Endpoint::Tcp { port, .. } = &mut one {
            *port = spot.port;
        }
        one
    }
}

/// A host's addresses (port 0; [`with_port`] sets it), or why it has none.
fn resolve(host: &str) -> Result<Vec<SockaddrStorage>, String> {
    use std::net::ToSocketAddrs;
    match (host, 0).to_socket_addrs() {
        Ok(addrs) => {
            let addrs: Vec<SockaddrStorage> = addrs.map(SockaddrStorage::from).collect();
            match addrs.is_empty() {
                true => Err(format!("cannot resolve {host}: no addresses")),
                false => Ok(addrs),
            }
        }
        Err(e) => Err(format!("cannot resolve {host}: {e}")),
    }
}

/// Binds `fd` (a TCP socket of `family`) to a port of the wildcard address that the kernel
/// picked for a throwaway socket ([`Round::pin`]): the port, where it is now bound. The
/// port was free a moment ago; one taken since (EADDRINUSE) leaves `fd` unbound, as is
/// any other family.
fn pin_source_port(fd: &OwnedFd, family: AddressFamily) -> Option<u16> {
    let any = match family {
        AddressFamily::Inet => std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
        AddressFamily::Inet6 => std::net::SocketAddr::from(([0u16; 8], 0)),
        _ => return None,
    };
    let throwaway = socket::socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).ok()?;
    socket::bind(throwaway.as_raw_fd(), &SockaddrStorage::from(any)).ok()?;
    let picked: SockaddrStorage = socket::getsockname(throwaway.as_raw_fd()).ok()?;
    drop(throwaway);
    let port = match (picked.as_sockaddr_in(), picked.as_sockaddr_in6()) {
        (Some(v4), _) => v4.port(),
        (_, Some(v6)) => v6.port(),
        _ => return None,
    };
    socket::bind(fd.as_raw_fd(), &picked).ok().map(|()| port)
}

/// An inet address with `port`; another kind as it is.
fn with_port(addr: SockaddrStorage, port: u16) -> SockaddrStorage {
    if let Some(v4) = addr.as_sockaddr_in() {
        return SockaddrStorage::from(std::net::SocketAddr::from((v4.ip(), port)));
    }
    if let Some(v6) = addr.as_sockaddr_in6() {
        let mut v6 = std::net::SocketAddrV6::from(*v6);
        v6.set_port(port);
        return SockaddrStorage::from(std::net::SocketAddr::V6(v6));
    }
    addr
}

/// One try at each of the targets `which`, in parallel: one poll loop, or one a thread when
/// there are many ([`PER_THREAD_MIN`]; the calling thread is one of them), the
/// [`IN_FLIGHT`] connections shared among them. The loops take the next target from one
/// cursor, so a loop the scheduler holds back leaves the rest to the others.
fn run_round(
    targets: &Targets,
    which: &[usize],
    limit: Duration,
) -> anyhow::Result<Vec<(usize, State, f64)>> {
    let next = AtomicUsize::new(0);
    let threads = match which.len() / PER_THREAD_MIN {
        // A healthcheck's port asks nothing of the CPUs (available_parallelism reads cgroup
        // files).
        0 | 1 => 1,
        many => {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            many.min(cpus).min(MAX_THREADS)
        }
    };
    let in_flight = IN_FLIGHT / threads;
    if threads == 1 {
        return Round::run(targets, which, &next, limit, in_flight);
    }
    std::thread::scope(|scope| {
        let others: Vec<_> = (1..threads)
            .map(|_| scope.spawn(|| Round::run(targets, which, &next, limit, in_flight)))
            .collect();
        let mut done = Round::run(targets, which, &next, limit, in_flight)?;
        for one in others {
            done.extend(one.join().expect("a probe thread panicked")?);
        }
        Ok(done)
    })
}

/// One try at some of the targets, in parallel.
struct Round<'a> {
    targets: &'a Targets,
    limit: Duration,
    flying: Vec<Try>,
    done: Vec<(usize, State, f64)>,
    /// TCP sockets whose connect was refused, unconnected again and ready for the next port:
    /// socket(2) and close(2) were a third of a refused port's cost. (Linux: a second
    /// connect(2) on a refused socket returns the error and leaves it unconnected.) With
    /// the port each is pinned to ([`Round::pin`]).
    spare: Vec<(AddressFamily, OwnedFd, Option<u16>)>,
    /// A new TCP socket is bound to a source port of its own (one the kernel picked for a
    /// throwaway socket), which it keeps from one refused connect to the next: the kernel
    /// then looks for no free port and makes and frees no bind bucket at each connect, a
    /// sixth of a refused port's CPU (bench/NOTEBOOK.md#probe-start-up). For a range, not
    /// for a few targets, where the throwaway socket would cost more than it saves.
    pin: bool,
}

/// A try in flight.
struct Try {
    /// The target's index in [`Targets::spots`].
    target: usize,
    /// The address being tried, of the target's list.
    addr: usize,
    fd: OwnedFd,
    /// The source port `fd` is bound to ([`Round::pin`]).
    pinned: Option<u16>,
    started: Instant,
    /// Connected, and the TLS handshake under way (boxed: the poll loop moves tries).
    shake: Option<Box<Handshake>>,
}

impl<'a> Round<'a> {
    /// Tries the targets of `which` that `next` hands it, until none is left.
    fn run(
        targets: &'a Targets,
        which: &[usize],
        next: &AtomicUsize,
        limit: Duration,
        in_flight: usize,
    ) -> anyhow::Result<Vec<(usize, State, f64)>> {
        let mut round = Round {
            targets,
            limit,
            flying: Vec::new(),
            done: Vec::with_capacity(which.len()),
            spare: Vec::new(),
            pin: which.len() >= PER_THREAD_MIN,
        };
        let mut more = true;
        loop {
            while more && round.flying.len() < in_flight.max(1) {
                match which.get(next.fetch_add(1, Ordering::Relaxed)) {
                    Some(&target) => round.start(target, 0, Instant::now()),
                    None => more = false,
                }
            }
            if round.flying.is_empty() && !more {
                break;
            }
            if round.flying.is_empty() {
                continue;
            }
            round.step()?;
        }
        Ok(round.done)
    }

    /// Starts a try at `target`'s address `addr` (the next one after a failed address).
    fn start(&mut self, target: usize, addr: usize, started: Instant) {
        self.start_with(target, addr, started, self.pin)
    }

    /// [`Round::start`], on a pinned socket where `pin` says so and one can be had.
    fn start_with(&mut self, target: usize, addr: usize, started: Instant, pin: bool) {
        if let Err(why) = &self.targets.prepared(target).addrs {
            return self.finish(target, State::Failed(why.clone()), started);
        }
        let sockaddr = self.targets.sockaddr(target, addr);
        let family = sockaddr.family().unwrap_or(AddressFamily::Unix);
        // Never from the port it goes to: on this host that would be TCP's self-connect,
        // an answer from nobody.
        let port = self.targets.spots[target].port;
        let fits = |pinned: Option<u16>| pinned.is_none() || (pin && pinned != Some(port));
        let spare = self
            .spare
            .iter()
            .rposition(|&(f, _, pinned)| f == family && fits(pinned));
        let (fd, pinned) = match spare.map(|i| self.spare.swap_remove(i)) {
            Some((_, fd, pinned)) => (fd, pinned),
            None => {
                let flags = SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC;
                match socket::socket(family, SockType::Stream, flags, None) {
                    Ok(fd) => {
                        let pinned = pin.then(|| pin_source_port(&fd, family)).flatten();
                        if !fits(pinned) {
                            self.spare.push((family, fd, pinned));
                            return self.start_with(target, addr, started, false);
                        }
                        (fd, pinned)
                    }
                    Err(errno) => return self.finish(target, State::of_errno(errno), started),
                }
            }
        };
        let attempt = Try {
            target,
            addr,
            fd,
            pinned,
            started,
            shake: None,
        };
        match socket::connect(attempt.fd.as_raw_fd(), &sockaddr) {
            Ok(()) => self.connected(attempt),
            // The pinned port meets a connection to the same place (one of ours in
            // TIME_WAIT): this target again from a port the kernel picks.
            Err(Errno::EADDRNOTAVAIL | Errno::EADDRINUSE) if attempt.pinned.is_some() => {
                drop(attempt);
                self.start_with(target, addr, started, false)
            }
            // On loopback the answer (SYN-ACK or RST) is in before connect returns: asked
            // at once, it needs no poll.
            Err(Errno::EINPROGRESS) => self.settle(attempt, None),
            // A unix listener's full backlog: no answer now, as a dropped SYN.
            Err(Errno::EAGAIN) => self.finish(target, State::Timeout, started),
            Err(errno) => self.failed(attempt.target, attempt.addr, started, errno),
        }
    }

    /// The connection is up: open, or on to the TLS handshake.
    fn connected(&mut self, mut attempt: Try) {
        let Some((config, name)) = &self.targets.prepared(attempt.target).tls else {
            return self.finish(attempt.target, State::Open(None), attempt.started);
        };
        match Handshake::client(config, name) {
            Ok(shake) => attempt.shake = Some(Box::new(shake)),
            Err(why) => return self.finish(attempt.target, State::Failed(why), attempt.started),
        }
        self.shake(attempt);
    }

    /// Moves a TLS handshake on; done, failed, or back in flight.
    fn shake(&mut self, mut attempt: Try) {
        let shake = attempt.shake.as_mut().expect("a handshake under way");
        match shake.advance(attempt.fd.as_fd()) {
            Ok(true) => {
                let peer = shake.peer();
                self.finish(
                    attempt.target,
                    State::Open(Some(Box::new(peer))),
                    attempt.started,
                )
            }
            Ok(false) => self.flying.push(attempt),
            Err(why) => self.finish(attempt.target, State::Failed(why), attempt.started),
        }
    }

    /// A connect failed (its socket closed or kept spare): the target's next address, or
    /// its answer.
    fn failed(&mut self, target: usize, addr: usize, started: Instant, errno: Errno) {
        let addrs = self.targets.prepared(target).addrs.as_ref();
        let more = addrs.is_ok_and(|a| addr + 1 < a.len());
        if more && started.elapsed() < self.limit {
            return self.start(target, addr + 1, started);
        }
        self.finish(target, State::of_errno(errno), started)
    }

    fn finish(&mut self, target: usize, state: State, started: Instant) {
        self.done
            .push((target, state, started.elapsed().as_secs_f64()));
    }

    /// Where a connect stands: asked right after connect(2) said EINPROGRESS (`polled`
    /// None: on loopback the answer, SYN-ACK or RST, is in by then), or after poll said it
    /// ended. A TCP socket is asked by a second connect(2), which answers its error and
    /// leaves it unconnected: a refused one is kept for the next port.
    fn settle(&mut self, attempt: Try, polled: Option<PollFlags>) {
        let sockaddr = self.targets.sockaddr(attempt.target, attempt.addr);
        let family = sockaddr.family();
        let inet = matches!(family, Some(AddressFamily::Inet | AddressFamily::Inet6));
        if inet && polled.is_none_or(|revents| revents.contains(PollFlags::POLLERR)) {
            match socket::connect(attempt.fd.as_raw_fd(), &sockaddr) {
                Err(Errno::ECONNREFUSED) => {
                    let Try {
                        target,
                        addr,
                        fd,
                        pinned,
                        started,
                        ..
                    } = attempt;
                    self.spare
                        .push((family.expect("an inet address"), fd, pinned));
                    return self.failed(target, addr, started, Errno::ECONNREFUSED);
                }
                Ok(()) | Err(Errno::EISCONN) => return self.connected(attempt),
                // Not answered yet: poll waits for it.
                Err(Errno::EALREADY | Errno::EINPROGRESS) if polled.is_none() => {
                    return self.flying.push(attempt)
                }
                // A soft (ICMP) error while still connecting: SO_ERROR says it.
                Err(Errno::EALREADY | Errno::EINPROGRESS) => {}
                Err(errno) => {
                    return self.failed(attempt.target, attempt.addr, attempt.started, errno)
                }
            }
        } else if polled.is_none() {
            return self.flying.push(attempt);
        }
        match socket::getsockopt(&attempt.fd, socket::sockopt::SocketError) {
            Ok(0) => self.connected(attempt),
            Ok(raw) => self.failed(
                attempt.target,
                attempt.addr,
                attempt.started,
                Errno::from_raw(raw),
            ),
            Err(errno) => self.failed(attempt.target, attempt.addr, attempt.started, errno),
        }
    }

    /// One poll over the tries in flight, and what it says of each.
    fn step(&mut self) -> anyhow::Result<()> {
        let now = Instant::now();
        let soonest = self
            .flying
            .iter()
            .map(|t| (t.started + self.limit).saturating_duration_since(now))
            .min()
            .unwrap_or(Duration::ZERO);
        let ms =
            soonest.as_millis() + u128::from(!soonest.subsec_nanos().is_multiple_of(1_000_000));
        let flying = std::mem::take(&mut self.flying);
        let ready: Vec<PollFlags> = {
            let mut fds: Vec<PollFd<'_>> = flying
                .iter()
                .map(|t| {
                    let events = match &t.shake {
                        None => PollFlags::POLLOUT,
                        Some(shake) if shake.wants_write() => {
                            PollFlags::POLLIN | PollFlags::POLLOUT
                        }
                        Some(_) => PollFlags::POLLIN,
                    };
                    PollFd::new(t.fd.as_fd(), events)
                })
                .collect();
            match poll(
                &mut fds,
                PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
            ) {
                Ok(_) => {}
                Err(Errno::EINTR) => {}
                Err(e) => return Err(anyhow::anyhow!("poll: {e}")),
            }
            fds.iter()
                .map(|f| f.revents().unwrap_or(PollFlags::empty()))
                .collect()
        };
        if crate::sys::process::interrupted() {
            return Err(crate::exit::Interrupted("interrupted while probing".to_string()).into());
        }
        for (attempt, revents) in flying.into_iter().zip(ready) {
            if revents.is_empty() {
                if attempt.started.elapsed() >= self.limit {
                    self.finish(attempt.target, State::Timeout, attempt.started);
                } else {
                    self.flying.push(attempt);
                }
                continue;
            }
            if attempt.shake.is_some() {
                self.shake(attempt);
                continue;
            }
            self.settle(attempt, Some(revents));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports(arg: &str) -> Vec<u16> {
        let target = parse_target(arg).unwrap();
        assert!(
            matches!(target.endpoint, Endpoint::Tcp { .. }),
            "{arg} is not tcp"
        );
        (0..target.count()).map(|nth| target.port(nth)).collect()
    }

    #[test]
    fn ranges_expand_to_each_port() {
        assert_eq!(ports("tcp:127.0.0.1:20-23"), vec![20, 21, 22, 23]);
        assert_eq!(ports("tcp:[::1]:7-7"), vec![7]);
        assert_eq!(ports("TLS:localhost:1-2,verify=0"), vec![1, 2]);
        assert_eq!(ports("tcp:localhost:80"), vec![80]);
        assert_eq!(ports("tcp:h:1-65535").len(), 65_535);
    }

    #[test]
    fn bad_ranges_and_targets_are_usage_errors_naming_the_argument() {
        for (arg, says) in [
            ("tcp:h:30-20", "backwards"),
            ("tcp:h:1-70000", "1-65535"),
            ("tcp:h:0-10", "1-65535"),
            ("tcp:h:1-x", "not a port range"),
            ("tcp-listen:80", "probe connects to"),
            ("udp:h:53", "probe connects to"),
            ("tcp:h:80,retry=3", "--wait"),
        ] {
            let err = parse_target(arg).unwrap_err();
            assert!(err.contains(arg) && err.contains(says), "{arg}: {err}");
        }
    }
}
