//! `--dump FILE`: a copy of every byte a transfer moves, per connection and direction,
//! stamped (connection, direction, offset, time), in `hex` (hexdump -C lines), `text`
//! (printable bytes, the rest escaped) or `pcap` (a TCP conversation Wireshark follows).
//!
//! The transfer's own path is not changed: a direction that splices through a pipe of its
//! own tee(2)s the pipe's head into the dump's pipe before it splices it out
//! ([`Tapped::ahead_of_splice`]); one that writes from a buffer writes the same bytes into
//! the dump's pipe ([`Tapped::wrote`]). Both never wait: the dump's pipe is its bounded
//! buffer (as large as `pipe-max-size` allows), and when it is full the bytes that could
//! not go in are *missed*, counted and marked in the dump, rather than slowing the
//! transfer. A thread in the idle scheduling class (so it takes no core the transfer needs:
//! SCHED_IDLE, else nice 19) reads the pipe,
//! in the order an entry per copy says (the copy and its entry are made under one lock, so
//! the pipe and the entries agree), formats and writes the file. Once a transfer far faster
//! than it fills the pipe, it stands aside until the transfer slows or pauses, so that
//! what it would hold of a bulk transfer (a few %) costs that transfer nothing.
//!
//! tee(2) copies from the head of a pipe without consuming it (HAZARDS: tee duplicates):
//! a direction whose pipe head was already teed (`accounted` ahead of `passed`) never tees
//! again until the splice out has consumed past it, and splices out no more than the dump
//! has accounted for, so the dump gets each byte once.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};

use crate::sys;
use crate::sys::pipe::OwnPipe;
use crate::sys::process::Yielding;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DumpFormat {
    #[default]
    Hex,
    Text,
    Pcap,
}

impl DumpFormat {
    pub fn word(self) -> &'static str {
        match self {
            DumpFormat::Hex => "hex",
            DumpFormat::Text => "text",
            DumpFormat::Pcap => "pcap",
        }
    }
}

/// `--dump FILE --dump-format F`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpSpec {
    pub path: PathBuf,
    pub format: DumpFormat,
}

/// A direction: 0 is A to B (`>`), 1 is B to A (`<`).
pub type Dir = u8;

enum What {
    Open([Option<SocketAddr>; 2]),
    Data { offset: u64, len: usize },
    Missed { offset: u64, len: u64 },
    End { offset: u64 },
}

struct Entry {
    conn: u64,
    dir: Dir,
    at: SystemTime,
    what: What,
}

/// The write end of the dump's pipe and the entries' channel, under one lock.
struct Feed {
    pipe: OwnedFd,
    entries: Sender<Entry>,
}

/// What the copies and the writer tell each other.
#[derive(Default)]
struct Progress {
    /// Bytes the copies missed: while this grows the transfer is outrunning the dump.
    missed: AtomicU64,
    /// How many times the writer has taken bytes out of the dump's pipe.
    drained: AtomicU64,
    /// The writer stands aside ([`Outrun`]): no copy is tried, each is missed.
    aside: AtomicBool,
}

/// What directions copy into: shared by every event loop and thread of a run.
pub struct Tap {
    feed: Mutex<Option<Feed>>,
    progress: Arc<Progress>,
    /// Bytes copied in with tee(2) from a transfer's pipe, and with a write from its
    /// buffer: the report says which fed the dump (so which path the transfer kept).
    teed: AtomicU64,
    written: AtomicU64,
    next_conn: AtomicU64,
    /// 1 + `progress.drained` when a copy last found the dump's pipe full (0: not known full).
    /// Until the writer drains again no copy is tried: a dump that fell behind costs the
    /// transfer no call and no lock of the pipe the writer reads
    /// (bench/NOTEBOOK.md#relay-dump-cost-found).
    full_at: AtomicU64,
}

impl Tap {
    /// A connection number for a command without its own (pipe, tee).
    pub fn next_conn(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// A connection begins, between these addresses (A's peer, B's peer) where known.
    pub fn open(&self, conn: u64, addrs: [Option<SocketAddr>; 2]) {
        self.with_feed(|feed| {
            let _ = feed.entries.send(entry(conn, 0, What::Open(addrs)));
        });
    }

    fn with_feed<T: Default>(&self, f: impl FnOnce(&Feed) -> T) -> T {
        match self.feed.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(feed) => f(feed),
            None => T::default(),
        }
    }

    /// Copies bytes of stream `conn`/`dir` at `offset` into the dump's pipe with `copy`
    /// (a tee or a write, never waiting): the bytes copied, 0 when the pipe is full. The
    /// entry for them follows `missed`, the mark of the bytes missed just before, which
    /// waits for a copy that succeeds: a run of refused copies makes one entry, not one
    /// each (each would wake the writer).
    fn copy_in(
        &self,
        (conn, dir, offset): (u64, Dir, u64),
        missed: Option<What>,
        copied: &AtomicU64,
        copy: impl FnOnce(BorrowedFd<'_>) -> Result<usize, Errno>,
    ) -> usize {
        if self.progress.aside.load(Ordering::Relaxed) {
            return 0;
        }
        let drained = self.progress.drained.load(Ordering::Acquire);
        if self.full_at.load(Ordering::Relaxed) == drained + 1 {
            return 0;
        }
        let n = self.with_feed(|feed| match copy(feed.pipe.as_fd()) {
            Ok(n) if n > 0 => {
                if let Some(missed) = missed {
                    let _ = feed.entries.send(entry(conn, dir, missed));
                }
                let _ = feed
                    .entries
                    .send(entry(conn, dir, What::Data { offset, len: n }));
                copied.fetch_add(n as u64, Ordering::Relaxed);
                n
            }
            _ => 0,
        });
        if n == 0 {
            self.full_at.store(drained + 1, Ordering::Relaxed);
        }
        n
    }

    fn note(&self, conn: u64, dir: Dir, what: What) {
        self.with_feed(|feed| {
            let _ = feed.entries.send(entry(conn, dir, what));
        });
    }
}

fn entry(conn: u64, dir: Dir, what: What) -> Entry {
    Entry {
        conn,
        dir,
        at: SystemTime::now(),
        what,
    }
}

/// One direction's place in the dump.
pub struct Tapped {
    tap: Arc<Tap>,
    conn: u64,
    dir: Dir,
    /// Bytes of this direction that went out to its sink.
    passed: u64,
    /// Bytes the dump has dealt with (copied or counted missed): never less than `passed`
    /// once they went out; ahead of it while teed bytes wait at the head of the pipe.
    accounted: u64,
    /// Missed bytes not yet marked in the dump (contiguous, so one mark says them).
    missed_at: u64,
    missed_len: u64,
    ended: bool,
}

impl Tapped {
    pub fn new(tap: &Arc<Tap>, conn: u64, dir: Dir) -> Tapped {
        Tapped {
            tap: Arc::clone(tap),
            conn,
            dir,
            passed: 0,
            accounted: 0,
            missed_at: 0,
            missed_len: 0,
            ended: false,
        }
    }

    /// Before bytes at the head of `pipe` (`in_pipe` of them) are spliced out: the dump
    /// gets them first (tee, never consuming). Returns how many may be spliced out now: no
    /// more than the dump accounted for, so a later tee never copies a byte again.
    pub fn ahead_of_splice(&mut self, pipe: BorrowedFd<'_>, in_pipe: usize) -> usize {
        if self.accounted > self.passed {
            return in_pipe.min((self.accounted - self.passed) as usize);
        }
        let at = (self.conn, self.dir, self.passed);
        let missed = self.pending_missed();
        let tap = &self.tap;
        match tap.copy_in(at, missed, &tap.teed, |dump| {
            sys::tee_nonblocking(pipe, dump, in_pipe)
        }) {
            0 => {
                self.miss(self.passed, in_pipe as u64);
                self.accounted = self.passed + in_pipe as u64;
                in_pipe
            }
            n => {
                self.missed_len = 0;
                self.accounted = self.passed + n as u64;
                n
            }
        }
    }

    /// `n` bytes were spliced out (after [`Tapped::ahead_of_splice`]).
    pub fn spliced(&mut self, n: usize) {
        self.passed += n as u64;
    }

    /// `bytes` were written out from a buffer: those the dump has not got yet go to it.
    pub fn wrote(&mut self, bytes: &[u8]) {
        let skip = (self.accounted.saturating_sub(self.passed) as usize).min(bytes.len());
        let rest = &bytes[skip..];
        if !rest.is_empty() {
            let at = self.passed + skip as u64;
            let missed = self.pending_missed();
            let tap = &self.tap;
            let copied = tap.copy_in((self.conn, self.dir, at), missed, &tap.written, |dump| {
                sys::write(dump, rest)
            });
            if copied > 0 {
                self.missed_len = 0;
            }
            if copied < rest.len() {
                self.miss(at + copied as u64, (rest.len() - copied) as u64);
            }
        }
        self.passed += bytes.len() as u64;
        self.accounted = self.accounted.max(self.passed);
    }

    /// The direction ended cleanly (EOF passed on).
    pub fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.mark_missed();
            self.tap.note(
                self.conn,
                self.dir,
                What::End {
                    offset: self.passed,
                },
            );
        }
    }

    /// The direction stopped without its end (a failure, a signal): the missed bytes not
    /// yet marked are marked now, before the dump finishes.
    pub fn settle(&mut self) {
        self.mark_missed();
    }

    fn miss(&mut self, at: u64, len: u64) {
        self.tap.progress.missed.fetch_add(len, Ordering::Relaxed);
        if self.missed_len > 0 && self.missed_at + self.missed_len != at {
            self.mark_missed();
        }
        if self.missed_len == 0 {
            self.missed_at = at;
        }
        self.missed_len += len;
    }

    /// The mark of the missed bytes not yet marked, for the next copy's entry to follow.
    fn pending_missed(&self) -> Option<What> {
        (self.missed_len > 0).then_some(What::Missed {
            offset: self.missed_at,
            len: self.missed_len,
        })
    }

    fn mark_missed(&mut self) {
        if let Some(what) = self.pending_missed() {
            self.tap.note(self.conn, self.dir, what);
            self.missed_len = 0;
        }
    }
}

impl Drop for Tapped {
    fn drop(&mut self) {
        self.mark_missed();
    }
}

/// What the dump did, at the end.
#[derive(Debug, Clone, Default)]
pub struct DumpTotals {
    pub path: PathBuf,
    pub format: DumpFormat,
    /// Bytes of the stream written into the file.
    pub dumped: u64,
    /// Bytes that passed but are not in the file (the dump fell behind, or its file failed).
    pub missed: u64,
    /// Of the bytes copied into the dump, those tee(2)d from the transfer's pipe (its
    /// path stayed splice) and those written from its buffer (the userspace path).
    pub teed: u64,
    pub written: u64,
    pub error: Option<String>,
    /// Why the writer ran at nice 19, not in the idle class (words for the dump's line).
    pub writer_nice19: Option<String>,
}

impl DumpTotals {
    /// The report's line: `dump: 1.00 MiB into FILE (hex), 0 bytes missed`.
    pub fn line(&self) -> String {
        let mut line = format!(
            "dump: {} into {} ({}), {} missed",
            crate::units::human_bytes(self.dumped),
            self.path.display(),
            self.format.word(),
            crate::units::human_bytes(self.missed),
        );
        if self.teed > 0 || self.written > 0 {
            line.push_str(&format!(", fed by {}", self.fed_by()));
        }
        if self.missed > 0 && self.error.is_none() {
            line.push_str(" (the dump fell behind; the transfer did not wait for it)");
        }
        if let Some(e) = &self.error {
            line.push_str(&format!(" (writing it failed: {e})"));
        }
        if let Some(why) = &self.writer_nice19 {
            line.push_str(&format!(" (its writer ran at nice 19: {why})"));
        }
        line
    }
}

impl DumpTotals {
    /// How the bytes reached the dump: `tee(2) from the transfer's pipe` (the transfer's
    /// path stayed splice), `writes from the transfer's buffer` (userspace), or both.
    pub fn fed_by(&self) -> &'static str {
        match (self.teed > 0, self.written > 0) {
            (true, false) => "tee(2) from the transfer's pipe",
            (false, true) => "writes from the transfer's buffer",
            (true, true) => "tee(2) from the transfer's pipe and writes from its buffer",
            (false, false) => "nothing",
        }
    }
}

/// A stream end's peer address, where it is an IP socket (for the dump's `open` line
/// and pcap's addresses).
pub fn peer_of(fd: BorrowedFd<'_>) -> Option<SocketAddr> {
    use nix::sys::socket::{getpeername, SockaddrStorage};
    let addr: SockaddrStorage = getpeername(fd.as_raw_fd()).ok()?;
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    addr.as_sockaddr_in6()
        .map(|v6| SocketAddr::V6((*v6).into()))
}

/// A running dump: its tap and its writer thread.
pub struct Dump {
    tap: Arc<Tap>,
    writer: Option<JoinHandle<(u64, u64, Option<String>)>>,
    /// The writer's thread id and how it yields (None: its thread ended before it said).
    writer_yield: Option<(i32, Yielding)>,
    spec: DumpSpec,
}

impl Dump {
    /// Creates (truncates) the file and starts the writer.
    pub fn start(spec: &DumpSpec) -> io::Result<Dump> {
        let file = File::create(&spec.path)?;
        let pipe = OwnPipe::new()?;
        let flags = OFlag::from_bits_retain(fcntl(pipe.write.as_raw_fd(), FcntlArg::F_GETFL)?);
        fcntl(
            pipe.write.as_raw_fd(),
            FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK),
        )?;
        let (tx, rx) = channel();
        let OwnPipe { read, write, size } = pipe;
        let format = spec.format;
        let progress = Arc::new(Progress::default());
        let writer_progress = Arc::clone(&progress);
        let (yielded, writer_yield) = channel();
        let writer = std::thread::Builder::new()
            .name("dump".into())
            .spawn(move || {
                // On a busy machine the formatting (5 bytes of hex a byte) would take a core
                // the transfer needs: the dump misses bytes instead
                // (bench/NOTEBOOK.md#relay-dump-cost). Nice 19 still took a share of a busy
                // core; the idle class takes none (bench/NOTEBOOK.md#relay-dump-idle-class).
                let _ = yielded.send(sys::process::yield_to_others());
                write_dump(read, size, rx, file, format, &writer_progress)
            })?;
        // Known before any byte moves: a transfer can be over before a thread just spawned
        // has run, and `finish` must know which thread to take out of the idle class and
        // what to say of it.
        let writer_yield = writer_yield.recv().ok();
        Ok(Dump {
            tap: Arc::new(Tap {
                feed: Mutex::new(Some(Feed {
                    pipe: write,
                    entries: tx,
                })),
                progress,
                teed: AtomicU64::new(0),
                written: AtomicU64::new(0),
                next_conn: AtomicU64::new(1),
                full_at: AtomicU64::new(0),
            }),
            writer: Some(writer),
            writer_yield,
            spec: spec.clone(),
        })
    }

    pub fn tap(&self) -> &Arc<Tap> {
        &self.tap
    }

    /// No more copies: the writer drains the pipe, flushes the file and says its totals.
    pub fn finish(mut self) -> DumpTotals {
        self.tap
            .feed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        // The transfer is over: what the writer has left (up to a pipe's worth) is
        // formatted in the normal class at the transfer's nice. At nice 19 it waited up to
        // 0.4 s for a core on a busy machine, even alone in its autogroup: the group's
        // weight on a core follows its threads' weighted load, and the writer's is 19's
        // (bench/NOTEBOOK.md#relay-dump-cost-found); an idle-class one weighs less still.
        let yielded = self.writer_yield;
        if let Some((tid, _)) = yielded {
            sys::process::stop_yielding(tid);
        }
        if let Some(writer) = &self.writer {
            writer.thread().unpark();
        }
        let (dumped, lost, error) = match self.writer.take().map(JoinHandle::join) {
            Some(Ok(totals)) => totals,
            _ => (0, 0, Some("the dump's thread panicked".into())),
        };
        DumpTotals {
            path: self.spec.path.clone(),
            format: self.spec.format,
            dumped,
            missed: self.tap.progress.missed.load(Ordering::Relaxed) + lost,
            teed: self.tap.teed.load(Ordering::Relaxed),
            written: self.tap.written.load(Ordering::Relaxed),
            error,
            writer_nice19: match yielded {
                Some((_, Yielding::Nice19(None))) => Some(
                    "without CAP_SYS_NICE it could not have left the idle class to finish".into(),
                ),
                Some((_, Yielding::Nice19(Some(errno)))) => {
                    Some(format!("SCHED_IDLE was refused, {errno:?}"))
                }
                _ => None,
            },
        }
    }
}

/// The writer: each entry in order, its bytes read from the pipe (each read counted in
/// `progress.drained`), once the transfer is not outrunning the dump. Returns the bytes
/// written, those lost to a failed file, and the failure.
fn write_dump(
    pipe: OwnedFd,
    size: usize,
    entries: Receiver<Entry>,
    file: File,
    format: DumpFormat,
    progress: &Progress,
) -> (u64, u64, Option<String>) {
    let mut out = Formatter {
        out: BufWriter::with_capacity(1 << 20, file),
        format,
        lines: Vec::new(),
        conns: HashMap::new(),
    };
    let mut buf = vec![0u8; size.max(64 * 1024)];
    let (mut dumped, mut lost, mut error) = (0u64, 0u64, None::<String>);
    let mut outrun = Outrun::new(Instant::now());
    let mut taken = 0u64;
    if let Err(e) = out.begin() {
        error = Some(e.to_string());
    }
    for polled in polled(&entries) {
        let Some(entry) = polled else {
            // Caught up: what was formatted goes into the file now, not when a MiB of it
            // has piled up, so a reader following the dump (`tail -f`) sees each exchange.
            if let (None, Err(e)) = (&error, out.out.flush()) {
                error = Some(e.to_string());
            }
            outrun.caught_up(progress, taken, Instant::now());
            continue;
        };
        let result = match entry.what {
            What::Data { offset, len } => {
                let mut left = len;
                let mut at = offset;
                let mut result = Ok(());
                outrun.at_data(progress, taken, Instant::now());
                while left > 0 {
                    let want = left.min(buf.len());
                    let got = match read_exact(pipe.as_fd(), &mut buf[..want]) {
                        Ok(()) => {
                            progress.drained.fetch_add(1, Ordering::Release);
                            taken += want as u64;
                            want
                        }
                        Err(e) => {
                            // Cannot happen (the bytes are in the pipe); say it if it does.
                            error.get_or_insert(format!("reading the dump's pipe: {e}"));
                            lost += left as u64;
                            break;
                        }
                    };
                    if error.is_none() {
                        result = out.data(&entry, at, &buf[..got]);
                        if result.is_ok() {
                            dumped += got as u64;
                        }
                    } else {
                        lost += got as u64;
                    }
                    if result.is_err() {
                        lost += got as u64;
                        break;
                    }
                    left -= got;
                    at += got as u64;
                }
                result
            }
            _ if error.is_some() => Ok(()),
            _ => out.note(&entry),
        };
        if let Err(e) = result {
            error.get_or_insert(e.to_string());
        }
    }
    if let Err(e) = out.out.flush() {
        error.get_or_insert(e.to_string());
    }
    (dumped, lost, error)
}

/// The entries as they come, until the transfer is over, and `None` each time the writer
/// has caught up with them and after each nap that brought none; it looks for more every
/// [`WRITER_NAP`] rather than sleep on the channel, so that no copy the transfer makes ever
/// wakes it (nor takes the channel's lock the sleeping writer's wake-up takes:
/// bench/NOTEBOOK.md#relay-dump-cost-found).
fn polled(entries: &Receiver<Entry>) -> impl Iterator<Item = Option<Entry>> + '_ {
    let mut caught_up = false;
    std::iter::from_fn(move || loop {
        match entries.try_recv() {
            Ok(entry) => {
                caught_up = false;
                return Some(Some(entry));
            }
            Err(TryRecvError::Empty) if !caught_up => {
                caught_up = true;
                return Some(None);
            }
            Err(TryRecvError::Empty) => {
                // Unparked by `Dump::finish` only: the run's end need not wait out a nap.
                std::thread::park_timeout(WRITER_NAP);
                caught_up = false;
            }
            Err(TryRecvError::Disconnected) => return None,
        }
    })
}

/// Whether the transfer outruns the dump. Once copies found the dump's pipe full while
/// the transfer passed more than [`OUTRUN_RATE`] (over the last few ms), the writer
/// stands aside: no copy is tried (each is missed, counted and marked) while it formats
/// what the pipe holds, and until the transfer slows below that rate or pauses.
/// Formatting beside a transfer that outruns it gained the dump little (a few % of a GiB)
/// and cost the transfer a third of its rate on an otherwise quiet machine, even from the
/// idle class: the writer's reads and its 5 bytes of hex a byte into the page cache took
/// memory bandwidth and cache from the cores' other work
/// (bench/NOTEBOOK.md#relay-dump-stands-aside). The pipe it holds is formatted while the
/// transfer runs, not after it, where the run's exit would wait.
struct Outrun {
    /// `Progress::missed` at the last look.
    seen: u64,
    /// The transfer's bytes so far (those the writer took out of the pipe, and those
    /// missed) at the start of the current window, and when it started.
    window: (u64, Instant),
    /// Bytes a second the transfer passed over the current window (or the last one,
    /// while the current one is shorter than a millisecond).
    rate: f64,
}

/// The transfer's rate above which a writer that fell behind stands aside: it formats
/// ~300 MiB/s of stream, so beside a faster transfer it would hold less than a third of
/// it and take the most from it; below, it holds most of a stream it cannot quite follow
/// (`pipe --dump -L 400M` of 64 MiB: about half, as before it stood aside).
const OUTRUN_RATE: f64 = (1u64 << 30) as f64;

impl Outrun {
    fn new(now: Instant) -> Outrun {
        Outrun {
            seen: 0,
            window: (0, now),
            rate: 0.0,
        }
    }

    /// The bytes missed so far, and the rate over the window so far once it is a
    /// millisecond long (a bulk transfer is told at its first miss); a new window once
    /// this one is a nap long.
    fn look(&mut self, progress: &Progress, taken: u64, now: Instant) -> u64 {
        let missed = progress.missed.load(Ordering::Relaxed);
        let span = now.saturating_duration_since(self.window.1);
        if span >= Duration::from_millis(1) {
            let passed = taken + missed;
            self.rate = passed.saturating_sub(self.window.0) as f64 / span.as_secs_f64();
            if span >= WRITER_NAP {
                self.window = (passed, now);
            }
        }
        missed
    }

    /// Before the writer formats bytes (`taken`: all it took out of the pipe so far).
    fn at_data(&mut self, progress: &Progress, taken: u64, now: Instant) {
        let missed = self.look(progress, taken, now);
        if missed != self.seen && self.rate > OUTRUN_RATE {
            progress.aside.store(true, Ordering::Relaxed);
        }
        self.seen = missed;
    }

    /// The writer has caught up (at once, then after each nap).
    fn caught_up(&mut self, progress: &Progress, taken: u64, now: Instant) {
        self.seen = self.look(progress, taken, now);
        if self.rate <= OUTRUN_RATE {
            progress.aside.store(false, Ordering::Relaxed);
        }
    }
}

/// How long the writer naps when it has caught up.
const WRITER_NAP: Duration = Duration::from_millis(5);

fn read_exact(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<(), Errno> {
    let mut got = 0;
    while got < buf.len() {
        match sys::read(fd, &mut buf[got..]) {
            Ok(0) => return Err(Errno::EPIPE),
            Ok(n) => got += n,
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A pcap conversation: its two addresses and the bytes each way so far (for acks).
struct PcapConn {
    addrs: [SocketAddr; 2],
    next: [u64; 2],
}

struct Formatter {
    out: BufWriter<File>,
    format: DumpFormat,
    /// A record's hex lines, made here and written at once.
    lines: Vec<u8>,
    conns: HashMap<u64, PcapConn>,
}

/// `2026-11-26T23:10:00.123456Z`.
pub fn timestamp(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (y, m, d) = crate::units::civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        since.subsec_micros()
    )
}

fn arrow(dir: Dir) -> &'static str {
    if dir == 0 {
        "a>b"
    } else {
        "b>a"
    }
}

fn addr_word(addr: &Option<SocketAddr>) -> String {
    addr.map_or_else(|| "-".to_string(), |a| a.to_string())
}

impl Formatter {
    fn begin(&mut self) -> io::Result<()> {
        if self.format == DumpFormat::Pcap {
            // Little-endian, microseconds, v2.4, snaplen, LINKTYPE_RAW (an IP packet).
            let mut header = Vec::with_capacity(24);
            header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
            header.extend_from_slice(&2u16.to_le_bytes());
            header.extend_from_slice(&4u16.to_le_bytes());
            header.extend_from_slice(&0i32.to_le_bytes());
            header.extend_from_slice(&0u32.to_le_bytes());
            header.extend_from_slice(&262_144u32.to_le_bytes());
            header.extend_from_slice(&101u32.to_le_bytes());
            self.out.write_all(&header)?;
        }
        Ok(())
    }

    fn note(&mut self, entry: &Entry) -> io::Result<()> {
        let time = || timestamp(entry.at);
        let (c, dir) = (entry.conn, arrow(entry.dir));
        match (&entry.what, self.format) {
            (What::Open(addrs), DumpFormat::Pcap) => {
                self.pcap_conn(c, entry.at, *addrs);
                Ok(())
            }
            (What::Open(addrs), _) => writeln!(
                self.out,
                "# {} conn {c} open {} > {}",
                time(),
                addr_word(&addrs[0]),
                addr_word(&addrs[1])
            ),
            (What::Missed { offset, len }, DumpFormat::Pcap) => {
                // The sequence numbers jump: Wireshark says "previous segment not captured".
                let conn = self.pcap_conn(c, entry.at, [None, None]);
                conn.next[entry.dir as usize] = offset + len;
                Ok(())
            }
            (What::Missed { offset, len }, _) => writeln!(
                self.out,
                "! {} conn {c} {dir} offset {offset} missed {len}",
                time()
            ),
            (What::End { offset }, DumpFormat::Pcap) => {
                let d = entry.dir as usize;
                let conn = self.pcap_conn(c, entry.at, [None, None]);
                let (src, dst) = (conn.addrs[d], conn.addrs[1 - d]);
                let ack = 1 + conn.next[1 - d];
                let seq = 1 + offset;
                packet(&mut self.out, entry.at, src, dst, seq, ack, FIN | ACK, &[])
            }
            (What::End { offset }, _) => {
                writeln!(self.out, "# {} conn {c} {dir} end at {offset}", time())
            }
            (What::Data { .. }, _) => Ok(()),
        }
    }

    fn data(&mut self, entry: &Entry, offset: u64, bytes: &[u8]) -> io::Result<()> {
        let mark = if entry.dir == 0 { '>' } else { '<' };
        let head = |out: &mut BufWriter<File>| {
            writeln!(
                out,
                "{mark} {} conn {} {} offset {offset} length {}",
                timestamp(entry.at),
                entry.conn,
                arrow(entry.dir),
                bytes.len()
            )
        };
        match self.format {
            DumpFormat::Hex => {
                head(&mut self.out)?;
                self.lines.clear();
                hex_lines(&mut self.lines, offset, bytes);
                self.out.write_all(&self.lines)
            }
            DumpFormat::Text => {
                head(&mut self.out)?;
                let mut text = String::with_capacity(bytes.len() + 16);
                escape(&mut text, bytes);
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                self.out.write_all(text.as_bytes())
            }
            DumpFormat::Pcap => {
                let d = entry.dir as usize;
                let conn = self.pcap_conn(entry.conn, entry.at, [None, None]);
                let (src, dst) = (conn.addrs[d], conn.addrs[1 - d]);
                let ack = 1 + conn.next[1 - d];
                conn.next[d] = offset + bytes.len() as u64;
                let mut at = offset;
                for piece in bytes.chunks(PCAP_SEGMENT) {
                    packet(
                        &mut self.out,
                        entry.at,
                        src,
                        dst,
                        1 + at,
                        ack,
                        PSH | ACK,
                        piece,
                    )?;
                    at += piece.len() as u64;
                }
                Ok(())
            }
        }
    }

    /// The conversation of connection `c`, begun (SYN, SYN-ACK, ACK) the first time.
    fn pcap_conn(
        &mut self,
        c: u64,
        at: SystemTime,
        addrs: [Option<SocketAddr>; 2],
    ) -> &mut PcapConn {
        if !self.conns.contains_key(&c) {
            // Where an end has no address (a pipe, a command, a unix socket): 127.0.0.1
            // and 127.0.0.2, the port telling connections apart.
            let port = 1024 + (c % 60_000) as u16;
            let a = addrs[0].unwrap_or(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
                port,
            ));
            let b = addrs[1].unwrap_or(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
                port,
            ));
            let _ = packet(&mut self.out, at, a, b, 0, 0, SYN, &[]);
            let _ = packet(&mut self.out, at, b, a, 0, 1, SYN | ACK, &[]);
            let _ = packet(&mut self.out, at, a, b, 1, 1, ACK, &[]);
            self.conns.insert(
                c,
                PcapConn {
                    addrs: [a, b],
                    next: [0, 0],
                },
            );
        }
        self.conns.get_mut(&c).expect("just made")
    }
}

/// `hexdump -C` lines of `bytes`, the first at stream offset `offset`, appended to `out`.
/// Each line is a fixed array filled from two tables ([`hex_line`]), not a `String`: the
/// writer formats ~2.5x as fast as through a `String` (bench/NOTEBOOK.md#relay-dump-idle-class),
/// which holds more of a fast relay and makes its last pipe's worth wait less at the end.
fn hex_lines(out: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    out.reserve(bytes.len() / 16 * 80 + 100);
    for (at, chunk) in (offset..).step_by(16).zip(bytes.chunks(16)) {
        hex_line(out, at, chunk);
    }
}

/// One line of `hexdump -C`, of any offset and up to 16 bytes: offset (at least 8 hex
/// digits, more past 4 GiB, as `{offset:08x}`), the bytes in hex (a space between the
/// halves), the printable ones between bars.
fn hex_line(out: &mut Vec<u8>, offset: u64, chunk: &[u8]) {
    let digits = (16 - offset.leading_zeros() as usize / 4).max(8);
    let mut line = [b' '; 96];
    for (i, shift) in (0..digits).rev().enumerate() {
        line[i] = HEX[((offset >> (4 * shift)) & 0xf) as usize];
    }
    let (hex, text) = line[digits + 2..].split_at_mut(50);
    for (i, &b) in chunk.iter().enumerate() {
        let col = 3 * i + usize::from(i > 7);
        hex[col..col + 2].copy_from_slice(&HEX_PAIRS[usize::from(b)]);
        text[1 + i] = PRINTABLE[usize::from(b)];
    }
    text[0] = b'|';
    text[1 + chunk.len()] = b'|';
    text[2 + chunk.len()] = b'\n';
    out.extend_from_slice(&line[..digits + 55 + chunk.len()]);
}

/// Each byte's two hex digits.
static HEX_PAIRS: [[u8; 2]; 256] = {
    let mut pairs = [[0u8; 2]; 256];
    let mut b = 0;
    while b < 256 {
        pairs[b] = [HEX[b >> 4], HEX[b & 0xf]];
        b += 1;
    }
    pairs
};

/// Each byte as hexdump -C's right column shows it: printable ASCII as is, else `.`.
static PRINTABLE: [u8; 256] = {
    let mut shown = [b'.'; 256];
    let mut b = 0x20;
    while b < 0x7f {
        shown[b] = b as u8;
        b += 1;
    }
    shown
};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Printable ASCII as is; `\\`, `\r`, `\t`, `\n` (then a line break, which is not a
/// byte of the stream) and `\xHH` for the rest.
fn escape(text: &mut String, bytes: &[u8]) {
    // Each record's text starts a line, and so does the byte after each \n: there, the
    // characters a record's head starts with are escaped, so no line of bytes reads as one.
    let mut line_start = true;
    for &b in bytes {
        let at_start = std::mem::replace(&mut line_start, b == b'\n');
        match b {
            b'\\' => text.push_str("\\\\"),
            b'\n' => text.push_str("\\n\n"),
            b'\r' => text.push_str("\\r"),
            b'\t' => text.push_str("\\t"),
            b'>' | b'<' | b'#' | b'!' if at_start => escape_hex(text, b),
            0x20..=0x7e => text.push(b as char),
            _ => escape_hex(text, b),
        }
    }
}

/// `\xHH`.
fn escape_hex(text: &mut String, b: u8) {
    text.push_str("\\x");
    text.push(char::from(HEX[usize::from(b >> 4)]));
    text.push(char::from(HEX[usize::from(b & 0xf)]));
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
/// Payload per packet: an IPv4 packet's length field holds 65,535 with its headers.
const PCAP_SEGMENT: usize = 65_000;

/// One pcap record: an IPv4 packet when both ends are IPv4, else IPv6 (an IPv4 end
/// mapped), with a TCP header whose sequence numbers are stream offsets + 1 (the SYN takes
/// the first). The TCP checksum is left 0 (Wireshark does not check it by default).
#[allow(clippy::too_many_arguments)]
fn packet(
    out: &mut impl Write,
    at: SystemTime,
    src: SocketAddr,
    dst: SocketAddr,
    seq: u64,
    ack: u64,
    flags: u8,
    payload: &[u8],
) -> io::Result<()> {
    let mut ip = Vec::with_capacity(60);
    let tcp_len = 20 + payload.len();
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let total = (20 + tcp_len) as u16;
            ip.extend_from_slice(&[0x45, 0]);
            ip.extend_from_slice(&total.to_be_bytes());
            ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let sum = checksum(&ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        (s, d) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            ip.extend_from_slice(&[0x60, 0, 0, 0]);
            ip.extend_from_slice(&(tcp_len as u16).to_be_bytes());
            ip.extend_from_slice(&[6, 64]);
            ip.extend_from_slice(&v6(s).octets());
            ip.extend_from_slice(&v6(d).octets());
        }
    }
    ip.extend_from_slice(&src.port().to_be_bytes());
    ip.extend_from_slice(&dst.port().to_be_bytes());
    ip.extend_from_slice(&(seq as u32).to_be_bytes());
    ip.extend_from_slice(&(ack as u32).to_be_bytes());
    ip.extend_from_slice(&[5 << 4, flags, 0xff, 0xff, 0, 0, 0, 0]);
    let len = (ip.len() + payload.len()) as u32;
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    out.write_all(&(since.as_secs() as u32).to_le_bytes())?;
    out.write_all(&since.subsec_micros().to_le_bytes())?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(&ip)?;
    out.write_all(payload)
}

/// The Internet checksum of an IPv4 header.
fn checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The chain under `--dump`: only the paths whose bytes pass through a pipe of the
/// transfer's (splice, which the dump tee(2)s from) or a buffer (userspace); a
/// copy_file_range or sendfile the chain had becomes splice through a pipe of ours.
/// The walker runs no other path while a tap is set.
pub fn tappable(chain: Vec<super::DataPath>) -> Vec<super::DataPath> {
    chain.into_iter().filter(|p| p.feeds_a_tap()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Copies that missed put the writer aside (no copy tried) only while the transfer
    /// passes more than OUTRUN_RATE; it comes back once the transfer slowed below it or
    /// paused.
    #[test]
    fn the_writer_stands_aside_while_the_transfer_outruns_it() {
        let t0 = Instant::now();
        let (progress, mut outrun) = (Progress::default(), Outrun::new(t0));
        let aside = |p: &Progress| p.aside.load(Ordering::Relaxed);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let miss = |n: u64| progress.missed.fetch_add(n, Ordering::Relaxed);
        // 100 MiB/s taken out of the pipe, then a miss: a writer that fell behind a
        // transfer it can mostly follow goes on formatting.
        outrun.at_data(&progress, 1 << 20, at(10));
        miss(4096);
        outrun.at_data(&progress, 2 << 20, at(20));
        assert!(
            !aside(&progress),
            "a slow transfer: the writer keeps taking copies"
        );
        // 2 GiB/s: 20 MiB missed in 10 ms.
        miss(20 << 20);
        outrun.at_data(&progress, 3 << 20, at(30));
        assert!(aside(&progress), "a fast transfer and a miss: aside");
        outrun.caught_up(&progress, 4 << 20, t0 + Duration::from_micros(30_500));
        assert!(
            aside(&progress),
            "a look within a millisecond judges nothing (here nothing more was missed)"
        );
        miss(2 << 20);
        outrun.caught_up(&progress, 4 << 20, at(31));
        assert!(
            aside(&progress),
            "3 GiB/s over the window so far: still aside"
        );
        miss(10 << 20);
        outrun.caught_up(&progress, 4 << 20, at(36));
        assert!(aside(&progress), "still 2 GiB/s missed: still aside");
        // 1 MiB in 5 ms: 200 MiB/s.
        miss(1 << 20);
        outrun.caught_up(&progress, 4 << 20, at(41));
        assert!(!aside(&progress), "the transfer slowed: copies again");
        miss(50 << 20);
        outrun.at_data(&progress, 5 << 20, at(51));
        assert!(aside(&progress), "fast again: aside again");
        outrun.caught_up(&progress, 5 << 20, at(60));
        assert!(!aside(&progress), "the transfer paused: copies again");
        let tap = Tap {
            feed: Mutex::new(None),
            progress: Arc::new(progress),
            teed: AtomicU64::new(0),
            written: AtomicU64::new(0),
            next_conn: AtomicU64::new(1),
            full_at: AtomicU64::new(0),
        };
        tap.progress.aside.store(true, Ordering::Relaxed);
        let tried = std::cell::Cell::new(false);
        let copied = tap.copy_in((1, 0, 0), None, &tap.teed, |_| {
            tried.set(true);
            Ok(1)
        });
        assert_eq!((copied, tried.get()), (0, false), "aside: no copy is tried");
    }

    #[test]
    fn hex_lines_are_hexdump_c_lines() {
        let lines = |offset, bytes: &[u8]| {
            let mut out = Vec::new();
            hex_lines(&mut out, offset, bytes);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            lines(0, b"hello\n"),
            "00000000  68 65 6c 6c 6f 0a                                 |hello.|\n"
        );
        assert_eq!(
            lines(16, b"0123456789abcdef"),
            "00000010  30 31 32 33 34 35 36 37  38 39 61 62 63 64 65 66  |0123456789abcdef|\n"
        );
        // Past 4 GiB the offset takes the digits it needs, as `{offset:08x}` did.
        assert_eq!(
            lines(0x1_2345_6780, b"\x00\xff~ "),
            "123456780  00 ff 7e 20                                       |..~ |\n"
        );
        assert_eq!(
            lines(0xffff_fff0, &[b'A'; 20]),
            "fffffff0  41 41 41 41 41 41 41 41  41 41 41 41 41 41 41 41  |AAAAAAAAAAAAAAAA|\n\
             100000000  41 41 41 41                                       |AAAA|\n"
        );
    }

    /// The fixed layout of a whole line is the line-by-line one, for every byte value,
    /// every length of a last line, and offsets on both sides of 4 GiB.
    #[test]
    fn hex_lines_fast_and_line_by_line_agree() {
        let bytes: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for offset in [0, 16, 0xffff_ff00, 0xffff_fff0, 0x1_2345_6780] {
            for len in (0..=48).chain([bytes.len()]) {
                let mut fast = Vec::new();
                hex_lines(&mut fast, offset, &bytes[..len]);
                let mut slow = Vec::new();
                for (i, chunk) in bytes[..len].chunks(16).enumerate() {
                    hex_line(&mut slow, offset + 16 * i as u64, chunk);
                }
                assert_eq!(
                    String::from_utf8(fast).unwrap(),
                    String::from_utf8(slow).unwrap(),
                    "offset {offset:#x}, {len} bytes"
                );
            }
        }
    }

    #[test]
    fn text_escapes_what_is_not_printable() {
        let mut text = String::new();
        escape(&mut text, b"a\\b\r\n\t\x00\xff");
        assert_eq!(text, "a\\\\b\\r\\n\n\\t\\x00\\xff");
    }

    /// A text record's line never starts as a record's head (`>`, `<`, `#`, `!`) does: a
    /// reader would take the bytes for one (tests/dump.rs's reader did, now and then).
    #[test]
    fn no_text_line_starts_as_a_head_does() {
        let mut text = String::new();
        escape(&mut text, b"> a\n< b\n# c\n! d\nx>y\n>");
        assert_eq!(
            text,
            "\\x3e a\\n\n\\x3c b\\n\n\\x23 c\\n\n\\x21 d\\n\nx>y\\n\n\\x3e"
        );
    }

    #[test]
    fn ipv4_header_checksum() {
        // The example of RFC 1071's usual illustration (Wikipedia's IPv4 header).
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
    }

    #[test]
    fn timestamps_are_utc_to_the_microsecond() {
        let at = UNIX_EPOCH + Duration::from_micros(1_795_451_680_000_123);
        assert_eq!(timestamp(at), "2026-11-23T16:34:40.000123Z");
    }
}
