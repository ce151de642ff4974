//! The path engine: one chain of kernel paths per transfer, one place that walks it.
//!
//! Each path moves bytes from `src` to `dst` until EOF and returns an [`Outcome`]:
//! it ended, the kernel refused it before any byte moved (fall back to the next path), or
//! it failed. Offsets are left to the kernel (NULL), so whatever a path moved, the next one
//! resumes exactly there. The walker records every path it ran and every fallback, so the
//! report says what really happened (std's `kernel_copy` has the shape but keeps no record).
//!
//! Where each decision lives: this file, the vocabulary ([`DataPath`], [`Via`],
//! [`Reason`], [`Failure`], [`Outcome`], [`Record`], [`Ends`]) and the loop of the
//! single-call paths; `chain.rs`, which paths to try; `rule.rs`, what an errno means;
//! `walk.rs`, the one walker; one file per path (`reflink`, `copy_range`, `sendfile`,
//! `splice`, `userspace`); `fanout/`, one source to many sinks; `meter.rs`, counting and
//! `--limit`.
//!
//! The engine imports only `crate::sys` and `crate::units`: it knows nothing of the
//! command line, the endpoints, the report text or the commands that call it.

mod chain;
pub mod copy_range;
pub mod dump;
pub mod fanout;
pub mod meter;
pub mod reflink;
mod rule;
pub mod sendfile;
pub mod splice;
pub mod userspace;
mod walk;

pub use chain::{can_take, chain, chain_for_copy, FileChain, ReflinkMode};
pub use rule::{falls_back, is_unsupported, refuse_or_fail, refuses_the_filesystems, side_of};
pub use walk::{transfer, transfer_skipping_zeros, transfer_upto};

use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;

use nix::errno::Errno;

use crate::engine::meter::Meter;
use crate::sys::fdkind::FdInfo;

/// A way of moving bytes. The names are the words of `--via` and of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataPath {
    Reflink,
    CopyFileRange,
    Sendfile,
    Splice,
    Tee,
    Userspace,
}

impl DataPath {
    /// Whether `--dump`'s tap sees this path's bytes ([`dump::tappable`]).
    pub fn feeds_a_tap(self) -> bool {
        matches!(self, DataPath::Splice | DataPath::Userspace)
    }

    pub const ALL: [DataPath; 6] = [
        DataPath::Reflink,
        DataPath::CopyFileRange,
        DataPath::Sendfile,
        DataPath::Splice,
        DataPath::Tee,
        DataPath::Userspace,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DataPath::Reflink => "reflink",
            DataPath::CopyFileRange => "copy_file_range",
            DataPath::Sendfile => "sendfile",
            DataPath::Splice => "splice",
            DataPath::Tee => "tee",
            DataPath::Userspace => "userspace",
        }
    }

    /// Parses a path word; `-` and `_` are interchangeable.
    pub fn from_name(word: &str) -> Option<DataPath> {
        let word = word.to_ascii_lowercase().replace('-', "_");
        DataPath::ALL.into_iter().find(|p| p.name() == word)
    }
}

impl fmt::Display for DataPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `--via`: let the engine choose, or force one path (no fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Via {
    #[default]
    Auto,
    Forced(DataPath),
}

/// Why a path handed over to the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Errno(Errno),
    /// copy_file_range said 0 on its first call: not trusted as EOF (procfs, sysfs, FUSE).
    FirstCallReturnedZero,
    /// copy_file_range said 0 after some bytes, short of the source's size: a short copy
    /// (FUSE, CIFS), not EOF.
    ReturnedZeroBeforeEnd,
}

impl Reason {
    /// Short form for the report: the errno's name, or what happened.
    pub fn short(&self) -> String {
        match self {
            Reason::Errno(e) => format!("{e:?}"),
            Reason::FirstCallReturnedZero => "returned 0".to_string(),
            Reason::ReturnedZeroBeforeEnd => "returned 0 before the end".to_string(),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Errno(e) => write!(f, "{e:?}: {}", e.desc()),
            Reason::FirstCallReturnedZero => {
                f.write_str("first call returned 0, not trusted as EOF")
            }
            Reason::ReturnedZeroBeforeEnd => {
                f.write_str("returned 0 before the end of the source: a short copy, not EOF")
            }
        }
    }
}

/// Which endpoint a failure belongs to. One splice between two fds cannot say which side
/// failed (coreutils#278); `Either` names both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Source,
    Sink,
    Either,
}

#[derive(Debug)]
pub enum Failure {
    Io(io::Error, Side),
    /// SIGINT or SIGTERM: stopped after delivering what was in flight, or what a sink
    /// took of it within the stop's grace.
    Interrupted,
}

/// What one path did.
#[derive(Debug)]
pub enum Outcome {
    /// Reached the end of the source, having delivered this many bytes.
    Ended(u64),
    /// Refused before this path delivered a byte. The count is bytes that had already left
    /// the source into zerocat's own pipe and were delivered with plain writes on the way
    /// out (they belong to the userspace tally).
    Fallback(u64, Reason),
    /// Failed or was interrupted after delivering this many bytes.
    Failed(u64, Failure),
    /// Delivered this many bytes, then stopped short of the source's end without an error
    /// (copy_file_range's early 0). The offsets are the kernel's, so the next path
    /// carries on exactly there: nothing is sent twice or skipped.
    Short(u64, Reason),
}

/// One fallback, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    pub from: DataPath,
    pub to: Option<DataPath>,
    pub reason: Reason,
}

/// What ran: every path tried with the bytes it delivered, in order, and every fallback.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub paths: Vec<(DataPath, u64)>,
    pub fallbacks: Vec<Fallback>,
}

impl Record {
    pub fn bytes(&self) -> u64 {
        self.paths.iter().map(|(_, n)| n).sum()
    }

    pub fn add(&mut self, path: DataPath, bytes: u64) {
        match self.paths.iter_mut().find(|(p, _)| *p == path) {
            Some((_, n)) => *n += bytes,
            None => self.paths.push((path, bytes)),
        }
    }

    /// Adds what `other` ran: its bytes per path, and each of its fallbacks once (a tree
    /// copy or a relay sums many transfers into one report).
    pub fn merge(&mut self, other: &Record) {
        for &(path, bytes) in &other.paths {
            self.add(path, bytes);
        }
        for f in &other.fallbacks {
            if !self.fallbacks.contains(f) {
                self.fallbacks.push(f.clone());
            }
        }
    }
}

/// The fds of one transfer and what is known about them.
pub struct Ends<'a> {
    pub src: BorrowedFd<'a>,
    pub src_info: FdInfo,
    pub dst: BorrowedFd<'a>,
    pub dst_info: FdInfo,
    /// Bytes the sink is about to be written with from its start, whose blocks the walk
    /// reserves before the first path that writes them ([`walk::transfer`]); 0: none.
    pub reserve: u64,
    /// `--dump`: the direction every byte that goes out is copied into (tee(2) from the
    /// pipe it is spliced out of, or a write of the buffer it is written from).
    pub tap: Option<&'a std::cell::RefCell<dump::Tapped>>,
}

/// The part of `limit` one call may ask for.
pub(crate) fn chunk(limit: u64, max: usize) -> usize {
    limit.min(max as u64) as usize
}

/// The top of every path's loop: stop once `limit` bytes moved, pace under `--limit`
/// (which may sleep), stop on SIGINT/SIGTERM. Returns the length the next call may ask.
pub(crate) fn next_len(
    moved: u64,
    limit: u64,
    max: usize,
    meter: &Meter,
) -> Result<usize, Outcome> {
    if moved == limit {
        return Err(Outcome::Ended(moved));
    }
    let len = meter.chunk(chunk(limit - moved, max));
    if crate::sys::process::interrupted() {
        return Err(Outcome::Failed(moved, Failure::Interrupted));
    }
    Ok(len)
}

/// The loop of the single-call paths (copy_file_range, sendfile, splice with a pipe on
/// one side): call `step` with a length of at most `max` until it says 0, counting what
/// it moved. Short transfers and EINTR are normal; EAGAIN (non-blocking fds someone
/// handed us) calls `wait` and tries again. A 0 is the end unless `distrust_zero`, asked
/// with the bytes moved so far, gives a reason to hand over to the next path.
pub(crate) fn pump(
    meter: &Meter,
    distrust_zero: impl Fn(u64) -> Option<Reason>,
    max: usize,
    limit: u64,
    wait: impl Fn() -> Result<(), Errno>,
    mut step: impl FnMut(usize) -> Result<usize, Errno>,
) -> Outcome {
    let mut moved = 0u64;
    loop {
        let len = match next_len(moved, limit, max, meter) {
            Ok(len) => len,
            Err(done) => return done,
        };
        match step(len) {
            Ok(0) => {
                return match distrust_zero(moved) {
                    None => Outcome::Ended(moved),
                    Some(reason) if moved == 0 => Outcome::Fallback(0, reason),
                    Some(reason) => Outcome::Short(moved, reason),
                }
            }
            Ok(n) => {
                moved += n as u64;
                meter.add(n as u64);
            }
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => {
                if let Err(e) = wait() {
                    return Outcome::Failed(moved, Failure::of(e, Side::Either));
                }
            }
            Err(e) => return refuse_or_fail(e, moved, side_of(e)),
        }
    }
}
