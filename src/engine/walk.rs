//! The one place that walks a chain: each path runs until it ends, fails, or hands over to
//! the next one, and the [`Record`] says what ran.

use std::io;

use nix::errno::Errno;

use super::{
    copy_range, reflink, sendfile, splice, userspace, DataPath, Ends, Failure, Fallback, Outcome,
    Reason, Record, Side,
};
use crate::engine::meter::Meter;
use crate::sys;
use crate::sys::fdkind::FdKind;
use crate::sys::pipe::OwnPipe;

/// Walks `chain` until a path ends or fails. Returns what ran, and the failure if any.
pub fn transfer(
    ends: &Ends<'_>,
    chain: &[DataPath],
    middle: Option<&OwnPipe>,
    meter: &Meter,
) -> (Record, Option<Failure>) {
    transfer_upto(ends, chain, middle, meter, u64::MAX)
}

/// [`transfer`], stopping after `limit` bytes (or at EOF, whichever comes first): one data
/// extent of a sparse file. `DataPath::Reflink` clones the whole file whatever the limit, so a
/// caller puts it only in the chain of a file's first extent.
pub fn transfer_upto(
    ends: &Ends<'_>,
    chain: &[DataPath],
    middle: Option<&OwnPipe>,
    meter: &Meter,
    limit: u64,
) -> (Record, Option<Failure>) {
    let mut reserved = false;
    let (record, failure) = walk_chain(ends, chain, middle, meter, limit, &mut reserved);
    if reserved && (failure.is_some() || record.bytes() < ends.reserve) {
        // Cut short, or the source shrank: no blocks stay reserved past the end.
        let _ = sys::free_past_end(ends.dst);
    }
    (record, failure)
}

fn walk_chain(
    ends: &Ends<'_>,
    chain: &[DataPath],
    middle: Option<&OwnPipe>,
    meter: &Meter,
    limit: u64,
    reserved: &mut bool,
) -> (Record, Option<Failure>) {
    let mut record = Record::default();
    let mut carried = 0; // bytes a refused path delivered by plain writes
    let mut short = 0; // bytes paths that stopped short delivered

    // The first path that writes blocks (a clone writes none) gets them reserved.
    let first_writer = chain.iter().position(|&p| p != DataPath::Reflink);
    debug_assert!(
        ends.tap.is_none() || chain.iter().all(|p| p.feeds_a_tap()),
        "a path the dump cannot see in a tapped chain: {chain:?}"
    );
    for (i, &path) in chain.iter().enumerate() {
        if ends.reserve > 0 && Some(i) == first_writer {
            *reserved = reserve(ends);
        }
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

/// Reserves the sink's blocks before the first path that writes them (a clone writes
/// none). A delayed-allocation filesystem (ext4) then finds them in place instead of
/// reserving them a page at a time (`bench/NOTEBOOK.md#copy-reserved-blocks`). Advice only: a filesystem without
/// fallocate, or a full one, leaves the paths to go as they would have (a full disk fails
/// at the write, as in cp). The size stays as it is: a copy cut short is as long as what
/// was written, never padded with zeros. True when the blocks were reserved.
fn reserve(ends: &Ends<'_>) -> bool {
    match sys::reserve_blocks(ends.dst, ends.reserve) {
        Ok(()) => true,
        // A full disk may have given part of it: given back with the rest at the end.
        Err(Errno::ENOSPC | Errno::EDQUOT) => true,
        Err(_) => false,
    }
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
            record.add(DataPath::Userspace, n);
            (record, None)
        }
        Outcome::Failed(n, failure) => {
            record.add(DataPath::Userspace, n);
            (record, Some(failure))
        }
        Outcome::Fallback(..) | Outcome::Short(..) => {
            unreachable!("the userspace path has nothing to fall back to")
        }
    }
}

fn record_carried(record: &mut Record, carried: u64) {
    if carried > 0 {
        record.add(DataPath::Userspace, carried);
    }
}

fn run_path(
    path: DataPath,
    ends: &Ends<'_>,
    middle: Option<&OwnPipe>,
    meter: &Meter,
    limit: u64,
) -> Outcome {
    match path {
        DataPath::Reflink => reflink::clone(ends, meter),
        DataPath::CopyFileRange => {
            copy_range::copy_upto(ends.src, ends.src_info.size, ends.dst, meter, limit)
        }
        DataPath::Sendfile => sendfile::copy_upto(ends.src, ends.dst, meter, limit),
        DataPath::Splice => splice::copy_upto(ends, middle, meter, limit),
        DataPath::Userspace if ends.src_info.kind == FdKind::Datagram => {
            let size = (ends.dst_info.kind == FdKind::Datagram)
                .then_some(ends.dst_info.datagram_size)
                .flatten();
            userspace::copy_from_datagrams(
                ends.src,
                ends.dst,
                meter,
                limit,
                size,
                ends.src_info.quiet_end,
                ends.tap,
            )
        }
        DataPath::Userspace if ends.dst_info.kind == FdKind::Datagram => {
            let size = ends.dst_info.datagram_size;
            userspace::copy_datagrams(ends.src, ends.dst, meter, limit, size, ends.tap)
        }
        DataPath::Userspace => userspace::copy_tapped(ends.src, ends.dst, meter, limit, ends.tap),
        DataPath::Tee => unreachable!("{path} is not a one-to-one path"),
    }
}
