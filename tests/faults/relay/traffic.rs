//! The relay's traffic under test: each connection `c` carries two streams of its own, `A`
//! (client -> backend) and `B` (backend -> client), both sent at once. A stream is blocks of
//! a fixed pseudo-random MiB stamped with (block number, connection, direction), so a lost,
//! repeated, reordered or misrouted byte cannot compare equal; every receiver checks each
//! byte as it arrives and hashes what it saw. The backend learns `c` from the stamp of the
//! first block.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::net::Shutdown;

use super::*;
use crate::rig::{accept_until, connections, dir_paths, Finished, Rig, Running};
use crate::util::linger_zero;

// =============================================================================================
// Streams: generated, checked and hashed by block
// =============================================================================================

pub(super) const BLOCK: usize = 1 << 20;
/// The stamp: block number, then connection * 2 + direction.
pub(super) const STAMP: usize = 16;
pub(super) const A: u64 = 0;
pub(super) const B: u64 = 1;

pub(super) fn base_block() -> &'static [u8] {
    static BASE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BASE.get_or_init(|| data(BLOCK))
}

/// Block `k` of stream (`conn`, `dir`).
pub(super) fn stream_block(conn: u64, dir: u64, k: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(base_block());
    out[..8].copy_from_slice(&k.to_le_bytes());
    out[8..16].copy_from_slice(&(conn * 2 + dir).to_le_bytes());
}

/// How a receiver's stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Ending {
    /// read() returned 0: a FIN.
    Eof,
    /// ECONNRESET: an RST.
    Reset,
    Other(String),
}

/// What one receiver saw.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub(super) bytes: u64,
    /// Every byte so far was the stream's byte at that offset.
    pub(super) exact: bool,
    pub(super) ending: Ending,
    pub(super) hash: u64,
}

/// Checks bytes against stream (`conn`, `dir`) as they arrive.
pub(super) struct Checker {
    pub(super) conn: u64,
    pub(super) dir: u64,
    pub(super) pos: u64,
    pub(super) current: u64,
    pub(super) expected: Vec<u8>,
    pub(super) exact: bool,
    pub(super) hash: std::collections::hash_map::DefaultHasher,
}

impl Checker {
    pub(super) fn new(conn: u64, dir: u64) -> Checker {
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

    pub(super) fn feed(&mut self, mut got: &[u8]) {
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
    pub(super) fn drain(mut self, mut s: &TcpStream, progress: &AtomicU64) -> Seen {
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
pub(super) struct Sender {
    pub(super) len: u64,
    /// Sleep this long after each 64 KiB (a slow peer).
    pub(super) pace: Option<Duration>,
    /// After this many bytes, close with SO_LINGER {1, 0} (an RST) instead of going on;
    /// first it waits (bounded) for the peer's stamp, so the peer surely holds ours.
    pub(super) reset_after: Option<u64>,
}

/// What a sender did: bytes written (accepted by its socket), and whether it hashed them.
#[derive(Debug, Clone, Default)]
pub(super) struct Sent {
    pub(super) bytes: u64,
    pub(super) hash: u64,
    /// The write error that stopped it, if any.
    pub(super) error: Option<String>,
    pub(super) reset: bool,
}

/// Sends stream (`conn`, `dir`) as `how` says; half-closes after the last byte (FIN).
/// `wrap_up` set: stops at the next chunk and half-closes (the signal tests). `received`:
/// what this side's reader has got of the peer's stream.
pub(super) fn send_stream(
    s: &TcpStream,
    conn: u64,
    dir: u64,
    how: Sender,
    wrap_up: &AtomicBool,
    received: &AtomicU64,
) -> Sent {
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
        // A backend answers only once it has read the client's stamp: seeing the peer's
        // stamp proves ours arrived. An RST sent sooner can beat a loaded relay (or
        // backend) to the stamp, and the test would find no backend to check.
        let started = Instant::now();
        while received.load(Ordering::SeqCst) < STAMP as u64 && started.elapsed() < DEADLINE {
            thread::sleep(Duration::from_millis(2));
        }
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
pub(super) struct Side {
    pub(super) sent: Sent,
    pub(super) seen: Seen,
}

impl Side {
    /// An RST reached this side. The socket says ECONNRESET once (the error is cleared as
    /// it is read), then EOF; with a reader and a writer on one socket, the writer may be
    /// the one told (ECONNRESET, or EPIPE: an RST shuts the send side, a FIN does not).
    pub(super) fn reset_seen(&self) -> bool {
        self.seen.ending == Ending::Reset
            || self
                .sent
                .error
                .as_deref()
                .is_some_and(|e| e.contains("os error 104") || e.contains("os error 32"))
    }
}

/// Sends and receives at once on `s`; returns both halves.
pub(super) fn duplex(
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
    let received = progress.clone();
    let sender = thread::spawn(move || send_stream(&w, conn, dir, how, &wrap_up, &received));
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
pub(super) struct Backend {
    pub(super) addr: String,
    pub(super) sides: Arc<Mutex<BTreeMap<u64, Side>>>,
    /// Bytes each connection's backend has received so far.
    pub(super) progress: Arc<Mutex<BTreeMap<u64, Arc<AtomicU64>>>>,
    pub(super) stop: Arc<AtomicBool>,
}

impl Backend {
    pub(super) fn start(how: Sender) -> Backend {
        let never = Arc::new(AtomicBool::new(false));
        Backend::start_with(move |_| (how, never.clone()))
    }

    /// `how(conn)`: each connection's sender, and the flag that makes it wrap up.
    pub(super) fn start_with(
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

    pub(super) fn received(&self, conn: u64) -> u64 {
        self.progress
            .lock()
            .unwrap()
            .get(&conn)
            .map_or(0, |p| p.load(Ordering::SeqCst))
    }

    /// Waits until the backends of `conns` have finished; returns every backend's side.
    pub(super) fn wait_for(&self, conns: &[u64]) -> BTreeMap<u64, Side> {
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
pub(super) struct Client {
    pub(super) conn: u64,
    /// The client's own address: the relay's report names it as the connection's peer.
    pub(super) local: String,
    pub(super) received: Arc<AtomicU64>,
    pub(super) thread: JoinHandle<Side>,
}

impl Client {
    pub(super) fn start(addr: &str, conn: u64, how: Sender, wrap_up: Arc<AtomicBool>) -> Client {
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
pub(super) fn start_relay(
    wrap: &[String],
    global: &[&str],
    opts: &[&str],
    backend: &str,
) -> Running {
    let backend = format!("tcp:{backend}");
    let mut args = opts.to_vec();
    if !wrap.is_empty() {
        // strace counts the calls it fails per thread: one event loop.
        args.extend(["--workers", "1"]);
    }
    args.extend(["tcp-listen:0,backlog=128", &backend]);
    Rig::new().under(wrap).args(global).relay(&args)
}

/// Every fallback of every connection's directions, with the direction's name.
pub(super) fn relay_fallbacks(report: &Value) -> Vec<(String, Value)> {
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
pub(super) struct ConnRun<'a> {
    pub(super) conn: u64,
    pub(super) client: &'a Side,
    /// None: the backend never got the stamp (the connection broke first).
    pub(super) backend: Option<&'a Side>,
    pub(super) entry: &'a Value,
}

impl ConnRun<'_> {
    /// What the backend received: bytes, exact, and whether it saw the RST.
    pub(super) fn backend_seen(&self) -> (u64, bool, Ending, bool) {
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
    pub(super) fn exact(&self) -> Result<(), String> {
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
    pub(super) fn broken(&self) -> Result<(), String> {
        let c = self.conn;
        let ended = self.entry["ended"].as_str().unwrap_or_default();
        if !["error", "reset", "connect-failed"].contains(&ended) {
            return Err(format!("conn {c}: ended {ended}, want error or reset"));
        }
        if self.entry["error"].as_str().is_none_or(str::is_empty) {
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
pub(super) type Conns = Vec<(u64, Side, Option<Side>, String)>;

/// Starts clients 0..n at once (each sending as `how` says); waits for every one of them.
/// Returns each one's number, side and address.
pub(super) fn run_clients(addr: &str, n: u64, how: Sender) -> Vec<(u64, Side, String)> {
    let never = Arc::new(AtomicBool::new(false));
    let clients: Vec<Client> = (0..n)
        .map(|c| Client::start(addr, c, how, never.clone()))
        .collect();
    join_clients(clients)
}

pub(super) fn join_clients(clients: Vec<Client>) -> Vec<(u64, Side, String)> {
    clients
        .into_iter()
        .map(|client| (client.conn, client.thread.join().unwrap(), client.local))
        .collect()
}

/// Runs `n` connections at once against `relay` and `backend` (A as `how_a` says), waits for
/// every client and backend, stops the relay.
pub(super) fn serve(relay: Running, backend: &Backend, n: u64, how_a: Sender) -> (Finished, Conns) {
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
