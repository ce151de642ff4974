//! `zerocat relay A B`: bytes from A to B and from B to A at once.
//!
//! A listener on either side serves every connection it accepts, concurrently, each paired
//! with a fresh connection to the other side (`--once`: one). Two connectors, or `-` and a
//! connector, relay one session. One thread, one epoll loop ([`poller`]); each direction
//! of each connection is a [`flow::Flow`]: splice through a pipe of our own, or read/write
//! through a pooled buffer ([`pool`]), chosen per direction and adaptively under
//! `--via auto` ([`policy`]).
//!
//! Ends: EOF from one side is passed on as a half-close (`shutdown(SHUT_WR)`) once every
//! byte is delivered, and the other direction keeps going until its own EOF (no cut-off
//! timer). A reset or an error on one side resets the other (SO_LINGER 0). SIGINT/SIGTERM:
//! stop accepting, give connections in flight [`GRACE`] to finish, report, exit 130.

mod flow;
mod policy;
mod poller;
mod pool;
mod server;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};

use crate::endpoint::Endpoint;
use crate::engine::{DataPath, Record, Via};
use crate::exit::{ExitCode, UsageError};
use crate::options::Options;
use crate::report::{json_array, json_string, record_json, route, JsonObject, StatsFormat};
use crate::units::{amount, human_bytes};

use policy::Policy;
use server::{Server, Spec};

/// How long connections in flight may go on after SIGINT/SIGTERM (documented in the
/// man page, under `relay`).
pub const GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub a: Endpoint,
    pub b: Endpoint,
    /// Serve one connection, then exit.
    pub once: bool,
    /// Connections served at once; beyond, clients wait in the listen backlog.
    pub max_conns: Option<usize>,
    /// Close a connection that moved no byte either way for this long.
    pub idle_timeout: Option<Duration>,
    /// Give up a connection attempt after this long (each attempt of `retry=N`).
    pub connect_timeout: Option<Duration>,
    /// Grow the pipes of busy streams to `pipe-max-size` (within the budget).
    pub grow_pipes: bool,
    /// Under auto, start every direction with splice (no prior; see `flow`).
    pub splice_first: bool,
    /// Under auto, the first trial's point (tests; default `policy::FIRST_TRIAL`).
    pub first_trial: Option<u64>,
}

/// How a connection (or one direction of it) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnEnd {
    Eof,
    /// ECONNRESET/EPIPE on one side; the other side was reset too.
    Reset(String),
    Error(String),
    IdleTimeout,
    ConnectFailed(String),
    Signal,
}

impl ConnEnd {
    pub fn word(&self) -> &'static str {
        match self {
            ConnEnd::Eof => "eof",
            ConnEnd::Reset(_) => "reset",
            ConnEnd::Error(_) => "error",
            ConnEnd::IdleTimeout => "idle-timeout",
            ConnEnd::ConnectFailed(_) => "connect-failed",
            ConnEnd::Signal => "signal",
        }
    }

    pub fn text(&self) -> Option<&str> {
        match self {
            ConnEnd::Reset(t) | ConnEnd::Error(t) | ConnEnd::ConnectFailed(t) => Some(t),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct FlowReport {
    pub record: Record,
    pub bytes: u64,
    pub switches: u32,
    pub ended: ConnEnd,
    /// Bytes taken from the source that the sink would not take at the end (an abort, a
    /// signal): lost, and said so. 0 on a clean end.
    pub undelivered: u64,
}

#[derive(Debug, Clone)]
pub struct ConnReport {
    pub id: u64,
    pub peer: String,
    pub seconds: f64,
    /// [A -> B, B -> A]
    pub flows: [FlowReport; 2],
    pub end: ConnEnd,
}

impl ConnReport {
    /// The `-v` line: "#3 127.0.0.1:40312: 5 B a->b via splice, 5 B b->a via splice, 0.01 s, eof"
    pub fn line(&self) -> String {
        let mut s = format!("#{} {}:", self.id, self.peer);
        for (d, name) in ["a->b", "b->a"].iter().enumerate() {
            let f = &self.flows[d];
            let _ = write!(s, " {} {name}", human_bytes(f.bytes));
            if !f.record.paths.is_empty() {
                let _ = write!(s, " via {}", route(&f.record));
            }
            s.push(',');
        }
        let _ = write!(s, " {:.2} s, {}", self.seconds, self.end.word());
        if let Some(text) = self.end.text() {
            let _ = write!(s, ": {text}");
        }
        s
    }

    fn json(&self) -> String {
        let mut o = JsonObject::new();
        o.num("id", self.id)
            .str("peer", &self.peer)
            .float("seconds", self.seconds);
        end_json(&mut o, &self.end);
        for (d, key) in ["a_to_b", "b_to_a"].iter().enumerate() {
            let f = &self.flows[d];
            let mut fo = JsonObject::new();
            fo.num("bytes", f.bytes);
            record_json(&mut fo, &f.record);
            fo.num("switches", u64::from(f.switches))
                .num("undelivered", f.undelivered);
            end_json(&mut fo, &f.ended);
            o.raw(key, &fo.finish());
        }
        o.finish()
    }
}

/// Connections the JSON report lists one by one: the last ones to end. Earlier ones are only
/// counted (`connections_omitted`), so a long-running relay keeps bounded memory.
pub const LISTED: usize = 256;

/// What the final report needs of every connection that ended, in bounded memory: totals,
/// the first connection (its end is the run's end for one session), and the last
/// [`LISTED`] connections.
#[derive(Debug, Default)]
pub struct Tally {
    pub count: u64,
    pub failed: u64,
    pub bytes: [u64; 2],
    /// Paths of every connection added up; each distinct fallback once.
    pub record: Record,
    pub first: Option<ConnReport>,
    pub last: std::collections::VecDeque<ConnReport>,
}

impl Tally {
    pub fn add(&mut self, report: ConnReport) {
        self.count += 1;
        if report.end != ConnEnd::Eof {
            self.failed += 1;
        }
        for (d, f) in report.flows.iter().enumerate() {
            self.bytes[d] += f.bytes;
            for (path, bytes) in &f.record.paths {
                self.record.add(*path, *bytes);
            }
            for fallback in &f.record.fallbacks {
                if !self.record.fallbacks.contains(fallback) {
                    self.record.fallbacks.push(fallback.clone());
                }
            }
        }
        if self.first.is_none() {
            self.first = Some(report.clone());
        }
        if self.last.len() == LISTED {
            self.last.pop_front();
        }
        self.last.push_back(report);
    }

    /// Connections that ended but are not listed.
    pub fn omitted(&self) -> u64 {
        self.count - self.last.len() as u64
    }
}

fn end_json(o: &mut JsonObject, end: &ConnEnd) {
    o.str("ended", end.word());
    match end.text() {
        Some(text) => o.str("error", text),
        None => o.raw("error", "null"),
    };
}

pub fn run(opts: &Options, cfg: &RelayConfig) -> anyhow::Result<ExitCode> {
    let policy = policy(opts.via)?;
    check_sides(cfg)?;
    let max_conns = Some(cfg.max_conns.unwrap_or_else(default_max_conns));
    opts.print_plan(&plan(
        &RelayConfig {
            max_conns,
            ..cfg.clone()
        },
        policy,
    ));
    if opts.explain {
        return Ok(ExitCode::Success);
    }
    let specs = [spec(&cfg.a)?, spec(&cfg.b)?];
    let single_session = !specs.iter().any(|s| matches!(s, Spec::Listen(_)));
    let once = cfg.once || specs.iter().any(|s| matches!(s, Spec::Inherited(_)));
    let cfg_run = RelayConfig {
        once,
        max_conns,
        ..cfg.clone()
    };
    let started = Instant::now();
    let mut server = Server::new(opts, &cfg_run, specs, policy)?;
    let interrupted = server.run()?;
    let tally = std::mem::take(&mut server.tally);
    drop(server);
    let seconds = started.elapsed().as_secs_f64();
    let summary = Summary {
        cfg,
        tally: &tally,
        seconds,
        interrupted,
    };
    opts.print_report(&summary.render(opts.stats));
    if interrupted {
        return Ok(ExitCode::Interrupted);
    }
    // One session (or --once): its end is the run's end.
    if single_session || once {
        if let Some(r) = &tally.first {
            if r.end != ConnEnd::Eof {
                if writes_stdout_broke(cfg, r) {
                    return Ok(ExitCode::BrokenPipe);
                }
                return Err(anyhow!(
                    "{}",
                    r.end
                        .text()
                        .map(str::to_string)
                        .unwrap_or_else(|| r.end.word().into())
                ));
            }
        }
    }
    Ok(ExitCode::Success)
}

/// Fds a connection may hold: two sockets, and a pipe (two fds) each way.
const FDS_PER_CONN: u64 = 6;
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

fn writes_stdout_broke(cfg: &RelayConfig, r: &ConnReport) -> bool {
    let stdio_side = [&cfg.a, &cfg.b]
        .iter()
        .position(|e| matches!(e, Endpoint::Stdio));
    let Some(side) = stdio_side else {
        return false;
    };
    let name = if side == 0 { "writing A" } else { "writing B" };
    matches!(&r.end, ConnEnd::Reset(t) if t.starts_with(name) && t.contains("Broken pipe"))
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

fn check_sides(cfg: &RelayConfig) -> anyhow::Result<()> {
    for (name, e) in [("A", &cfg.a), ("B", &cfg.b)] {
        if matches!(e, Endpoint::File { .. }) {
            return Err(UsageError(format!(
                "relay {name} '{e}': a file is one-way; relay needs a socket, '-' or fd:N \
                 (use `zerocat pipe` to move a file)"
            ))
            .into());
        }
    }
    if cfg.a.is_listener() && cfg.b.is_listener() {
        return Err(UsageError(
            "relay: both sides listen; one side must connect (tcp:, unix:), or be '-'".into(),
        )
        .into());
    }
    let inherited = |e: &Endpoint| matches!(e, Endpoint::Stdio | Endpoint::Fd(_));
    if inherited(&cfg.a) && inherited(&cfg.b) {
        return Err(
            UsageError("relay: neither side is a socket to connect or listen on".into()).into(),
        );
    }
    if cfg.max_conns == Some(0) {
        return Err(UsageError("--max-conns must be at least 1".into()).into());
    }
    Ok(())
}

fn spec(endpoint: &Endpoint) -> anyhow::Result<Spec> {
    Ok(match endpoint {
        Endpoint::TcpListen { .. } | Endpoint::UnixListen { .. } => {
            Spec::Listen(endpoint.listen()?)
        }
        Endpoint::Tcp { .. } | Endpoint::Unix { .. } => {
            let (addrs, opts) = endpoint
                .connect_addrs()
                .with_context(|| format!("cannot use '{endpoint}'"))?;
            Spec::Dial {
                uri: endpoint.to_string(),
                addrs,
                opts,
            }
        }
        other => Spec::Inherited(other.clone()),
    })
}

fn plan(cfg: &RelayConfig, policy: Policy) -> String {
    let paths = match policy {
        Policy::Auto => {
            "splice or userspace, chosen per direction from the bytes each splice moves"
        }
        Policy::Splice => "splice",
        Policy::Userspace => "userspace",
    };
    let mut s = format!(
        "plan: relay {} <-> {} via {paths}; pipes of 64 KiB{}, {} in all at most; buffers of {}, {} in all",
        cfg.a,
        cfg.b,
        if cfg.grow_pipes {
            " grown for busy streams"
        } else {
            ""
        },
        human_bytes(pool::PIPE_BUDGET as u64),
        human_bytes(pool::BUFFER_SIZE as u64),
        human_bytes(pool::BUFFER_BUDGET as u64),
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
    s
}

struct Summary<'a> {
    cfg: &'a RelayConfig,
    tally: &'a Tally,
    seconds: f64,
    interrupted: bool,
}

impl Summary<'_> {
    fn render(&self, format: StatsFormat) -> String {
        let t = self.tally;
        let [ab, ba] = t.bytes;
        match format {
            StatsFormat::Text => {
                let mut s = format!(
                    "zerocat: relay: {} connection{}, {} a -> b, {} b -> a; {}",
                    t.count,
                    if t.count == 1 { "" } else { "s" },
                    human_bytes(ab),
                    human_bytes(ba),
                    amount(ab + ba, self.seconds)
                );
                if !t.record.paths.is_empty() {
                    let _ = write!(s, " via {}", route(&t.record));
                }
                if t.failed > 0 {
                    let _ = write!(s, "; {} did not end cleanly", t.failed);
                }
                if self.interrupted {
                    s.push_str("; interrupted");
                }
                s
            }
            StatsFormat::Json => {
                let mut o = JsonObject::new();
                o.str("command", "relay")
                    .raw("a", &uri_json(&self.cfg.a))
                    .raw("b", &uri_json(&self.cfg.b))
                    .num("bytes", ab + ba)
                    .num("bytes_a_to_b", ab)
                    .num("bytes_b_to_a", ba)
                    .float("seconds", self.seconds);
                record_json(&mut o, &t.record);
                let ending = if self.interrupted {
                    ConnEnd::Signal
                } else {
                    match &t.first {
                        Some(r) if t.count == 1 => r.end.clone(),
                        _ => ConnEnd::Eof,
                    }
                };
                end_json(&mut o, &ending);
                o.num("failed", t.failed);
                let conns: Vec<String> = t.last.iter().map(ConnReport::json).collect();
                o.raw("connections", &json_array(&conns))
                    .num("connections_omitted", t.omitted());
                o.finish()
            }
        }
    }
}

fn uri_json(e: &Endpoint) -> String {
    format!("{{\"uri\":{}}}", json_string(&e.to_string()))
}
