//! What the relay says of its connections: the `-v` line of each, and the final report
//! (text or JSON) over all of them, kept in bounded memory.

use std::fmt::Write as _;

use super::end::ConnEnd;
use super::RelayConfig;
use crate::endpoint::Endpoint;
use crate::engine::{DataPath, Record};
use crate::report::{
    child_json, json_array, json_string, mptcp_json, record_json, route, tls_json, JsonObject,
    StatsFormat,
};
use crate::sys::ktls::TlsInfo;
use crate::sys::process::ChildExit;
use crate::sys::socket::Mptcp;
use crate::units::{amount, human_bytes};

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

impl FlowReport {
    /// One direction of a datagram session, carried in userspace: its path is userspace
    /// when it passed anything (bytes, or empty datagrams), none otherwise.
    pub fn of_datagrams(bytes: u64, datagrams: Datagrams, ended: ConnEnd) -> FlowReport {
        FlowReport {
            record: Record {
                paths: if bytes > 0 || datagrams.sent > 0 {
                    vec![(DataPath::Userspace, bytes)]
                } else {
                    Vec::new()
                },
                fallbacks: Vec::new(),
            },
            bytes,
            switches: 0,
            ended,
            undelivered: 0,
        }
    }
}

/// One direction of a datagram session: datagrams passed on, and those the kernel would
/// not take without waiting (a full socket buffer: UDP's own loss, counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Datagrams {
    pub sent: u64,
    pub dropped: u64,
}

/// Adds `more` ([A -> B, B -> A]) to the sum, which starts at the first datagram session.
fn add_datagrams(sum: &mut Option<[Datagrams; 2]>, more: [Datagrams; 2]) {
    let sum = sum.get_or_insert_with(Default::default);
    for (s, m) in sum.iter_mut().zip(more) {
        s.sent += m.sent;
        s.dropped += m.dropped;
    }
}

/// What became of GSO (UDP_SEGMENT) in a datagram relay.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gso {
    /// The kernel refused a GSO send (EINVAL, EIO, ENOPROTOOPT...): none is tried again.
    pub refused: bool,
    /// GSO sends made, and the datagrams they carried.
    pub sends: u64,
    pub datagrams: u64,
}

#[derive(Debug, Clone)]
pub struct ConnReport {
    pub id: u64,
    /// Its place in the order connections ended, over every worker.
    pub seq: u64,
    /// The client: the accepted socket's peer (without a listener, side A's name).
    pub peer: String,
    /// The side the relay connected to, as connected (its peer address), or its URI.
    pub upstream: String,
    /// Several upstreams: the one the connection got (its URI as given).
    pub upstream_uri: Option<String>,
    pub seconds: f64,
    /// [A -> B, B -> A]
    pub flows: [FlowReport; 2],
    pub end: ConnEnd,
    /// [A, B]: what became of `,mptcp` on each side that asked for it.
    pub mptcp: [Option<Mptcp>; 2],
    /// [A, B]: how the child of an `exec:`/`sh:` side ended.
    pub children: [Option<ChildExit>; 2],
    /// A datagram session (`udp-listen:` to `udp:`): [A -> B, B -> A].
    pub datagrams: Option<[Datagrams; 2]>,
    /// [A, B]: a TLS side's handshake and record layer.
    /// Boxed: a listed connection of a plain relay pays 16 bytes for it, not 200.
    pub tls: [Option<Box<TlsInfo>>; 2],
}

impl ConnReport {
    /// The `-v` line: "#3 127.0.0.1:40312: 5 B a->b via splice, 5 B b->a via splice, 0.01 s, eof"
    pub fn line(&self) -> String {
        let mut s = format!("#{} {}:", self.id, self.peer);
        if let Some(uri) = &self.upstream_uri {
            let _ = write!(s, " upstream {uri},");
        }
        for (d, name) in ["a->b", "b->a"].iter().enumerate() {
            let f = &self.flows[d];
            let _ = write!(s, " {} {name}", human_bytes(f.bytes));
            if !f.record.paths.is_empty() {
                let _ = write!(s, " via {}", route(&f.record));
            }
            if f.undelivered > 0 {
                let _ = write!(s, " ({} undelivered)", human_bytes(f.undelivered));
            }
            if let Some(dg) = self.datagrams.map(|dg| dg[d]) {
                let _ = write!(s, " ({} datagrams, {} dropped)", dg.sent, dg.dropped);
            }
            s.push(',');
        }
        for (side, mptcp) in ["a", "b"].iter().zip(self.mptcp) {
            if let Some(mptcp) = mptcp {
                let _ = write!(s, " {side} {},", mptcp.describe());
            }
        }
        for (side, child) in ["a", "b"].iter().zip(self.children) {
            if let Some(child) = child {
                let _ = write!(s, " {side} child {},", child.brief());
            }
        }
        for (side, tls) in ["a", "b"].iter().zip(&self.tls) {
            if let Some(tls) = tls {
                let _ = write!(s, " {side} tls {},", tls.describe());
            }
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
        if let Some(uri) = &self.upstream_uri {
            o.str("upstream", &self.upstream).str("upstream_uri", uri);
        }
        end_json(&mut o, &self.end);
        self.directions_json(&mut o);
        self.mptcp_json(&mut o);
        self.children_json(&mut o);
        self.tls_json(&mut o);
        o.finish()
    }

    /// `tls`, when a side is TLS: `{"a":{"version":..,"cipher":..,"path":..}}`, as pipe's.
    fn tls_json(&self, o: &mut JsonObject) {
        if self.tls.iter().all(Option::is_none) {
            return;
        }
        let mut sides = JsonObject::new();
        for (side, tls) in ["a", "b"].iter().zip(&self.tls) {
            if let Some(tls) = tls {
                sides.raw(side, &tls_json(tls));
            }
        }
        o.raw("tls", &sides.finish());
    }

    /// The `--log` line (without its newline); the man page names every field.
    pub fn log_line(&self, time: &str, worker: usize) -> String {
        let mut o = JsonObject::new();
        o.str("time", time)
            .str("event", "connection")
            .num("id", self.id)
            .num("worker", worker as u64)
            .str("client", &self.peer)
            .str("upstream", &self.upstream);
        if let Some(uri) = &self.upstream_uri {
            o.str("upstream_uri", uri);
        }
        o.float("seconds", self.seconds);
        end_json(&mut o, &self.end);
        self.directions_json(&mut o);
        self.mptcp_json(&mut o);
        self.children_json(&mut o);
        self.tls_json(&mut o);
        o.finish()
    }

    /// `mptcp`, when a side asked for it: `{"a":{"active":..,"fallback":..}}`, as pipe's.
    fn mptcp_json(&self, o: &mut JsonObject) {
        if self.mptcp.iter().all(Option::is_none) {
            return;
        }
        let mut sides = JsonObject::new();
        for (side, mptcp) in ["a", "b"].iter().zip(self.mptcp) {
            if let Some(mptcp) = mptcp {
                sides.raw(side, &mptcp_json(mptcp));
            }
        }
        o.raw("mptcp", &sides.finish());
    }

    /// `child`, when a side is a command: `{"b":{"pid":..,"exit":0,"signal":null}}`, as
    /// pipe's.
    fn children_json(&self, o: &mut JsonObject) {
        if self.children.iter().all(Option::is_none) {
            return;
        }
        let mut sides = JsonObject::new();
        for (side, child) in ["a", "b"].iter().zip(self.children) {
            if let Some(child) = child {
                sides.raw(side, &child_json(child));
            }
        }
        o.raw("child", &sides.finish());
    }

    /// `a_to_b` and `b_to_a`: bytes, paths, fallbacks (each with its errno), switches,
    /// undelivered, and how the direction ended.
    fn directions_json(&self, o: &mut JsonObject) {
        for (d, key) in ["a_to_b", "b_to_a"].iter().enumerate() {
            let f = &self.flows[d];
            let mut fo = JsonObject::new();
            fo.num("bytes", f.bytes);
            record_json(&mut fo, &f.record);
            fo.num("switches", u64::from(f.switches))
                .num("undelivered", f.undelivered);
            if let Some(dg) = self.datagrams.map(|dg| dg[d]) {
                fo.num("datagrams", dg.sent).num("dropped", dg.dropped);
            }
            end_json(&mut fo, &f.ended);
            o.raw(key, &fo.finish());
        }
    }
}

/// Lines a second text mode gives connections that did not end cleanly (`-v` gives every
/// connection its line): enough to name a few failures, never a flood.
pub const FAILED_LINES_PER_SECOND: u32 = 5;

/// Text mode's line for each connection that did not end cleanly, as socat says each
/// failure: at most [`FAILED_LINES_PER_SECOND`] a second, then one line counting the rest.
#[derive(Debug, Default)]
pub struct FailedLines {
    window: Option<std::time::Instant>,
    shown: u32,
    held: u64,
}

impl FailedLines {
    /// What to print, now, for one more connection that failed with `line`.
    pub fn admit(&mut self, line: String, now: std::time::Instant) -> Vec<String> {
        let mut out = Vec::new();
        let fresh = self
            .window
            .is_none_or(|w| now.duration_since(w) >= std::time::Duration::from_secs(1));
        if fresh {
            if self.held > 0 {
                out.push(format!(
                    "{} more connections did not end cleanly in a second (-v or --log names \
                     each)",
                    self.held
                ));
            }
            *self = FailedLines {
                window: Some(now),
                ..FailedLines::default()
            };
        }
        if self.shown < FAILED_LINES_PER_SECOND {
            self.shown += 1;
            out.push(line);
        } else {
            self.held += 1;
        }
        out
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
    /// Datagram sessions: [A -> B, B -> A] over all of them.
    pub datagrams: Option<[Datagrams; 2]>,
    /// Datagrams from new clients refused while `--max-conns` sessions were open.
    pub refused: u64,
    /// Refused by the listener's `allow=`/`deny=`: connections (closed before any byte
    /// was read), or a datagram relay's datagrams (dropped, never sent on).
    pub access_refused: u64,
    /// Clients' datagrams the kernel dropped at the listening socket (its receive queue
    /// full) before the relay could read them.
    pub lost_on_arrival: u64,
    /// Datagram relay: what became of GSO.
    pub gso: Option<Gso>,
    /// Datagram relay: the kernel took UDP_GRO (it coalesces only where GRO runs: not on
    /// loopback).
    pub gro: bool,
}

impl Tally {
    pub fn add(&mut self, report: ConnReport) {
        self.count += 1;
        if !report.end.is_clean() {
            self.failed += 1;
        }
        if matches!(report.end, ConnEnd::Refused(_)) {
            self.access_refused += 1;
        }
        for (d, f) in report.flows.iter().enumerate() {
            self.bytes[d] += f.bytes;
            self.record.merge(&f.record);
        }
        if let Some(dg) = report.datagrams {
            add_datagrams(&mut self.datagrams, dg);
        }
        if self.first.is_none() {
            self.first = Some(report.clone());
        }
        if self.last.len() == LISTED {
            self.last.pop_front();
        }
        self.last.push_back(report);
    }

    /// Adds another worker's tally: the totals, the first connection to end, and the
    /// last [`LISTED`] of both in the order they ended.
    pub fn merge(&mut self, other: Tally) {
        self.count += other.count;
        self.failed += other.failed;
        self.refused += other.refused;
        self.access_refused += other.access_refused;
        self.lost_on_arrival += other.lost_on_arrival;
        if let Some(dg) = other.datagrams {
            add_datagrams(&mut self.datagrams, dg);
        }
        for d in 0..2 {
            self.bytes[d] += other.bytes[d];
        }
        self.record.merge(&other.record);
        if let Some(first) = other.first {
            if self.first.as_ref().is_none_or(|f| first.seq < f.seq) {
                self.first = Some(first);
            }
        }
        self.last.extend(other.last);
        self.last.make_contiguous().sort_by_key(|r| r.seq);
        while self.last.len() > LISTED {
            self.last.pop_front();
        }
    }

    /// Connections that ended but are not listed.
    pub fn omitted(&self) -> u64 {
        self.count - self.last.len() as u64
    }
}

fn end_json(o: &mut JsonObject, end: &ConnEnd) {
    o.str("ended", end.word());
    match end.text() {
        Some(text) => o.str("error", &text),
        None => o.raw("error", "null"),
    };
}

pub(super) struct Summary<'a> {
    pub(super) cfg: &'a RelayConfig,
    pub(super) tally: &'a Tally,
    /// Several upstreams: each one's counts.
    pub(super) upstreams: Option<&'a super::upstream::Upstreams>,
    pub(super) seconds: f64,
    pub(super) interrupted: bool,
    /// `--log` stopped on a write error: the error's text.
    pub(super) log_error: Option<&'a str>,
    /// `--dump`: what went into it.
    pub(super) dump: Option<&'a crate::engine::dump::DumpTotals>,
}

impl Summary<'_> {
    pub(super) fn render(&self, format: StatsFormat) -> String {
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
                if let Some([ab, ba]) = t.datagrams {
                    let _ = write!(
                        s,
                        " (datagrams{}{}: {} a -> b, {} b -> a, {} dropped, {} \
                         lost on arrival",
                        // The stream relay of UDP (`framed`) moves one datagram a call.
                        if t.gso.is_some() {
                            " with recvmmsg/sendmmsg"
                        } else {
                            ""
                        },
                        match t.gso {
                            Some(gso) if gso.sends > 0 => " and GSO",
                            _ => "",
                        },
                        ab.sent,
                        ba.sent,
                        ab.dropped + ba.dropped,
                        t.lost_on_arrival
                    );
                    if t.refused > 0 {
                        let _ = write!(s, ", {} refused at --max-conns", t.refused);
                    }
                    s.push(')');
                }
                if t.access_refused > 0 {
                    let what = if t.datagrams.is_some() {
                        "datagrams"
                    } else {
                        "connections"
                    };
                    let _ = write!(s, "; {} {what} refused by allow/deny", t.access_refused);
                }
                if t.failed > 0 {
                    let _ = write!(s, "; {} did not end cleanly", t.failed);
                }
                if let Some(ups) = self.upstreams {
                    s.push_str(&ups.text());
                }
                if self.interrupted {
                    s.push_str("; interrupted");
                }
                if let Some(e) = self.log_error {
                    let _ = write!(s, "; {e}");
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
                o.num("failed", t.failed).num("refused", t.access_refused);
                if let Some([ab, ba]) = t.datagrams {
                    let mut dg = JsonObject::new();
                    dg.num("a_to_b", ab.sent)
                        .num("b_to_a", ba.sent)
                        .num("dropped", ab.dropped + ba.dropped)
                        .num("lost_on_arrival", t.lost_on_arrival)
                        .num("refused", t.refused)
                        .bool("mmsg", t.gso.is_some());
                    let gso = t.gso.unwrap_or_default();
                    dg.bool("gso", gso.sends > 0)
                        .num("gso_sends", gso.sends)
                        .num("gso_datagrams", gso.datagrams)
                        .bool("gso_refused", gso.refused)
                        .bool("gro", t.gro);
                    o.raw("datagrams", &dg.finish());
                }
                if let Some(ups) = self.upstreams {
                    o.raw("upstreams", &ups.json());
                }
                let conns: Vec<String> = t.last.iter().map(ConnReport::json).collect();
                o.raw("connections", &json_array(&conns))
                    .num("connections_omitted", t.omitted());
                if let Some(e) = self.log_error {
                    o.str("log_error", e);
                }
                if let Some(dump) = self.dump {
                    o.raw("dump", &crate::report::dump_json(dump));
                }
                if self.cfg.a.is_websocket() || self.cfg.b.is_websocket() {
                    o.raw("websocket", &websocket_json());
                }
                o.finish()
            }
        }
    }
}

/// The run's WebSocket counts: `{"spliced", "copied"}` payload bytes, `closed_1002` and
/// `closed_1007` connections closed for a frame the peer must not send, `pings` answered.
fn websocket_json() -> String {
    let c = crate::endpoint::websocket::bridge::counts();
    let mut o = JsonObject::new();
    o.num("spliced", c.spliced)
        .num("copied", c.copied)
        .num("closed_1002", c.closed_1002)
        .num("closed_1007", c.closed_1007)
        .num("pings", c.pings);
    o.finish()
}

fn uri_json(e: &Endpoint) -> String {
    format!("{{\"uri\":{}}}", json_string(&e.to_string()))
}

#[cfg(test)]
mod failed_lines_tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_few_failures_a_second_are_named_then_counted() {
        let mut lines = FailedLines::default();
        let t0 = Instant::now();
        let mut said = Vec::new();
        for i in 0..8 {
            said.extend(lines.admit(format!("#{i}"), t0));
        }
        assert_eq!(said, ["#0", "#1", "#2", "#3", "#4"]);
        let later = lines.admit("#8".into(), t0 + Duration::from_millis(1500));
        assert_eq!(later.len(), 2, "{later:?}");
        assert!(later[0].starts_with("3 more connections"), "{later:?}");
        assert_eq!(later[1], "#8");
    }
}
