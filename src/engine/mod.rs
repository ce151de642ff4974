//! The path engine: one chain of kernel paths per transfer, one place that walks it.
//!
//! Each path moves bytes from `src` to `dst` until EOF and returns an [`Outcome`]:
//! it ended, the kernel refused it before any byte moved (fall back to the next path), or
//! it failed. Offsets are left to the kernel (NULL), so whatever a path moved, the next one
//! resumes exactly there. The walker records every path it ran and every fallback, so the
//! report says what really happened (std's `kernel_copy` has the shape but keeps no record).

pub mod copy_range;
pub mod reflink;
pub mod sendfile;
pub mod splice;
pub mod sys;
pub mod tee;
pub mod userspace;

use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;

use nix::errno::Errno;

use crate::fdkind::{FdInfo, FdKind};
use crate::progress::Meter;

/// A way of moving bytes. The names are the words of `--via` and of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Path {
    Reflink,
    CopyFileRange,
    Sendfile,
    Splice,
    Tee,
    Userspace,
}

impl Path {
    pub const ALL: [Path; 6] = [
        Path::Reflink,
        Path::CopyFileRange,
        Path::Sendfile,
        Path::Splice,
        Path::Tee,
        Path::Userspace,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Path::Reflink => "reflink",
            Path::CopyFileRange => "copy_file_range",
            Path::Sendfile => "sendfile",
            Path::Splice => "splice",
            Path::Tee => "tee",
            Path::Userspace => "userspace",
        }
    }

    /// Parses a path word; `-` and `_` are interchangeable.
    pub fn from_name(word: &str) -> Option<Path> {
        let word = word.to_ascii_lowercase().replace('-', "_");
        Path::ALL.into_iter().find(|p| p.name() == word)
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `--via`: let the engine choose, or force one path (no fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Via {
    #[default]
    Auto,
    Forced(Path),
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

impl Failure {
    /// The failure an errno means: EINTR reaches here only once the stop's grace is over
    /// ([`crate::process::must_stop`]), so it is the interruption, not an I/O error.
    pub fn of(errno: Errno, side: Side) -> Failure {
        match errno {
            Errno::EINTR => Failure::Interrupted,
            _ => Failure::Io(errno.into(), side),
        }
    }

    pub fn errno(&self) -> Option<Errno> {
        match self {
            Failure::Io(e, _) => e.raw_os_error().map(Errno::from_raw),
            Failure::Interrupted => None,
        }
    }
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

/// Errnos that mean "this path cannot serve these fds" — but only while nothing has moved.
/// EIO, ENOSPC, EDQUOT, EPIPE are never among them: falling back after EIO can copy stale
/// pages (coreutils), and a full disk is full whatever the path.
pub fn is_unsupported(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::ENOSYS
            | Errno::EINVAL
            | Errno::EXDEV
            | Errno::EOPNOTSUPP
            | Errno::EPERM
            | Errno::EBADF
            | Errno::ETXTBSY
            | Errno::EACCES
            | Errno::ENOTTY
            | Errno::ESPIPE
    )
}

/// The common end of every fast path's error arm: an unsupported errno before any byte
/// moved falls back; anything else is a failure with the bytes delivered so far.
pub fn refuse_or_fail(errno: Errno, moved: u64, side: Side) -> Outcome {
    if moved == 0 && is_unsupported(errno) {
        Outcome::Fallback(0, Reason::Errno(errno))
    } else {
        Outcome::Failed(moved, Failure::of(errno, side))
    }
}

/// Can `path` serve this pair of fds at all? Used to build the chain and to reject a
/// forced `--via` before any byte moves. The kernel still has the last word.
pub fn can_take(path: Path, src: &FdInfo, dst: &FdInfo) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "{path} cannot move {} -> {}: {why}",
            src.kind, dst.kind
        ))
    };
    if src.kind == FdKind::Directory || dst.kind == FdKind::Directory {
        return bad("a directory holds no byte stream");
    }
    match path {
        Path::CopyFileRange | Path::Reflink
            if src.kind != FdKind::File || dst.kind != FdKind::File =>
        {
            bad("it needs regular files on both sides")
        }
        Path::Reflink => bad("reflink is only for `zerocat copy`"),
        Path::Sendfile if src.kind != FdKind::File => bad("it needs a regular file as source"),
        Path::Tee => bad("tee(2) is for one-to-many: `zerocat tee`"),
        _ => Ok(()),
    }
}

/// `--reflink` of `zerocat copy`: whether FICLONE goes first in the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReflinkMode {
    /// Clone where the filesystem can, else copy.
    #[default]
    Auto,
    /// Clone or fail.
    Always,
    /// Never clone.
    Never,
}

/// The chain of `zerocat copy` for one file: [`chain`], with `Path::Reflink` in front when
/// both ends are regular files and `reflink` allows it (`Always`: reflink alone, so a
/// filesystem that cannot clone is an error). `--via reflink` is `--reflink=always`.
pub fn chain_for_copy(
    src: &FdInfo,
    dst: &FdInfo,
    via: Via,
    reflink: ReflinkMode,
) -> Result<Vec<Path>, String> {
    let files = src.kind == FdKind::File && dst.kind == FdKind::File;
    match (via, reflink) {
        (Via::Forced(Path::Reflink), ReflinkMode::Never) => {
            Err("--via reflink contradicts --reflink=never".to_string())
        }
        (Via::Forced(Path::Reflink), _) | (Via::Auto, ReflinkMode::Always) => {
            if !files {
                return Err(format!(
                    "reflink cannot move {} -> {}: it needs regular files on both sides",
                    src.kind, dst.kind
                ));
            }
            Ok(vec![Path::Reflink])
        }
        (Via::Forced(path), ReflinkMode::Always) => {
            Err(format!("--via {path} contradicts --reflink=always"))
        }
        (Via::Auto, ReflinkMode::Auto) if files => {
            let mut paths = vec![Path::Reflink];
            paths.extend(chain(src, dst, via)?);
            Ok(paths)
        }
        _ => chain(src, dst, via),
    }
}

/// The paths to try, in order (DESIGN §3).
pub fn chain(src: &FdInfo, dst: &FdInfo, via: Via) -> Result<Vec<Path>, String> {
    use FdKind::*;
    if let Via::Forced(path) = via {
        can_take(path, src, dst)?;
        return Ok(vec![path]);
    }
    can_take(Path::Userspace, src, dst)?;
    let fast: &[Path] = match (src.kind, dst.kind) {
        (File, File) => &[Path::CopyFileRange, Path::Splice],
        (Pipe, _) | (_, Pipe) => &[Path::Splice],
        (File, Socket | CharDevice) => &[Path::Sendfile, Path::Splice],
        (Socket, Socket | File | CharDevice) => &[Path::Splice],
        _ => &[],
    };
    Ok(fast.iter().copied().chain([Path::Userspace]).collect())
}

/// One fallback, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    pub from: Path,
    pub to: Option<Path>,
    pub reason: Reason,
}

/// What ran: every path tried with the bytes it delivered, in order, and every fallback.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub paths: Vec<(Path, u64)>,
    pub fallbacks: Vec<Fallback>,
}

impl Record {
    pub fn bytes(&self) -> u64 {
        self.paths.iter().map(|(_, n)| n).sum()
    }

    pub fn add(&mut self, path: Path, bytes: u64) {
        match self.paths.iter_mut().find(|(p, _)| *p == path) {
            Some((_, n)) => *n += bytes,
            None => self.paths.push((path, bytes)),
        }
    }
}

/// The fds of one transfer and what is known about them.
pub struct Ends<'a> {
    pub src: BorrowedFd<'a>,
    pub src_info: FdInfo,
    pub dst: BorrowedFd<'a>,
    pub dst_info: FdInfo,
}

/// Walks `chain` until a path ends or fails. Returns what ran, and the failure if any.
pub fn transfer(
    ends: &Ends<'_>,
    chain: &[Path],
    middle: Option<&splice::OwnPipe>,
    meter: &Meter,
) -> (Record, Option<Failure>) {
    transfer_upto(ends, chain, middle, meter, u64::MAX)
}

/// [`transfer`], stopping after `limit` bytes (or at EOF, whichever comes first): one data
/// extent of a sparse file. `Path::Reflink` clones the whole file whatever the limit, so a
/// caller puts it only in the chain of a file's first extent.
pub fn transfer_upto(
    ends: &Ends<'_>,
    chain: &[Path],
    middle: Option<&splice::OwnPipe>,
    meter: &Meter,
    limit: u64,
) -> (Record, Option<Failure>) {
    let mut record = Record::default();
    let mut carried = 0; // bytes a refused path delivered by plain writes
    let mut short = 0; // bytes paths that stopped short delivered
    for (i, &path) in chain.iter().enumerate() {
        let outcome = run_path(path, ends, middle, meter, limit - carried - short);
        let reason = match outcome {
            Outcome::Ended(n) => {
                record.add(path, n);
                record_carried(&mut record, carried);
                return (record, None);
            }
            Outcome::Failed(n, failure) => {
                record.add(path, n);
                record_carried(&mut record, carried);
                return (record, Some(failure));
            }
            Outcome::Fallback(drained, reason) => {
                record.add(path, 0);
                carried += drained;
                reason
            }
            Outcome::Short(n, reason) => {
                record.add(path, n);
                short += n;
                reason
            }
        };
        let next = chain.get(i + 1).copied();
        record.fallbacks.push(Fallback {
            from: path,
            to: next,
            reason,
        });
        if next.is_none() {
            // A forced path the kernel refused: an error, not a silent switch.
            record_carried(&mut record, carried);
            let error = match reason {
                Reason::Errno(errno) => io::Error::from(errno),
                _ => io::Error::other(reason.to_string()),
            };
            return (record, Some(Failure::Io(error, Side::Either)));
        }
    }
    unreachable!("every chain ends in a path that ends or fails")
}

/// `--sparse=always` inside one data extent of a regular file: the userspace path that
/// seeks over blocks of zeros ([`userspace::copy_skipping_zeros`]), recorded like any
/// transfer. `skipped` grows by the zeros not written.
pub fn transfer_skipping_zeros(
    ends: &Ends<'_>,
    meter: &Meter,
    limit: u64,
    skipped: &mut u64,
) -> (Record, Option<Failure>) {
    let mut record = Record::default();
    let outcome = userspace::copy_skipping_zeros(ends.src, ends.dst, meter, limit, skipped);
    match outcome {
        Outcome::Ended(n) => {
            record.add(Path::Userspace, n);
            (record, None)
        }
        Outcome::Failed(n, failure) => {
            record.add(Path::Userspace, n);
            (record, Some(failure))
        }
        Outcome::Fallback(..) | Outcome::Short(..) => {
            unreachable!("the userspace path has nothing to fall back to")
        }
    }
}

fn record_carried(record: &mut Record, carried: u64) {
    if carried > 0 {
        record.add(Path::Userspace, carried);
    }
}

fn run_path(
    path: Path,
    ends: &Ends<'_>,
    middle: Option<&splice::OwnPipe>,
    meter: &Meter,
    limit: u64,
) -> Outcome {
    match path {
        Path::Reflink => reflink::clone(ends, meter),
        Path::CopyFileRange => copy_range::copy_upto(ends.src, ends.dst, meter, limit),
        Path::Sendfile => sendfile::copy_upto(ends.src, ends.dst, meter, limit),
        Path::Splice => splice::copy_upto(ends, middle, meter, limit),
        Path::Userspace => userspace::copy_upto(ends.src, ends.dst, meter, limit),
        Path::Tee => unreachable!("{path} is not a one-to-one path"),
    }
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
    if crate::process::interrupted() {
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

/// Best guess at which end an errno from a two-fd call belongs to.
pub fn side_of(errno: Errno) -> Side {
    match errno {
        Errno::ENOSPC | Errno::EDQUOT | Errno::EPIPE | Errno::EFBIG => Side::Sink,
        _ => Side::Either,
    }
}
