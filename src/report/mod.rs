//! The end-of-run report (DESIGN §4): one text line, or one JSON object, on stderr —
//! built from the engine's record of what actually ran.
//!
//! The one place report text and JSON are made: the building blocks every command uses
//! ([`route`], [`named_json`], [`record_json`], [`ending_json`], [`ended_json`], and the
//! writer in `json.rs`), and the reports of a one-to-one transfer ([`Report`]: pipe) and of
//! a fan-out ([`FanOutReport`]: tee). copy and relay build their own shapes from the blocks.

mod json;

use std::fmt::Write as _;

pub use json::{json_array, json_string, JsonObject};

use crate::engine::dump::DumpTotals;
use crate::engine::{DataPath, Reason, Record};
use crate::sys::fdkind::{FdInfo, FdKind};
use crate::sys::ktls::TlsInfo;
use crate::sys::process::ChildExit;
use crate::sys::socket::Mptcp;
use crate::units::amount_moving;
use nix::errno::Errno;

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatsFormat {
    #[default]
    Text,
    Json,
}

/// How a run (or one sink, one direction) ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Eof,
    Error(String),
    Signal,
    /// `--idle-timeout`: no byte moved for this long; everything taken was delivered.
    IdleTimeout(std::time::Duration),
}

impl Ending {
    pub fn word(&self) -> &str {
        match self {
            Ending::Eof => "eof",
            Ending::Error(_) => "error",
            Ending::Signal => "signal",
            Ending::IdleTimeout(_) => "idle-timeout",
        }
    }

    /// The error's text; None for a clean end or a signal.
    pub fn text(&self) -> Option<&str> {
        match self {
            Ending::Error(text) => Some(text),
            _ => None,
        }
    }
}

/// One endpoint as the report names it.
#[derive(Debug, Clone)]
pub struct Named {
    pub uri: String,
    pub kind: FdKind,
    /// What became of `,mptcp` (None: not asked).
    pub mptcp: Option<Mptcp>,
    /// `exec:`/`sh:`: how the child ended.
    pub child: Option<ChildExit>,
    /// `tls:`/`tls-listen:`: what was negotiated, which record layer ran.
    pub tls: Option<TlsInfo>,
    /// `s3://`: the requests made, by kind (`[("GET", 1), ("retries", 2)]`).
    pub requests: Vec<(&'static str, u64)>,
    /// `http(s)://`: the exchange (status, final URL, ETag, framing).
    pub http: Option<HttpInfo>,
}

/// An `http(s)://` endpoint's exchange, as the report says it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpInfo {
    pub method: String,
    /// The status of the response whose body moved, or of an upload's answer (0: none).
    pub status: u16,
    pub reason: String,
    /// The URL that answered, after redirects (a password as `***`).
    pub url: String,
    pub etag: Option<String>,
    pub redirects: u32,
    /// "content-length", "chunked", "close".
    pub framing: &'static str,
    pub length: Option<u64>,
    /// Body bytes the endpoint's pump spliced between the connection and the engine's
    /// pipe, and those it moved with read/write (where splice was refused).
    pub spliced: u64,
    pub copied: u64,
    /// The body ended at the server's close, with no length to check it by.
    pub unverified: bool,
    /// Where a body cut short continued, in order (issue 38 item 4).
    pub resumes: Vec<HttpResume>,
    /// Why a body could not have been resumed had it been cut ("no strong ETag…"); None
    /// when it could.
    pub resume_off: Option<&'static str>,
    /// `copy --resume`: the object offset the run continued a partial file at (0: from
    /// the start).
    pub resumed_from: u64,
    /// `copy -j`: the ranged GETs the object came in (0: not a ranged copy).
    pub ranges: u32,
    /// `copy --resume`/`-j`: where the object's validator is kept with the file.
    pub validator_kept: Option<&'static str>,
    /// https: the TLS session, reported as a `tls:` side's (see [`Named::tls_info`]).
    pub tls: Option<TlsInfo>,
}

/// One resume of a body cut short: at which object offset it continued, why it had to
/// ("reset", "closed early", "chunked body cut", "idle"), attempts it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResume {
    pub offset: u64,
    pub cause: &'static str,
    pub attempts: u32,
}

impl HttpInfo {
    /// "http 200 (1048576 bytes)", "http 200 (chunked)", "http PUT 201".
    pub fn describe(&self) -> String {
        let status = if self.status == 0 {
            "(no answer)".to_string()
        } else {
            self.status.to_string()
        };
        if self.method != "GET" {
            return format!("http {} {status}", self.method);
        }
        let framing = match (self.framing, self.length) {
            (_, Some(n)) => format!("{n} bytes"),
            ("close", _) => "to the close, unverified".to_string(),
            (word, _) => word.to_string(),
        };
        let mut text = format!("http {status} ({framing})");
        if self.copied > 0 {
            text.push_str(&format!(" ({} bytes of it read by userspace)", self.copied));
        }
        if self.ranges > 1 {
            text.push_str(&format!(" in {} ranges", self.ranges));
        }
        if self.resumed_from > 0 {
            text.push_str(&format!(
                " (a partial file continued at {})",
                self.resumed_from
            ));
        }
        if !self.resumes.is_empty() {
            let at: Vec<String> = self
                .resumes
                .iter()
                .map(|r| format!("{} ({})", r.offset, r.cause))
                .collect();
            text.push_str(&format!(" (resumed at {})", at.join(", ")));
        }
        text
    }
}

/// `{"method":..,"status":..,"url":..,"etag":..,...}`
pub fn http_json(http: &HttpInfo) -> String {
    let mut h = JsonObject::new();
    h.str("method", &http.method)
        .num("status", u64::from(http.status))
        .str("reason", &http.reason)
        .str("url", &http.url)
        .str_or_null("etag", http.etag.as_deref())
        .num("redirects", u64::from(http.redirects))
        .str("framing", http.framing);
    match http.length {
        Some(n) => h.num("content_length", n),
        None => h.raw("content_length", "null"),
    };
    h.num("spliced", http.spliced)
        .num("copied", http.copied)
        .bool("unverified", http.unverified);
    let resumes: Vec<String> = http
        .resumes
        .iter()
        .map(|r| {
            let mut o = JsonObject::new();
            o.num("offset", r.offset)
                .str("cause", r.cause)
                .num("attempts", u64::from(r.attempts));
            o.finish()
        })
        .collect();
    h.raw("resumes", &json_array(&resumes))
        .str_or_null("resume_off", http.resume_off)
        .num("resumed_from", http.resumed_from)
        .num("ranges", u64::from(http.ranges))
        .str_or_null("validator_kept", http.validator_kept);
    h.finish()
}

impl Named {
    /// The endpoint `uri` whose fd is `info`.
    pub fn of(uri: String, info: &FdInfo) -> Named {
        Named {
            uri,
            kind: info.kind,
            mptcp: info.mptcp,
            child: None,
            tls: None,
            requests: Vec::new(),
            http: None,
        }
    }

    /// The TLS session of a `tls:` side, or of an https side's connection.
    pub fn tls_info(&self) -> Option<&TlsInfo> {
        self.tls
            .as_ref()
            .or_else(|| self.http.as_ref().and_then(|h| h.tls.as_ref()))
    }

    /// The kind as the text report says it: "socket", and for `,mptcp` what ran
    /// ("socket (mptcp)", "socket (tcp: mptcp refused, ENOPROTOOPT)").
    pub fn label(&self) -> String {
        // An http body reaches the engine through the endpoint's pipe: the report names
        // the connection it came from.
        let kind = match &self.http {
            Some(_) => FdKind::Socket.to_string(),
            None => self.kind.to_string(),
        };
        let mut label = match self.mptcp {
            None => kind,
            Some(mptcp) => format!("{kind} ({})", mptcp.describe()),
        };
        if let Some(http) = &self.http {
            label = format!("{} {label}", http.describe());
        }
        if let Some(child) = self.child {
            label.push_str(&format!(" (child {})", child.brief()));
        }
        if let Some(tls) = self.tls_info() {
            label.push_str(&format!(" (tls: {})", tls.describe()));
        }
        if !self.requests.is_empty() {
            let words: Vec<String> = self
                .requests
                .iter()
                .map(|(kind, n)| format!("{n} {kind}"))
                .collect();
            label.push_str(&format!(" (s3: {})", words.join(", ")));
        }
        label
    }
}

/// The report of a one-source, one-sink transfer.
#[derive(Debug, Clone)]
pub struct Report {
    pub command: &'static str,
    pub src: Named,
    pub dst: Named,
    pub record: Record,
    pub seconds: f64,
    /// Of `seconds`, the span bytes were moving in (`Meter::moving_seconds`).
    pub moving_seconds: Option<f64>,
    pub ending: Ending,
    /// `--keep-open`: the connections taken one after another, and how many of them were
    /// cut (a reset, a TLS stream without close_notify).
    pub connections: Option<(u64, u64)>,
    /// Where an end listens: the clients its `allow=`/`deny=` list refused (closed before
    /// a byte was read). JSON always says it then; the text line only when some were.
    pub refused: Option<u64>,
    /// `--dump`: what went into the dump and how it was fed (JSON; the text line is
    /// said on its own when the dump finishes, [`DumpTotals::line`]).
    pub dump: Option<DumpTotals>,
}

impl Report {
    /// "zerocat: 1.00 GiB in 0.41 s (2.44 GiB/s) file -> pipe via splice", and
    /// "; interrupted" after a stop signal, as copy and relay say it.
    pub fn text(&self) -> String {
        let line = headline(
            &self.record,
            (self.seconds, self.moving_seconds),
            &self.src.label(),
            &self.dst.label(),
        );
        line + &connections_words(self.connections, self.refused, self.src.kind)
            + &interrupted_words(&self.ending)
    }

    pub fn json(&self) -> String {
        let mut o = json_head(
            self.command,
            &self.record,
            (self.seconds, self.moving_seconds),
            &self.src,
        );
        o.raw("dst", &named_json(&self.dst));
        if let Some((n, cut)) = self.connections {
            o.num("connections", n).num("connections_cut", cut);
        }
        if let Some(refused) = self.refused {
            o.num("refused", refused);
        }
        record_json(&mut o, &self.record);
        ending_json(&mut o, &self.ending);
        if let Some(dump) = &self.dump {
            o.raw("dump", &dump_json(dump));
        }
        o.finish()
    }

    pub fn render(&self, format: StatsFormat) -> String {
        match format {
            StatsFormat::Text => self.text(),
            StatsFormat::Json => self.json(),
        }
    }
}

/// One sink of a fan-out, as reported.
#[derive(Debug, Clone)]
pub struct SinkReport {
    pub named: Named,
    pub record: Record,
    pub ending: Ending,
    /// The sink's own write failed: the text line shows its error. A sink stopped by
    /// another one's failure says so in JSON only.
    pub failed_itself: bool,
}

/// The report of a fan-out (tee): the source, what left it, and one entry per sink.
#[derive(Debug, Clone)]
pub struct FanOutReport {
    pub src: Named,
    pub sinks: Vec<SinkReport>,
    /// The fan-out path(s) and the bytes taken from the source.
    pub record: Record,
    pub seconds: f64,
    /// Of `seconds`, the span bytes were moving in (`Meter::moving_seconds`).
    pub moving_seconds: Option<f64>,
    pub ending: Ending,
    /// `--keep-open`: as [`Report::connections`].
    pub connections: Option<(u64, u64)>,
    /// As [`Report::refused`].
    pub refused: Option<u64>,
    /// `--dump`: what went into the dump and how it was fed (JSON; the text line is
    /// said on its own when the dump finishes, [`DumpTotals::line`]).
    pub dump: Option<DumpTotals>,
}

impl FanOutReport {
    pub fn render(&self, format: StatsFormat) -> String {
        match format {
            StatsFormat::Text => self.text(),
            StatsFormat::Json => self.json(),
        }
    }

    /// "zerocat: 1.00 GiB in 0.41 s (2.44 GiB/s) file -> 2 sinks via tee: 'out' file via
    /// tee, '-' pipe via splice"
    pub fn text(&self) -> String {
        let total = self.record.bytes();
        let sinks: Vec<String> = self
            .sinks
            .iter()
            .map(|s| {
                let mut line = format!("'{}' {}", s.named.uri, s.named.label());
                if s.record.paths.is_empty() {
                    // Never written to: one that could not be opened, or a run that
                    // stopped before the fan-out began.
                    line.push_str(" (nothing written)");
                } else {
                    line.push_str(&format!(" via {}", route(&s.record)));
                }
                if s.record.bytes() != total && !s.record.paths.is_empty() {
                    line.push_str(&format!(" ({} bytes)", s.record.bytes()));
                }
                if let (true, Some(message)) = (s.failed_itself, s.ending.text()) {
                    line.push_str(&format!(" [{message}]"));
                }
                line
            })
            .collect();
        format!(
            "{}: {}{}",
            headline(
                &self.record,
                (self.seconds, self.moving_seconds),
                &self.src.label(),
                &sinks_word(self.sinks.len())
            ),
            sinks.join(", "),
            connections_words(self.connections, self.refused, self.src.kind)
                + &interrupted_words(&self.ending)
        )
    }

    pub fn json(&self) -> String {
        let sinks: Vec<String> = self
            .sinks
            .iter()
            .map(|s| {
                let mut o = JsonObject::new();
                named_fields(&mut o, &s.named);
                o.num("bytes", s.record.bytes());
                record_json(&mut o, &s.record);
                ending_json(&mut o, &s.ending);
                o.finish()
            })
            .collect();
        let mut o = json_head(
            "tee",
            &self.record,
            (self.seconds, self.moving_seconds),
            &self.src,
        );
        if let Some((n, cut)) = self.connections {
            o.num("connections", n).num("connections_cut", cut);
        }
        if let Some(refused) = self.refused {
            o.num("refused", refused);
        }
        record_json(&mut o, &self.record);
        ending_json(&mut o, &self.ending);
        o.raw("sinks", &json_array(&sinks));
        if let Some(dump) = &self.dump {
            o.raw("dump", &dump_json(dump));
        }
        o.finish()
    }
}

/// `--keep-open`'s count: "; 20 connections", "; 20 connections, 1 cut"; and the
/// clients a listener refused, as relay says it: "; 1 connection refused by allow/deny"
/// (a datagram source's: "; 3 datagrams refused by allow/deny").
fn connections_words(connections: Option<(u64, u64)>, refused: Option<u64>, src: FdKind) -> String {
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    let mut words = match connections {
        Some((n, 0)) => format!("; {n} connection{}", plural(n)),
        Some((n, cut)) => format!("; {n} connections, {cut} cut"),
        None => String::new(),
    };
    if let Some(n @ 1..) = refused {
        let what = match src {
            FdKind::Datagram => "datagram",
            _ => "connection",
        };
        words.push_str(&format!("; {n} {what}{} refused by allow/deny", plural(n)));
    }
    words
}

/// `--dump` in a JSON report: `{"path", "format", "bytes", "missed", "teed", "written",
/// "error"}` — `bytes` written into the file, `missed` those that passed but are not in
/// it, `teed`/`written` how the copied ones got there (tee(2) from the transfer's pipe,
/// or a write from its buffer).
pub fn dump_json(dump: &DumpTotals) -> String {
    let mut o = JsonObject::new();
    o.str("path", &dump.path.to_string_lossy())
        .str("format", dump.format.word())
        .num("bytes", dump.dumped)
        .num("missed", dump.missed)
        .num("teed", dump.teed)
        .num("written", dump.written)
        .str_or_null("error", dump.error.as_deref());
    o.finish()
}

/// What a text report ends with after SIGINT/SIGTERM: the bytes it gives are what was
/// delivered before the stop, not a whole transfer.
fn interrupted_words(ending: &Ending) -> String {
    match ending {
        Ending::Signal => "; interrupted".to_string(),
        Ending::IdleTimeout(idle) => format!(
            "; idle timeout (no byte for {})",
            crate::units::human_duration(idle.as_secs_f64())
        ),
        _ => String::new(),
    }
}

/// `text` with each "(os error N)" that std's io::Error puts in a message said as the errno's
/// name: "No such file or directory (ENOENT)". Every line zerocat writes to stderr goes
/// through here (the error, the report, copy's and relay's lines, `--log`), so the rule
/// is one.
/// `text` with its control characters (ESC, CR, LF, ... DEL, C1) escaped as `\u{1b}`: for a
/// line that carries bytes a peer sent (a rejected PROXY header, an AF_UNIX path from it),
/// so a client can neither forge log lines nor send escape sequences to a terminal.
pub fn printable(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

pub fn errno_names(text: &str) -> String {
    const MARK: &str = "(os error ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        let after = &rest[at + MARK.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let named = after[digits..]
            .starts_with(')')
            .then(|| after[..digits].parse::<i32>().ok())
            .flatten()
            .map(nix::errno::Errno::from_raw)
            .filter(|e| *e != nix::errno::Errno::UnknownErrno);
        match named {
            Some(errno) => {
                out.push_str(&rest[..at]);
                out.push_str(&format!("({errno:?})"));
                rest = &after[digits + 1..];
            }
            None => {
                out.push_str(&rest[..at + MARK.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// "1 sink", "3 sinks"
pub fn sinks_word(n: usize) -> String {
    match n {
        1 => "1 sink".to_string(),
        n => format!("{n} sinks"),
    }
}

/// "zerocat: 1.00 GiB in 0.41 s (2.44 GiB/s) file -> TO via ROUTE"; the rate over the
/// moving time when the run mostly waited (`units::amount_moving`). `time`: the wall
/// seconds and the moving ones.
fn headline(record: &Record, time: (f64, Option<f64>), src: &str, to: &str) -> String {
    format!(
        "zerocat: {} {src} -> {to} via {}",
        amount_moving(record.bytes(), time.0, time.1),
        route(record)
    )
}

/// The fields a transfer's JSON opens with: `command`, `bytes`, `seconds` (wall),
/// `moving_seconds` (0 when nothing moved), `src`.
fn json_head(command: &str, record: &Record, time: (f64, Option<f64>), src: &Named) -> JsonObject {
    let mut o = JsonObject::new();
    o.str("command", command)
        .num("bytes", record.bytes())
        .float("seconds", time.0)
        .float("moving_seconds", time.1.unwrap_or(0.0).min(time.0))
        .raw("src", &named_json(src));
    o
}

/// "copy_file_range -> userspace (EXDEV)": the paths in the order they ran, each
/// fallback's reason after the path it handed over to. A reflink the filesystem does not
/// do (ext4, tmpfs: the ordinary case) is said in words, not as an errno that reads like
/// an error: "copy_file_range (reflink unsupported here)". JSON keeps the fallback.
pub fn route(record: &Record) -> String {
    let mut s = String::new();
    let no_reflink = matches!(record.paths.first(), Some((DataPath::Reflink, 0)))
        && record.paths.len() > 1
        && record.fallbacks.iter().any(|f| {
            f.from == DataPath::Reflink
                && matches!(
                    f.reason,
                    Reason::Errno(Errno::EOPNOTSUPP | Errno::EXDEV | Errno::EINVAL | Errno::ENOTTY)
                )
        });
    let skip = usize::from(no_reflink);
    for (i, (path, _)) in record.paths.iter().enumerate().skip(skip) {
        if i > skip {
            s.push_str(" -> ");
        }
        s.push_str(path.name());
        if i == skip && no_reflink {
            s.push_str(" (reflink unsupported here)");
        } else if i > 0 {
            let previous = record.paths[i - 1].0;
            if let Some(f) = record.fallbacks.iter().find(|f| f.from == previous) {
                let _ = write!(s, " ({})", f.reason.short());
            }
        }
    }
    if let Some(f) = record.fallbacks.iter().find(|f| f.to.is_none()) {
        let _ = write!(s, " (refused: {})", f.reason.short());
    }
    s
}

/// A kind of request as `--stats json` keys it: "GET" -> "get", "stale connections" ->
/// "stale_connections".
pub fn request_key(kind: &str) -> String {
    kind.to_ascii_lowercase().replace(' ', "_")
}

/// `{"uri":..,"kind":..}`, and `"mptcp":{"active":..,"fallback":..}` when it was asked
pub fn named_json(named: &Named) -> String {
    let mut o = JsonObject::new();
    named_fields(&mut o, named);
    o.finish()
}

/// Adds `uri`, `kind` and, for `,mptcp`, `mptcp` (active, and why not: the errno that
/// refused an MPTCP socket, or "peer": the peer did not offer MPTCP).
fn named_fields(o: &mut JsonObject, named: &Named) {
    o.str("uri", &named.uri).str("kind", named.kind.name());
    if let Some(mptcp) = named.mptcp {
        o.raw("mptcp", &mptcp_json(mptcp));
    }
    if let Some(child) = named.child {
        o.raw("child", &child_json(child));
    }
    if let Some(tls) = named.tls_info() {
        o.raw("tls", &tls_json(tls));
    }
    if !named.requests.is_empty() {
        let mut r = JsonObject::new();
        for (kind, n) in &named.requests {
            r.raw(&request_key(kind), &n.to_string());
        }
        o.raw("requests", &r.finish());
    }
    if let Some(http) = &named.http {
        o.raw("http", &http_json(http));
    }
}

/// `{"version":"TLSv1.3","cipher":..,"sni":..,"alpn":..,"path":"userspace","ktls":false,
/// "fallback":"ENOENT"}`: a TLS endpoint's handshake, and its record layer (the kernel's,
/// or rustls' in userspace with the errno of the kernel's refusal).
pub fn tls_json(tls: &TlsInfo) -> String {
    let mut t = JsonObject::new();
    t.str("version", tls.version)
        .str("cipher", &tls.cipher)
        .str_or_null("sni", tls.sni.as_deref())
        .str_or_null("alpn", tls.alpn.as_deref());
    match tls.kernel {
        Ok(()) => t
            .str("path", "ktls")
            .raw("ktls", "true")
            .raw("fallback", "null"),
        Err(errno) => t
            .str("path", "userspace")
            .raw("ktls", "false")
            .str("fallback", &format!("{errno:?}")),
    };
    t.finish()
}

/// `{"pid":..,"exit":3,"signal":null}`: how a command's child ended.
pub fn child_json(child: ChildExit) -> String {
    let mut c = JsonObject::new();
    c.num("pid", u64::from(child.pid));
    match child.code {
        Some(code) => c.raw("exit", &code.to_string()),
        None => c.raw("exit", "null"),
    };
    c.str_or_null("signal", child.signal_name().as_deref());
    c.finish()
}

/// `{"active":..,"fallback":..}`: whether MPTCP runs, else the errno that refused an
/// MPTCP socket or "peer" (the peer did not offer MPTCP).
pub fn mptcp_json(mptcp: Mptcp) -> String {
    let mut m = JsonObject::new();
    m.bool("active", mptcp == Mptcp::Active)
        .str_or_null("fallback", mptcp.fallback().as_deref());
    m.finish()
}

/// Adds `paths` and `fallbacks` of a record to an object.
pub fn record_json(o: &mut JsonObject, record: &Record) {
    let paths: Vec<String> = record
        .paths
        .iter()
        .map(|(path, bytes)| {
            let mut p = JsonObject::new();
            p.str("path", path.name()).num("bytes", *bytes);
            p.finish()
        })
        .collect();
    let fallbacks: Vec<String> = record
        .fallbacks
        .iter()
        .map(|f| {
            let mut p = JsonObject::new();
            p.str("from", f.from.name())
                .str_or_null("to", f.to.map(|to| to.name()))
                .str("errno", &f.reason.short())
                .str("reason", &f.reason.to_string());
            p.finish()
        })
        .collect();
    o.raw("paths", &json_array(&paths))
        .raw("fallbacks", &json_array(&fallbacks));
}

/// Adds `ended` (eof, error, signal) and `error` (its text, or null).
pub fn ending_json(o: &mut JsonObject, ending: &Ending) {
    ended_json(o, ending.word(), ending.text());
}

/// Adds `ended` (a word) and `error` (its text, or null), for an ending of any type.
pub fn ended_json(o: &mut JsonObject, word: &str, text: Option<&str>) {
    o.str("ended", word).str_or_null("error", text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_error_numbers_become_errno_names() {
        assert_eq!(
            errno_names("cannot open 'x': No such file or directory (os error 2)"),
            "cannot open 'x': No such file or directory (ENOENT)"
        );
        assert_eq!(
            errno_names("a (os error 28); b (os error 32)"),
            "a (ENOSPC); b (EPIPE)"
        );
        assert_eq!(
            errno_names("(os error x) (os error 99999)"),
            "(os error x) (os error 99999)"
        );
        assert_eq!(errno_names("plain"), "plain");
    }

    use crate::engine::{DataPath, Fallback, Reason};
    use nix::errno::Errno;

    #[test]
    fn route_names_each_fallback_after_the_path_it_handed_to() {
        let record = Record {
            paths: vec![(DataPath::CopyFileRange, 0), (DataPath::Userspace, 12)],
            fallbacks: vec![Fallback {
                from: DataPath::CopyFileRange,
                to: Some(DataPath::Userspace),
                reason: Reason::Errno(Errno::EXDEV),
            }],
        };
        assert_eq!(route(&record), "copy_file_range -> userspace (EXDEV)");
    }

    #[test]
    fn a_fan_out_line_shows_the_error_of_a_sink_that_failed_itself_only() {
        let record = |bytes| Record {
            paths: vec![(DataPath::Tee, bytes)],
            fallbacks: Vec::new(),
        };
        let sink = |uri: &str, bytes, ending, failed_itself| SinkReport {
            named: Named {
                uri: uri.into(),
                kind: FdKind::File,
                mptcp: None,
                child: None,
                tls: None,
                requests: Vec::new(),
                http: None,
            },
            record: record(bytes),
            ending,
            failed_itself,
        };
        let report = FanOutReport {
            src: Named {
                uri: "-".into(),
                kind: FdKind::Pipe,
                mptcp: None,
                child: None,
                tls: None,
                requests: Vec::new(),
                http: None,
            },
            sinks: vec![
                sink("a", 4, Ending::Error("disk full".into()), true),
                sink("b", 10, Ending::Error("stopped: disk full".into()), false),
            ],
            record: record(10),
            seconds: 1.0,
            moving_seconds: None,
            ending: Ending::Error("disk full".into()),
            connections: None,
            refused: None,
            dump: None,
        };
        let text = report.text();
        assert!(text.starts_with("zerocat: 10 B in "), "{text}");
        assert!(
            text.ends_with(
                " pipe -> 2 sinks via tee: 'a' file via tee (4 bytes) [disk full], 'b' file via tee"
            ),
            "{text}"
        );
        let json = report.json();
        assert!(
            json.contains(r#""ended":"error","error":"stopped: disk full"}]"#),
            "{json}"
        );
    }
}
