//! One source, many sinks: the fan-out of `zerocat tee`. This file owns its vocabulary
//! (sinks, outcomes, `--output-error`) and the choice of path: the kernel fan-out
//! (`kernel.rs`: tee(2) and splice) unless `--via userspace`; when the kernel refuses
//! before a byte moved (the engine's rule), the userspace fan-out (`userspace.rs`: read once,
//! write to every sink) carries on, first delivering what the kernel fan-out had already
//! taken from the source.

mod kernel;
mod userspace;

use std::os::fd::{AsFd, BorrowedFd};

use super::{DataPath, Failure, Fallback, Reason, Record, Side, Via};
use crate::engine::meter::Meter;
use crate::sys::fdkind::FdInfo;

pub use kernel::{consumer_of, lane_words};

/// The most one userspace write round (or one pipe drain with writes) holds in memory.
const SCRATCH: usize = super::userspace::BUFFER_SIZE;

/// What to do when a sink fails (GNU tee's `--output-error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Stop the whole fan-out (after draining what is already in lane pipes).
    #[default]
    Fail,
    /// Drop that sink and keep feeding the others; the run still fails at the end.
    Continue,
}

/// One sink handed to the fan-out.
pub struct Sink<'a> {
    pub fd: BorrowedFd<'a>,
    pub info: FdInfo,
}

/// What happened to one sink.
#[derive(Debug, Default)]
pub struct SinkOutcome {
    /// How its bytes arrived: `tee`, `splice` (the consumer) or `userspace`, with counts.
    pub record: Record,
    /// Why it stopped early, if it did.
    pub failure: Option<Failure>,
}

impl SinkOutcome {
    pub fn bytes(&self) -> u64 {
        self.record.bytes()
    }
}

/// What the fan-out did.
#[derive(Debug)]
pub struct FanOut {
    /// The fan-out path(s) and the bytes taken from the source on each.
    pub record: Record,
    /// One per sink, in the order given.
    pub sinks: Vec<SinkOutcome>,
    /// A failure of the source, a refused forced path, or an interruption.
    pub failure: Option<Failure>,
}

/// Moves every byte of `src` to every sink. `via` may force `tee`/`splice` (the kernel
/// fan-out, no fallback) or `userspace`.
pub fn fan_out(
    src: BorrowedFd<'_>,
    src_info: &FdInfo,
    sinks: &[Sink<'_>],
    via: Via,
    on_error: OnError,
    meter: &Meter,
) -> FanOut {
    let kernel_path = if sinks.len() > 1 {
        DataPath::Tee
    } else {
        DataPath::Splice
    };
    let forced = via != Via::Auto;
    if via == Via::Forced(DataPath::Userspace) {
        return userspace::fan_out(src, None, sinks, on_error, meter);
    }
    let refusal = match kernel::fan_out(src, src_info, sinks, kernel_path, forced, on_error, meter)
    {
        Ok(out) => return out,
        Err(refusal) => refusal,
    };
    let refused = refusal.reason;
    let fallback = Fallback {
        from: kernel_path,
        to: (!forced).then_some(DataPath::Userspace),
        reason: refused,
    };
    if forced {
        let Reason::Errno(errno) = refused else {
            unreachable!("the kernel fan-out refuses only with an errno")
        };
        return FanOut {
            record: Record {
                paths: vec![(kernel_path, 0)],
                fallbacks: vec![fallback],
            },
            sinks: sinks.iter().map(|_| SinkOutcome::default()).collect(),
            failure: Some(Failure::of(errno, Side::Either)),
        };
    }
    let carry = refusal
        .carried
        .as_ref()
        .map(|(pipe, carried)| (pipe.read.as_fd(), *carried));
    let mut out = userspace::fan_out(src, carry, sinks, on_error, meter);
    out.record.paths.insert(0, (kernel_path, 0));
    out.record.fallbacks.insert(0, fallback);
    out
}

/// The progress count of a fan-out: bytes delivered to every sink still running, i.e. to
/// the slowest one (a sink that failed no longer holds the others back).
#[derive(Debug, Default)]
struct Slowest {
    told: u64,
}

impl Slowest {
    /// Tells `meter` what the slowest live sink got since the last call.
    fn report<'o>(&mut self, sinks: impl IntoIterator<Item = &'o SinkOutcome>, meter: &Meter) {
        let least = sinks
            .into_iter()
            .filter(|s| s.failure.is_none())
            .map(SinkOutcome::bytes)
            .min();
        if let Some(least) = least.filter(|&n| n > self.told) {
            meter.add(least - self.told);
            self.told = least;
        }
    }
}
