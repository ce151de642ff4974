//! Several upstreams (`relay LISTENER B1 B2 …`): which one a new connection gets
//! (`--balance`), which are down (passive: an upstream that failed a connection before any
//! byte moved is skipped for `--down-for`; active: `--check-interval`'s probes), and the
//! counts per upstream that the report, `--log` and SIGUSR1 give.
//!
//! Shared by every worker (`--workers`) and the checker thread: atomics and one small lock
//! per upstream, touched once per connection, never per byte.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::RelayConfig;
use crate::endpoint::Endpoint;
use crate::exit::UsageError;
use crate::report::{json_array, JsonObject};

/// How a new connection chooses among the upstreams that are not down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Balance {
    /// The first in the order given (realm's and HAProxy's backup servers).
    #[default]
    Failover,
    /// Each in turn.
    RoundRobin,
    /// The one with the fewest connections open (ties: in turn).
    LeastConn,
    /// By a hash of the client's IP address: a client keeps its upstream while it is up.
    SourceHash,
}

impl Balance {
    pub fn word(self) -> &'static str {
        match self {
            Balance::Failover => "failover",
            Balance::RoundRobin => "round-robin",
            Balance::LeastConn => "least-conn",
            Balance::SourceHash => "source-hash",
        }
    }
}

/// Upstreams a relay may have: a connection's tries are a bit mask.
pub const MAX_UPSTREAMS: usize = 64;

/// One upstream's health and counts.
#[derive(Debug, Default)]
struct State {
    /// Skipped until then (None: up).
    down_until: Mutex<Option<Instant>>,
    /// Connections on it now (least-conn's measure).
    open: AtomicUsize,
    /// Connections it served: its side was connected (or its command started) and the
    /// connection ended on it.
    served: AtomicU64,
    /// Tries that failed before any byte moved (refused, timed out, reset, TLS failed):
    /// each went on to the next upstream.
    failed: AtomicU64,
}

/// The upstreams of one relay and what the balancer knows of them.
#[derive(Debug)]
pub struct Upstreams {
    pub balance: Balance,
    pub down_for: Duration,
    uris: Vec<String>,
    state: Vec<State>,
    /// Round-robin's turn (least-conn's tie-break too).
    turn: AtomicUsize,
    /// Clients closed because every upstream was down or had failed them.
    no_upstream: AtomicU64,
}

/// What a connection has tried: a bit per upstream.
pub type Tried = u64;

impl Upstreams {
    pub fn new(uris: Vec<String>, balance: Balance, down_for: Duration) -> Upstreams {
        let state = uris.iter().map(|_| State::default()).collect();
        Upstreams {
            balance,
            down_for,
            uris,
            state,
            turn: AtomicUsize::new(0),
            no_upstream: AtomicU64::new(0),
        }
    }

    pub fn len(&self) -> usize {
        self.uris.len()
    }

    pub fn uri(&self, i: usize) -> &str {
        &self.uris[i]
    }

    fn is_down(&self, i: usize, now: Instant) -> bool {
        let mut down = self.state[i]
            .down_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match *down {
            Some(until) if until > now => true,
            Some(_) => {
                *down = None; // its time is up: tried again
                false
            }
            None => false,
        }
    }

    /// The upstream a connection from `client` gets next, among those it has not tried
    /// and that are not down; None when there is none (the client is closed, counted
    /// `no-upstream`). Counts it open.
    pub fn pick(&self, client: Option<IpAddr>, tried: Tried, now: Instant) -> Option<usize> {
        let n = self.len();
        let start = match self.balance {
            Balance::Failover => 0,
            Balance::RoundRobin | Balance::LeastConn => {
                self.turn.fetch_add(1, Ordering::Relaxed) % n
            }
            Balance::SourceHash => (client.map_or(0, hash_ip) % n as u64) as usize,
        };
        let candidates = (0..n)
            .map(|k| (start + k) % n)
            .filter(|&i| tried & (1 << i) == 0 && !self.is_down(i, now));
        let chosen = if self.balance == Balance::LeastConn {
            // The first with the fewest open, in turn from `start`.
            candidates.min_by_key(|&i| self.state[i].open.load(Ordering::Relaxed))
        } else {
            candidates.into_iter().next()
        };
        match chosen {
            Some(i) => {
                self.state[i].open.fetch_add(1, Ordering::Relaxed);
                Some(i)
            }
            None => {
                self.no_upstream.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// A connection left upstream `i`: it `served` it (the stream ran on it), or it failed
    /// before any byte moved and the connection goes on elsewhere (or nowhere).
    pub fn leave(&self, i: usize, served: bool) {
        let s = &self.state[i];
        s.open.fetch_sub(1, Ordering::Relaxed);
        if served {
            s.served.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Upstream `i` failed a try before any byte moved (passive health): skipped for
    /// `--down-for`.
    pub fn failed(&self, i: usize, now: Instant) {
        self.state[i].failed.fetch_add(1, Ordering::Relaxed);
        self.mark(i, false, now);
    }

    /// An active check's verdict, or a passive failure's.
    pub fn mark(&self, i: usize, up: bool, now: Instant) {
        let mut down = self.state[i]
            .down_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *down = (!up && !self.down_for.is_zero()).then(|| now + self.down_for);
    }

    /// "; upstreams (failover): tcp:a 3 served, 1 failed, down; tcp:b …; 2 no-upstream"
    pub fn text(&self) -> String {
        let now = Instant::now();
        let mut s = format!("; upstreams ({}):", self.balance.word());
        for i in 0..self.len() {
            let st = &self.state[i];
            let _ = write!(
                s,
                " {} {} open, {} served, {} failed{}{}",
                self.uris[i],
                st.open.load(Ordering::Relaxed),
                st.served.load(Ordering::Relaxed),
                st.failed.load(Ordering::Relaxed),
                if self.is_down(i, now) { ", down" } else { "" },
                if i + 1 < self.len() { ";" } else { "" },
            );
        }
        let _ = write!(
            s,
            "; {} no-upstream",
            self.no_upstream.load(Ordering::Relaxed)
        );
        s
    }

    /// `upstreams` of the JSON report: `{"balance":..,"no_upstream":N,"list":[{"uri":..,
    /// "served":N,"failed":N,"open":N,"down":bool}]}`.
    pub fn json(&self) -> String {
        let now = Instant::now();
        let list: Vec<String> = (0..self.len())
            .map(|i| {
                let st = &self.state[i];
                let mut o = JsonObject::new();
                o.str("uri", &self.uris[i])
                    .num("served", st.served.load(Ordering::Relaxed))
                    .num("failed", st.failed.load(Ordering::Relaxed))
                    .num("open", st.open.load(Ordering::Relaxed) as u64)
                    .bool("down", self.is_down(i, now));
                o.finish()
            })
            .collect();
        let mut o = JsonObject::new();
        o.str("balance", self.balance.word())
            .num("no_upstream", self.no_upstream.load(Ordering::Relaxed))
            .raw("list", &json_array(&list));
        o.finish()
    }
}

/// Several upstreams: the usage errors, before anything opens. A is the client's side (a
/// listener, `-` or fd:N), every upstream a connector or a command, all datagram (with
/// `udp-listen:`) or all stream; source-hash needs clients with IP addresses.
pub(super) fn check(cfg: &RelayConfig) -> anyhow::Result<()> {
    let usage = |text: String| Err(UsageError(text).into());
    if cfg.more.is_empty() {
        if cfg.check_interval.is_some() || cfg.balance != Balance::Failover {
            return usage(
                "--balance and --check-interval choose among several upstreams:                  relay LISTENER B1 B2 ..."
                    .into(),
            );
        }
        return Ok(());
    }
    if cfg.more.len() + 1 > MAX_UPSTREAMS {
        return usage(format!("relay: at most {MAX_UPSTREAMS} upstreams"));
    }
    let client_side = cfg.a.listens()
        || matches!(
            cfg.a,
            Endpoint::Stdio | Endpoint::Fd(_) | Endpoint::UdpListen { .. }
        );
    if !client_side {
        return usage(format!(
            "relay {} B1 B2 ...: with several upstreams, A is where clients come from (a              listener, '-' or fd:N) and each after it an upstream",
            cfg.a
        ));
    }
    let datagram = matches!(cfg.a, Endpoint::UdpListen { .. });
    for e in cfg.upstreams() {
        let fits = match e {
            Endpoint::Udp { .. } => datagram,
            Endpoint::Tcp { .. } | Endpoint::Unix { .. } | Endpoint::Command(_) => !datagram,
            _ => false,
        };
        if !fits {
            let wants = if datagram {
                "a udp-listen: relay's upstreams are udp:HOST:PORT"
            } else {
                "a stream relay's upstreams are tcp:, tls:, unix:, exec: or sh: (no udp:,                  which would lose the datagrams' bounds, and no listener)"
            };
            return usage(format!("relay upstream '{e}': {wants}"));
        }
    }
    if cfg.balance == Balance::SourceHash {
        let ip = match &cfg.a {
            Endpoint::TcpListen { .. } | Endpoint::UdpListen { .. } | Endpoint::Systemd { .. } => {
                true
            }
            Endpoint::Fd(n) | Endpoint::FdTls { fd: n, .. } => is_inet(*n),
            _ => false,
        };
        if !ip {
            return usage(format!(
                "--balance source-hash hashes the client's IP address; '{}' has clients without                  one (use round-robin or least-conn)",
                cfg.a
            ));
        }
    }
    Ok(())
}

/// fd `n` is an IPv4 or IPv6 socket.
fn is_inet(n: i32) -> bool {
    use nix::sys::socket::{getsockname, AddressFamily, SockaddrLike, SockaddrStorage};
    getsockname::<SockaddrStorage>(n)
        .ok()
        .and_then(|a| a.family())
        .is_some_and(|f| matches!(f, AddressFamily::Inet | AddressFamily::Inet6))
}

/// FNV-1a over the address's bytes: the same client, the same upstream, on every run.
fn hash_ip(ip: IpAddr) -> u64 {
    let bytes = match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.octets().to_vec(),
            None => v6.octets().to_vec(),
        },
    };
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOWN_FOR: Duration = Duration::from_secs(10);

    fn three(balance: Balance) -> Upstreams {
        Upstreams::new(
            vec!["tcp:a:1".into(), "tcp:b:1".into(), "tcp:c:1".into()],
            balance,
            DOWN_FOR,
        )
    }

    #[test]
    fn failover_takes_the_first_up_and_skips_what_was_tried() {
        let up = three(Balance::Failover);
        let now = Instant::now();
        assert_eq!(up.pick(None, 0, now), Some(0));
        up.failed(0, now);
        assert_eq!(up.pick(None, 0, now), Some(1));
        assert_eq!(up.pick(None, 0b010, now), Some(2));
        assert_eq!(up.pick(None, 0b110, now), None);
        // Its --down-for over, the first is tried again.
        assert_eq!(up.pick(None, 0, now + DOWN_FOR), Some(0));
    }

    #[test]
    fn round_robin_turns_and_least_conn_takes_the_emptiest() {
        let rr = three(Balance::RoundRobin);
        let now = Instant::now();
        let picks: Vec<_> = (0..6).map(|_| rr.pick(None, 0, now).unwrap()).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        let lc = three(Balance::LeastConn);
        assert_eq!(lc.pick(None, 0, now), Some(0));
        assert_eq!(lc.pick(None, 0, now), Some(1));
        lc.leave(0, true);
        // 0 has none open now, 1 and 2 one and none: the turn starts at 2.
        assert_eq!(lc.pick(None, 0, now), Some(2));
        assert_eq!(lc.pick(None, 0, now), Some(0));
    }

    #[test]
    fn source_hash_keeps_a_client_on_its_upstream() {
        let sh = three(Balance::SourceHash);
        let now = Instant::now();
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let first = sh.pick(Some(ip), 0, now).unwrap();
        for _ in 0..5 {
            assert_eq!(sh.pick(Some(ip), 0, now), Some(first));
        }
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(sh.pick(Some(mapped), 0, now), Some(first));
    }
}
