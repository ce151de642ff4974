//! Hardening of `relay` (issue 8, phase 3): faults injected with strace into the relay's
//! splice, accept, socket/connect and epoll paths, SIGINT/SIGTERM with connections in
//! flight, resets against clean half-closes, and the 50-connection soak.
//!
//! The rig: each connection `c` carries two streams of its own, `A` (client -> backend) and
//! `B` (backend -> client), both sent at once. A stream is blocks of a fixed pseudo-random
//! MiB stamped with (block number, connection, direction), so a lost, repeated, reordered or
//! misrouted byte cannot compare equal; every receiver checks each byte as it arrives and
//! hashes what it saw. The backend learns `c` from the stamp of the first block.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::net::Shutdown;

use super::*;
use crate::rig::{accept_until, connections, dir_paths, Finished, Rig, Running};
use crate::util::linger_zero;

// =============================================================================================
// Streams: generated, checked and hashed by block
// =============================================================================================

const BLOCK: usize = 1 << 20;
/// The stamp: block number, then connection * 2 + direction.
const STAMP: usize = 16;
const A: u64 = 0;
const B: u64 = 1;

fn base_block() -> &'static [u8] {
    static BASE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BASE.get_or_init(|| data(BLOCK))
}

/// Block `k` of stream (`conn`, `dir`).
fn stream_block(conn: u64, dir: u64, k: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(base_block());
    out[..8].copy_from_slice(&k.to_le_bytes());
    out[8..16].copy_from_slice(&(conn * 2 + dir).to_le_bytes());
}

/// How a receiver's stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ending {
    /// read() returned 0: a FIN.
    Eof,
    /// ECONNRESET: an RST.
    Reset,
    Other(String),
}

/// What one receiver saw.
#[derive(Debug, Clone)]
struct Seen {
    bytes: u64,
    /// Every byte so far was the stream's byte at that offset.
    exact: bool,
    ending: Ending,
    hash: u64,
}

/// Checks bytes against stream (`conn`, `dir`) as they arrive.
struct Checker {
    conn: u64,
    dir: u64,
    pos: u64,
    current: u64,
    expected: Vec<u8>,
    exact: bool,
    hash: std::collections::hash_map::DefaultHasher,
}

impl Checker {
    fn new(conn: u64, dir: u64) -> Checker {
        Checker {
            conn,
            dir,
            pos: 0,
            current: u64::MAX,
            expected: Vec::with_capacity(BLOCK),
            exact: true,
            hash: Default::default(),
        }
    }

    fn feed(&mut self, mut got: &[u8]) {
        self.hash.write(got);
        while !got.is_empty() {
            let (k, off) = (self.pos / BLOCK as u64, (self.pos % BLOCK as u64) as usize);
            if k != self.current {
                stream_block(self.conn, self.dir, k, &mut self.expected);
                self.current = k;
            }
            let take = got.len().min(BLOCK - off);
            if self.exact && got[..take] != self.expected[off..off + take] {
                self.exact = false;
            }
            got = &got[take..];
            self.pos += take as u64;
        }
    }

    /// Reads `s` to its end (FIN, RST or another error).
    fn drain(mut self, mut s: &TcpStream, progress: &AtomicU64) -> Seen {
        let mut buf = vec![0u8; 256 << 10];
        let ending = loop {
            match s.read(&mut buf) {
                Ok(0) => break Ending::Eof,
                Ok(n) => {
                    self.feed(&buf[..n]);
                    progress.store(self.pos, Ordering::SeqCst);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break Ending::Reset,
                Err(e) => break Ending::Other(e.to_string()),
            }
        };
        Seen {
            bytes: self.pos,
            exact: self.exact,
            ending,
            hash: self.hash.finish(),
        }
    }
}

/// How a sender behaves.
#[derive(Debug, Clone, Copy, Default)]
struct Sender {
    len: u64,
    /// Sleep this long after each 64 KiB (a slow peer).
    pace: Option<Duration>,
    /// After this many bytes, close with SO_LINGER {1, 0} (an RST) instead of going on.
    reset_after: Option<u64>,
}

/// What a sender did: bytes written (accepted by its socket), and whether it hashed them.
#[derive(Debug, Clone, Default)]
struct Sent {
    bytes: u64,
    hash: u64,
    /// The write error that stopped it, if any.
    error: Option<String>,
    reset: bool,
}

/// Sends stream (`conn`, `dir`) as `how` says; half-closes after the last byte (FIN).
/// `wrap_up` set: stops at the next chunk and half-closes (the signal tests).
fn send_stream(s: &TcpStream, conn: u64, dir: u64, how: Sender, wrap_up: &AtomicBool) -> Sent {
    let mut sent = Sent::default();
    let mut hash = std::collections::hash_map::DefaultHasher::new();
    let mut block = Vec::with_capacity(BLOCK);
    let chunk = if how.pace.is_some() { 64 << 10 } else { BLOCK };
    let limit = how.reset_after.unwrap_or(how.len).min(how.len);
    let mut w = s;
    'blocks: for k in 0..how.len.div_ceil(BLOCK as u64) {
        stream_block(conn, dir, k, &mut block);
        let start = k * BLOCK as u64;
        block.truncate((how.len - start).min(BLOCK as u64) as usize);
        for piece in block.chunks(chunk) {
            if wrap_up.load(Ordering::SeqCst) || sent.bytes >= limit {
                break 'blocks;
            }
            let piece = &piece[..piece.len().min((limit - sent.bytes) as usize)];
            if let Err(e) = w.write_all(piece) {
                sent.error = Some(e.to_string());
                sent.hash = hash.finish();
                return sent;
            }
            hash.write(piece);
            sent.bytes += piece.len() as u64;
            if let Some(pause) = how.pace {
                thread::sleep(pause);
            }
        }
    }
    sent.hash = hash.finish();
    if how.reset_after.is_some_and(|n| n < how.len) {
        // The RST goes out when the last fd closes (duplex drops it); shutting the read
        // side ends our own reader without sending anything (a SHUT_WR would send a FIN).
        linger_zero(s);
        let _ = s.shutdown(Shutdown::Read);
        sent.reset = true;
    } else {
        let _ = s.shutdown(Shutdown::Write);
    }
    sent
}

/// One side of one connection, as the test saw it.
#[derive(Debug, Clone)]
struct Side {
    sent: Sent,
    seen: Seen,
}

impl Side {
    /// An RST reached this side. The socket says ECONNRESET once (the error is cleared as
    /// it is read), then EOF; with a reader and a writer on one socket, the writer may be
    /// the one told (ECONNRESET, or EPIPE: an RST shuts the send side, a FIN does not).
    fn reset_seen(&self) -> bool {
        self.seen.ending == Ending::Reset
            || self
                .sent
                .error
                .as_deref()
                .is_some_and(|e| e.contains("os error 104") || e.contains("os error 32"))
    }
}

/// Sends and receives at once on `s`; returns both halves.
fn duplex(
    s: TcpStream,
    conn: u64,
    dir: u64,
    how: Sender,
    first: &[u8],
    progress: Arc<AtomicU64>,
    wrap_up: Arc<AtomicBool>,
) -> Side {
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let w = s.try_clone().unwrap();
    let sender = thread::spawn(move || send_stream(&w, conn, dir, how, &wrap_up));
    let mut checker = Checker::new(conn, 1 - dir);
    checker.feed(first);
    let seen = checker.drain(&s, &progress);
    let sent = sender.join().unwrap();
    if sent.reset {
        drop(s); // the RST goes out now (the sender's clone is gone)
    }
    Side { sent, seen }
}

// =============================================================================================
// The backend and the clients
// =============================================================================================

/// A TCP server on 127.0.0.1: every connection reads stream A of its connection (learnt
/// from the first block's stamp) while sending stream B.
struct Backend {
    addr: String,
    sides: Arc<Mutex<BTreeMap<u64, Side>>>,
    /// Bytes each connection's backend has received so far.
    progress: Arc<Mutex<BTreeMap<u64, Arc<AtomicU64>>>>,
    stop: Arc<AtomicBool>,
}

impl Backend {
    fn start(how: Sender) -> Backend {
        let never = Arc::new(AtomicBool::new(false));
        Backend::start_with(move |_| (how, never.clone()))
    }

    /// `how(conn)`: each connection's sender, and the flag that makes it wrap up.
    fn start_with(
        how: impl Fn(u64) -> (Sender, Arc<AtomicBool>) + Send + Sync + 'static,
    ) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let sides = Arc::new(Mutex::new(BTreeMap::new()));
        let progress = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, p2, stop2) = (sides.clone(), progress.clone(), stop.clone());
        let how = Arc::new(how);
        thread::spawn(move || {
            while let Some(s) = accept_until(&listener, &stop2) {
                let (sides, progress, how) = (s2.clone(), p2.clone(), how.clone());
                thread::spawn(move || {
                    s.set_read_timeout(Some(DEADLINE)).unwrap();
                    let mut first = [0u8; STAMP];
                    if (&s).read_exact(&mut first).is_err() {
                        return; // reset before the stamp: the client side will say so
                    }
                    let conn = u64::from_le_bytes(first[8..16].try_into().unwrap()) / 2;
                    let counter = Arc::new(AtomicU64::new(STAMP as u64));
                    progress.lock().unwrap().insert(conn, counter.clone());
                    let (how, wrap_up) = how(conn);
                    let side = duplex(s, conn, B, how, &first, counter, wrap_up);
                    sides.lock().unwrap().insert(conn, side);
                });
            }
        });
        Backend {
            addr,
            sides,
            progress,
            stop,
        }
    }

    fn received(&self, conn: u64) -> u64 {
        self.progress
            .lock()
            .unwrap()
            .get(&conn)
            .map_or(0, |p| p.load(Ordering::SeqCst))
    }

    /// Waits until the backends of `conns` have finished; returns every backend's side.
    fn wait_for(&self, conns: &[u64]) -> BTreeMap<u64, Side> {
        let started = Instant::now();
        loop {
            {
                let sides = self.sides.lock().unwrap();
                if conns.iter().all(|c| sides.contains_key(c)) {
                    return sides.clone();
                }
            }
            assert!(
                started.elapsed() < DEADLINE,
                "backends of {conns:?} never finished"
            );
            thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A client of the relay: connection `conn`, sending stream A while reading stream B.
struct Client {
    conn: u64,
    /// The client's own address: the relay's report names it as the connection's peer.
    local: String,
    received: Arc<AtomicU64>,
    thread: JoinHandle<Side>,
}

impl Client {
    fn start(addr: &str, conn: u64, how: Sender, wrap_up: Arc<AtomicBool>) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        let local = s.local_addr().unwrap().to_string();
        let received = Arc::new(AtomicU64::new(0));
        let r = received.clone();
        let thread = thread::spawn(move || duplex(s, conn, A, how, &[], r, wrap_up));
        Client {
            conn,
            local,
            received,
            thread,
        }
    }
}

// =============================================================================================
// The relay under test
// =============================================================================================

/// `zerocat --stats json GLOBAL relay OPTS tcp-listen:0,backlog=128 tcp:BACKEND`, maybe
/// under strace.
fn start_relay(wrap: &[String], global: &[&str], opts: &[&str], backend: &str) -> Running {
    let backend = format!("tcp:{backend}");
    let mut args = opts.to_vec();
    args.extend(["tcp-listen:0,backlog=128", &backend]);
    Rig::new().under(wrap).args(global).relay(&args)
}

/// Every fallback of every connection's directions, with the direction's name.
fn relay_fallbacks(report: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for c in connections(report) {
        for key in ["a_to_b", "b_to_a"] {
            for f in c[key]["fallbacks"].as_array().unwrap() {
                out.push((key.to_string(), f.clone()));
            }
        }
    }
    out
}

/// One connection of a finished run, both sides and the report's entry.
struct ConnRun<'a> {
    conn: u64,
    client: &'a Side,
    /// None: the backend never got the stamp (the connection broke first).
    backend: Option<&'a Side>,
    entry: &'a Value,
}

impl ConnRun<'_> {
    /// What the backend received: bytes, exact, and whether it saw the RST.
    fn backend_seen(&self) -> (u64, bool, Ending, bool) {
        self.backend.map_or((0, true, Ending::Reset, true), |b| {
            (
                b.seen.bytes,
                b.seen.exact,
                b.seen.ending.clone(),
                b.reset_seen(),
            )
        })
    }

    /// Ended cleanly: each side got the other's every byte (hash equal), then EOF; the
    /// report counts exactly that.
    fn exact(&self) -> Result<(), String> {
        let c = self.conn;
        let b = self
            .backend
            .ok_or(format!("conn {c}: the backend saw nothing"))?;
        if self.entry["ended"] != "eof" {
            return Err(format!("conn {c}: ended {}", self.entry));
        }
        for (what, sent, seen, key) in [
            ("A -> B", &self.client.sent, &b.seen, "a_to_b"),
            ("B -> A", &b.sent, &self.client.seen, "b_to_a"),
        ] {
            if sent.error.is_some() || seen.ending != Ending::Eof || !seen.exact {
                return Err(format!("conn {c} {what}: sent {sent:?}, seen {seen:?}"));
            }
            if seen.bytes != sent.bytes || seen.hash != sent.hash {
                return Err(format!("conn {c} {what}: sent {sent:?}, seen {seen:?}"));
            }
            if self.entry[key]["bytes"].as_u64() != Some(seen.bytes) {
                return Err(format!(
                    "conn {c} {what}: report {} B, seen {} B",
                    self.entry[key]["bytes"], seen.bytes
                ));
            }
            if self.entry[key]["undelivered"].as_u64() != Some(0) {
                return Err(format!("conn {c} {what}: {}", self.entry));
            }
            let paths = dir_paths(&self.entry[key])?;
            if seen.bytes > 0 && paths.is_empty() {
                return Err(format!("conn {c} {what}: no path reported"));
            }
        }
        Ok(())
    }

    /// Broke (error or reset): each receiver holds an exact prefix of no more than the
    /// report counts, and no receiver of a cut stream took it for a clean end (EOF).
    fn broken(&self) -> Result<(), String> {
        let c = self.conn;
        let ended = self.entry["ended"].as_str().unwrap_or_default();
        if !["error", "reset", "connect-failed"].contains(&ended) {
            return Err(format!("conn {c}: ended {ended}, want error or reset"));
        }
        if self.entry["error"].as_str().map_or(true, str::is_empty) {
            return Err(format!("conn {c}: no error text: {}", self.entry));
        }
        let (b_bytes, b_exact, b_ending, b_reset) = self.backend_seen();
        let want_b = self.client.sent.bytes;
        let want_a = self.backend.map_or(u64::MAX, |b| b.sent.bytes);
        for (what, bytes, exact, ending, reset, full, key) in [
            (
                "A -> B", b_bytes, b_exact, b_ending, b_reset, want_b, "a_to_b",
            ),
            (
                "B -> A",
                self.client.seen.bytes,
                self.client.seen.exact,
                self.client.seen.ending.clone(),
                self.client.reset_seen(),
                want_a,
                "b_to_a",
            ),
        ] {
            let reported = self.entry[key]["bytes"].as_u64().unwrap();
            if !exact {
                return Err(format!("conn {c} {what}: wrong bytes"));
            }
            if bytes > reported {
                return Err(format!(
                    "conn {c} {what}: {bytes} B seen > {reported} reported"
                ));
            }
            if ending == Ending::Eof && !reset && bytes < full {
                return Err(format!(
                    "conn {c} {what}: a clean EOF after {bytes} of {full} B"
                ));
            }
            dir_paths(&self.entry[key])?;
        }
        Ok(())
    }
}

/// Each connection: its number, the client's side, the backend's (None: it never got the
/// stamp), the client's address.
type Conns = Vec<(u64, Side, Option<Side>, String)>;

/// Starts clients 0..n at once (each sending as `how` says); waits for every one of them.
/// Returns each one's number, side and address.
fn run_clients(addr: &str, n: u64, how: Sender) -> Vec<(u64, Side, String)> {
    let never = Arc::new(AtomicBool::new(false));
    let clients: Vec<Client> = (0..n)
        .map(|c| Client::start(addr, c, how, never.clone()))
        .collect();
    join_clients(clients)
}

fn join_clients(clients: Vec<Client>) -> Vec<(u64, Side, String)> {
    clients
        .into_iter()
        .map(|client| (client.conn, client.thread.join().unwrap(), client.local))
        .collect()
}

/// Runs `n` connections at once against `relay` and `backend` (A as `how_a` says), waits for
/// every client and backend, stops the relay.
fn serve(relay: Running, backend: &Backend, n: u64, how_a: Sender) -> (Finished, Conns) {
    let done = run_clients(relay.addr(), n, how_a);
    // A backend that never got its stamp never reports; give the others a moment.
    let started = Instant::now();
    while backend.sides.lock().unwrap().len() < backend.progress.lock().unwrap().len() {
        assert!(started.elapsed() < DEADLINE, "backends never finished");
        thread::sleep(Duration::from_millis(2));
    }
    let end = relay.stop();
    let sides = backend.sides.lock().unwrap().clone();
    let runs = done
        .into_iter()
        .map(|(c, side, local)| (c, side, sides.get(&c).cloned(), local))
        .collect();
    (end, runs)
}

// =============================================================================================
// Fault injection
// =============================================================================================

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RelayExpect {
    /// Exit 0 (--once), bytes exact both ways, one direction names splice -> userspace
    /// with the errno.
    FellBack,
    /// Exactly one of the connections broke (error/reset, checked by [`ConnRun::broken`]);
    /// every other one is exact.
    OneBroken,
    /// Every connection exact, no fallback.
    Exact,
}

struct RelayFault {
    /// strace `trace=` and `inject=` syscalls.
    syscalls: &'static str,
    action: &'static str,
    when: &'static str,
    via: &'static str,
    conns: u64,
    expect: RelayExpect,
}

const fn fault(
    syscalls: &'static str,
    action: &'static str,
    when: &'static str,
    conns: u64,
    expect: RelayExpect,
) -> RelayFault {
    RelayFault {
        syscalls,
        action,
        when,
        via: "auto",
        conns,
        expect,
    }
}

/// Splice call 1 is the first splice of a connection into its A -> B pipe (the client's
/// bytes, or EAGAIN); call 2 the next one in or out. Either way, before splice delivered a
/// byte of that direction: an unsupported errno falls back. By call 60 several MiB went
/// through splice on every direction that runs: errors, whatever the errno.
const RELAY_FAULTS: &[RelayFault] = &[
    fault("splice", "error=EINVAL", "1", 1, RelayExpect::FellBack),
    fault("splice", "error=EOPNOTSUPP", "1", 1, RelayExpect::FellBack),
    fault("splice", "error=ENOSYS", "1", 1, RelayExpect::FellBack),
    fault("splice", "error=EPERM", "1", 1, RelayExpect::FellBack),
    fault("splice", "error=EXDEV", "1", 1, RelayExpect::FellBack),
    fault("splice", "error=EINVAL", "2", 1, RelayExpect::FellBack),
    fault("splice", "error=EIO", "60", 3, RelayExpect::OneBroken),
    fault("splice", "error=ENOSPC", "60", 3, RelayExpect::OneBroken),
    fault("splice", "error=EPIPE", "60", 3, RelayExpect::OneBroken),
    fault(
        "splice",
        "error=ECONNRESET",
        "60",
        3,
        RelayExpect::OneBroken,
    ),
    fault("splice", "error=EINVAL", "60", 3, RelayExpect::OneBroken),
    // The same on the userspace path: read from a source, write to a sink.
    RelayFault {
        via: "userspace",
        ..fault("read", "error=EIO", "60", 3, RelayExpect::OneBroken)
    },
    RelayFault {
        via: "userspace",
        ..fault("write", "error=EPIPE", "60", 3, RelayExpect::OneBroken)
    },
    // Interrupted calls: retried, nothing counted twice.
    // (Not connect: strace skips the call it fails, while a real EINTR leaves the
    // connection under way.)
    fault(
        "splice,epoll_pwait,accept4",
        "error=EINTR",
        "1+2",
        3,
        RelayExpect::Exact,
    ),
    // The dial: socket() out of fds (call 1 is the listener's own), then a connect that
    // fails once, for connection 0 only; the next clients are served.
    fault("socket", "error=EMFILE", "2..4", 3, RelayExpect::Exact),
    fault(
        "connect",
        "error=ENETUNREACH",
        "1",
        3,
        RelayExpect::OneBroken,
    ),
];

fn run_relay_fault(case: &RelayFault) -> Result<String, String> {
    let logdir = tempdir();
    let log = logdir.path().join("strace.log");
    let wrap = strace_wrap(&log, case.syscalls, case.action, case.when);
    let len = 4 << 20;
    let backend = Backend::start(Sender {
        len,
        ..Default::default()
    });
    let once: &[&str] = if case.conns == 1 { &["--once"] } else { &[] };
    // tcp -> tcp under auto starts in userspace (flow.rs's prior): a splice fault needs
    // the directions to splice from the first byte.
    let mut opts = once.to_vec();
    if case.via == "auto" && case.syscalls.contains("splice") {
        opts.push("--splice-first");
    }
    let relay = start_relay(&wrap, &["--via", case.via], &opts, &backend.addr);
    let how_a = Sender {
        len,
        ..Default::default()
    };
    let (end, runs) = serve(relay, &backend, case.conns, how_a);
    let what = format!(
        "relay via {} x{} {}:{}@{}",
        case.via, case.conns, case.syscalls, case.action, case.when
    );
    let fail = |why: String| Err(format!("{what}: {why}\nstderr: {}", end.stderr));
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    if !log_text.contains("INJECTED") {
        return fail(format!("strace never injected the fault; log:\n{log_text}"));
    }
    let mut broken = Vec::new();
    for (c, client, backend_side, local) in &runs {
        let run = ConnRun {
            conn: *c,
            client,
            backend: backend_side.as_ref(),
            entry: end.conn(local),
        };
        if run.exact().is_err() {
            if let Err(why) = run.broken() {
                return fail(why);
            }
            broken.push((*c, run.entry["ended"].as_str().unwrap().to_string()));
        }
    }
    let fallbacks = relay_fallbacks(end.report());
    let want_code = if case.conns == 1 { 0 } else { 130 };
    match case.expect {
        RelayExpect::FellBack | RelayExpect::Exact => {
            if !broken.is_empty() {
                return fail(format!("connections broke: {broken:?}"));
            }
            if end.code() != Some(want_code) {
                return fail(format!("exit {:?}", end.code()));
            }
        }
        RelayExpect::OneBroken => {
            if broken.len() != 1 {
                return fail(format!("{} connections broke, want 1", broken.len()));
            }
            if end.report()["failed"].as_u64() != Some(1) || end.code() != Some(130) {
                return fail(format!(
                    "exit {:?}, failed {}",
                    end.code(),
                    end.report()["failed"]
                ));
            }
        }
    }
    let errno = case.action.trim_start_matches("error=");
    if case.expect == RelayExpect::FellBack {
        let named: Vec<_> = fallbacks
            .iter()
            .filter(|(_, f)| f["from"] == "splice" && f["to"] == "userspace" && f["errno"] == errno)
            .collect();
        if named.len() != 1 || fallbacks.len() != 1 {
            return fail(format!("fallbacks {fallbacks:?}: want one naming {errno}"));
        }
        let dir = named[0].0.clone();
        let paths = dir_paths(&end.report()["connections"][0][&dir])?;
        if paths.first().map(String::as_str) != Some("splice")
            || !paths.contains(&"userspace".into())
        {
            return fail(format!("{dir} paths {paths:?}"));
        }
        return Ok(format!(
            "{what} | {dir} fell back to userspace ({errno}) | exact both ways ({len} B each)"
        ));
    }
    if !fallbacks.is_empty() && case.syscalls != "splice" {
        return fail(format!("unexpected fallbacks {fallbacks:?}"));
    }
    let injected = log_text.matches("INJECTED").count();
    Ok(match case.expect {
        RelayExpect::OneBroken => format!(
            "{what} | conn {} {} (the others exact), exit 130 | prefixes exact, no clean EOF \
             on a cut stream",
            broken[0].0, broken[0].1
        ),
        _ => format!("{what} | {injected} injected, retried | exact both ways"),
    })
}

#[test]
fn relay_faults_in_splice_read_write_socket_connect_epoll() {
    if strace_missing() {
        return;
    }
    run_cases(RELAY_FAULTS.iter().collect(), |case| run_relay_fault(case));
}

/// accept(2) failing: out of fds (EMFILE, ENFILE) the relay backs off — the client waits in
/// the backlog — and serves it once accept works again; a failed pending connection
/// (ECONNABORTED, EPROTO) is skipped at once. Never a spin: strace counts the accepts.
#[test]
fn relay_accept_failures_keep_serving_without_spinning() {
    if strace_missing() {
        return;
    }
    let mut cases = Vec::new();
    for errno in ["EMFILE", "ENFILE", "ECONNABORTED", "EPROTO"] {
        cases.push((errno, "1..4"));
    }
    run_cases(cases, |&(errno, when)| {
        let logdir = tempdir();
        let log = logdir.path().join("strace.log");
        let wrap = strace_wrap(&log, "accept4", &format!("error={errno}"), when);
        let backend = Backend::start(Sender {
            len: 1 << 20,
            ..Default::default()
        });
        let relay = start_relay(&wrap, &[], &[], &backend.addr);
        let how = Sender {
            len: 1 << 20,
            ..Default::default()
        };
        let (end, runs) = serve(relay, &backend, 2, how);
        let what = format!("relay accept4:error={errno}@{when}");
        let log_text = std::fs::read_to_string(&log).unwrap();
        let injected = log_text.matches("INJECTED").count();
        let calls = log_text.matches("accept4(").count();
        let check = || -> Result<(), String> {
            if injected == 0 {
                return Err("nothing injected".into());
            }
            for (c, client, b, local) in &runs {
                ConnRun {
                    conn: *c,
                    client,
                    backend: b.as_ref(),
                    entry: end.conn(local),
                }
                .exact()?;
            }
            if end.code() != Some(130) {
                return Err(format!("exit {:?}", end.code()));
            }
            // 4 failures, 2 accepts, an EAGAIN after a burst: accept4 runs only when epoll
            // says the listener is ready (it ran once per turn of the loop: 12-23 here).
            if calls > 10 {
                return Err(format!("{calls} accept4 calls: spinning"));
            }
            Ok(())
        };
        check().map_err(|why| format!("{what}: {why}\nstderr: {}", end.stderr))?;
        Ok(format!(
            "{what} | kept serving, {calls} accept4 calls in all | 2 connections exact"
        ))
    });
}

/// A persistent EMFILE (every accept fails) with a client waiting: the relay backs off
/// (20 ms doubling to 1 s) instead of asking again and again.
#[test]
fn relay_persistent_emfile_backs_off() {
    if strace_missing() {
        return;
    }
    let logdir = tempdir();
    let log = logdir.path().join("strace.log");
    let wrap = strace_wrap(&log, "accept4", "error=EMFILE", "1+");
    let backend = Backend::start(Sender::default());
    let relay = start_relay(&wrap, &[], &[], &backend.addr);
    let _waiting = TcpStream::connect(relay.addr()).unwrap();
    thread::sleep(Duration::from_millis(1500));
    let end = relay.stop();
    let calls = std::fs::read_to_string(&log)
        .unwrap()
        .matches("accept4(")
        .count();
    let complaints = end.stderr.matches("cannot accept").count();
    assert_eq!(end.code(), Some(130), "{}", end.stderr);
    assert!((2..=15).contains(&calls), "{calls} accept4 calls in 1.5 s");
    assert_eq!(complaints, calls, "{}", end.stderr);
    assert_eq!(end.report()["connections"], serde_json::json!([]));
    eprintln!(
        "relay accept4 EMFILE on every call for 1.5 s | backed off, {calls} calls | exit 130"
    );
}

// =============================================================================================
// Signals: SIGINT / SIGTERM with connections in flight
// =============================================================================================

/// Four connections, each way a slow stream (64 KiB every 5 ms). At the signal the relay
/// stops accepting (a new client is refused) and gives the ones in flight GRACE: connections
/// 0 and 2 wrap up (each side half-closes) and end cleanly, every byte delivered;
/// 1 and 3 go on and are cut when GRACE ends. Exit 130, report printed, and each
/// receiver holds exactly the bytes the report counts for its direction.
#[test]
fn relay_sigint_and_sigterm_with_connections_in_flight() {
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        for via in ["auto", "userspace"] {
            relay_signal_case(signal, via);
        }
    }
}

fn relay_signal_case(signal: Signal, via: &str) {
    let name = format!("relay via {via} {signal}, 4 connections in flight");
    let slow = Sender {
        len: 1 << 30,
        pace: Some(Duration::from_millis(5)),
        reset_after: None,
    };
    let flags: Vec<Arc<AtomicBool>> = (0..4).map(|_| Arc::new(AtomicBool::new(false))).collect();
    let f = flags.clone();
    let backend = Backend::start_with(move |c| (slow, f[c as usize % 4].clone()));
    let relay = start_relay(&[], &["--via", via], &[], &backend.addr);
    let clients: Vec<Client> = (0..4u64)
        .map(|c| Client::start(relay.addr(), c, slow, flags[c as usize].clone()))
        .collect();
    let started = Instant::now();
    while !clients.iter().all(|c| {
        c.received.load(Ordering::SeqCst) >= 256 << 10 && backend.received(c.conn) >= 256 << 10
    }) {
        assert!(started.elapsed() < DEADLINE, "{name}: bytes do not flow");
        thread::sleep(Duration::from_millis(2));
    }
    relay.signal(signal);
    flags[0].store(true, Ordering::SeqCst);
    flags[2].store(true, Ordering::SeqCst);
    thread::sleep(Duration::from_millis(300));
    let refused = TcpStream::connect(relay.addr());
    assert!(
        refused.is_err(),
        "{name}: a new client was accepted during the grace"
    );
    let done = join_clients(clients);
    let sides = backend.wait_for(&[0, 1, 2, 3]);
    let end = relay.finish();
    assert_eq!(end.code(), Some(130), "{name}: {}", end.stderr);
    assert_eq!(end.report()["ended"], "signal", "{name}");
    for (c, client, local) in &done {
        let run = ConnRun {
            conn: *c,
            client,
            backend: sides.get(c),
            entry: end.conn(local),
        };
        if c % 2 == 0 {
            run.exact()
                .unwrap_or_else(|e| panic!("{name}: wrapped up in the grace: {e}"));
            continue;
        }
        assert_eq!(run.entry["ended"], "signal", "{name}: {}", run.entry);
        let backend_side = run.backend.unwrap();
        for (what, seen, key) in [
            ("A -> B", &backend_side.seen, "a_to_b"),
            ("B -> A", &client.seen, "b_to_a"),
        ] {
            let reported = run.entry[key]["bytes"].as_u64().unwrap();
            assert!(seen.exact, "{name} conn {c} {what}: wrong bytes");
            assert_eq!(
                seen.bytes, reported,
                "{name} conn {c} {what}: received != reported"
            );
            // Nothing the relay took from a source stayed in its pipe or buffer: the
            // receivers read promptly, so the last flush had room.
            assert_eq!(
                run.entry[key]["undelivered"].as_u64(),
                Some(0),
                "{name} conn {c} {what}: {}",
                run.entry
            );
            assert!(!dir_paths(&run.entry[key]).unwrap().is_empty());
        }
        assert!(
            client.reset_seen() && backend_side.reset_seen(),
            "{name} conn {c}: a cut connection must not look like a clean end"
        );
    }
    eprintln!(
        "{name} | new client refused, 2 wrapped up exact (eof), 2 cut at GRACE (signal, RST), \
         exit 130 | every receiver = report ({} B in all)",
        end.report()["bytes"]
    );
}

// =============================================================================================
// RST against FIN
// =============================================================================================

/// One side resets mid-stream (2 MiB into 8 MiB); the other side only listens (it sends the
/// 16-byte stamp or nothing, then half-closes), so its reader is the one told: it must see
/// ECONNRESET, never a clean EOF, and an exact prefix of the stream.
#[test]
fn relay_a_reset_mid_stream_reaches_the_other_side_as_a_reset() {
    let cut = Sender {
        len: 8 << 20,
        pace: None,
        reset_after: Some(2 << 20),
    };
    let quiet = Sender {
        len: STAMP as u64,
        ..Default::default()
    };
    for via in ["auto", "splice", "userspace"] {
        for backend_resets in [true, false] {
            let who = if backend_resets { "backend" } else { "client" };
            let name = format!("relay via {via}: the {who} resets mid-stream");
            let backend = Backend::start(if backend_resets {
                cut
            } else {
                Sender::default()
            });
            let relay = start_relay(&[], &["--via", via], &["--once"], &backend.addr);
            let how_a = if backend_resets { quiet } else { cut };
            let (end, runs) = serve(relay, &backend, 1, how_a);
            let (_, client, b, local) = &runs[0];
            let b = b.as_ref().expect("the backend got the stamp");
            let entry = end.conn(local);
            assert_eq!(entry["ended"], "reset", "{name}: {entry}");
            assert_eq!(end.code(), Some(1), "{name}: {}", end.stderr);
            let (listener, key) = if backend_resets {
                (client, "b_to_a")
            } else {
                (b, "a_to_b")
            };
            assert_eq!(
                listener.seen.ending,
                Ending::Reset,
                "{name}: {:?}",
                listener.seen
            );
            assert!(listener.seen.exact, "{name}: wrong bytes");
            assert!(
                listener.seen.bytes <= entry[key]["bytes"].as_u64().unwrap(),
                "{name}"
            );
            dir_paths(&entry[key]).unwrap();
            eprintln!(
                "{name} | the other side sees ECONNRESET after {} B (exact prefix), \
                 conn ended reset, exit 1",
                listener.seen.bytes
            );
        }
    }
}

/// A clean half-close, either side first, while the other direction is still busy: the
/// other side sees EOF after every byte, and the busy direction goes on to its own end.
#[test]
fn relay_a_half_close_reaches_the_other_side_after_every_byte() {
    let big = Sender {
        len: 8 << 20,
        ..Default::default()
    };
    let small = Sender {
        len: 1000,
        ..Default::default()
    };
    for via in ["auto", "splice", "userspace"] {
        for (how_a, how_b, first) in [(small, big, "client"), (big, small, "backend")] {
            let name = format!("relay via {via}: the {first} half-closes first");
            let backend = Backend::start(how_b);
            let relay = start_relay(&[], &["--via", via], &["--once"], &backend.addr);
            let (end, runs) = serve(relay, &backend, 1, how_a);
            let (c, client, b, local) = &runs[0];
            ConnRun {
                conn: *c,
                client,
                backend: b.as_ref(),
                entry: end.conn(local),
            }
            .exact()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(end.code(), Some(0), "{name}: {}", end.stderr);
            eprintln!("{name} | EOF after every byte both ways (hash equal) | exit 0");
        }
    }
}

// =============================================================================================
// Soak
// =============================================================================================

/// Concurrent connections of the relay soak.
pub(super) const SOAK_CONNS: u64 = 50;

/// `bytes` in all through the relay: SOAK_CONNS connections, each carrying bytes / (2 x
/// SOAK_CONNS) each way at once, every byte checked and hashed at both ends. Peak RSS is
/// the relay's VmHWM, read just before it is stopped.
pub(super) fn relay_soak(soak: &Soak, bytes: u64) -> SoakFigures {
    let each = bytes / (2 * SOAK_CONNS);
    let how = Sender {
        len: each,
        ..Default::default()
    };
    let backend = Backend::start(how);
    let relay = start_relay(&[], &["--via", soak.via], &[], &backend.addr);
    let started = Instant::now();
    let done = run_clients(relay.addr(), SOAK_CONNS, how);
    let sides = backend.wait_for(&(0..SOAK_CONNS).collect::<Vec<_>>());
    let seconds = started.elapsed().as_secs_f64();
    let max_rss_kib = relay.status_kib("VmHWM:") as i64;
    let end = relay.stop();
    assert_eq!(end.code(), Some(130), "{}", end.stderr);
    let mut total = 0;
    for (c, client, local) in &done {
        ConnRun {
            conn: *c,
            client,
            backend: sides.get(c),
            entry: end.conn(local),
        }
        .exact()
        .unwrap_or_else(|e| panic!("soak: {e}"));
        total += client.seen.bytes + sides[c].seen.bytes;
    }
    assert_eq!(total, 2 * SOAK_CONNS * each);
    assert_eq!(end.report()["bytes"].as_u64(), Some(total));
    SoakFigures {
        bytes: total,
        seconds,
        max_rss_kib,
        report: end.report().clone(),
    }
}
