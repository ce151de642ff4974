//! One source, many sinks: the fan-out of `zerocat tee`. This file owns its vocabulary
//! (sinks, outcomes, `--output-error`) and the choice of path: the kernel fan-out
//! (`kernel.rs`: tee(2) and splice) unless `--via userspace`; when the kernel refuses
//! before a byte moved (the engine's rule), the userspace fan-out (`userspace.rs`: read once,
//! write to every sink) carries on, first delivering what the kernel fan-out had already
//! taken from the source.

mod kernel;
mod userspace;

use std::cell::RefCell;
use std::os::fd::{AsFd, BorrowedFd};

use nix::errno::Errno;

use super::{DataPath, Failure, Fallback, Reason, Record, Side, Via};
use crate::engine::dump::Tapped;
use crate::engine::meter::Meter;
use crate::sys::fdkind::FdInfo;

pub use kernel::{consumer_of, lane_words};

/// The most one userspace write round (or one pipe drain with writes) holds in memory.
const SCRATCH: usize = super::userspace::BUFFER_SIZE;

/// What to do when a sink fails: zerocat's default, and GNU tee's `--output-error` modes.
/// A "reader that went away" is a sink failing with EPIPE (a pipe or socket whose reader
/// closed); the `*NoPipe` modes drop such a sink quietly, as GNU tee does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Stop the whole fan-out (after draining what is already in lane pipes). The command
    /// turns stdout's reader going away into the shell's quiet 141, as GNU tee's default
    /// (killed by SIGPIPE) does.
    #[default]
    Fail,
    /// GNU `warn`: drop that sink and keep feeding the others; the run still fails at the
    /// end (`--on-error=continue`).
    Warn,
    /// GNU `warn-nopipe` (`-p`): like `Warn`, but a reader that went away is dropped
    /// quietly and is no failure of the run.
    WarnNoPipe,
    /// GNU `exit`: stop at the first sink that fails, EPIPE included (no 141: a message
    /// and exit 1).
    Exit,
    /// GNU `exit-nopipe`: a reader that went away is dropped quietly; any other failure
    /// stops the fan-out.
    ExitNoPipe,
    /// GNU tee without `--output-error`: a sink that fails otherwise is dropped (said, exit
    /// 1 at the end) and the others go on; a reader that went away ends the run at once,
    /// quietly, as SIGPIPE ends GNU tee (the command exits 141).
    Gnu,
}

impl OnError {
    /// Whether a sink failing with `errno` stops the whole fan-out.
    pub fn stops(self, errno: Errno) -> bool {
        match self {
            OnError::Fail | OnError::Exit => true,
            OnError::Warn | OnError::WarnNoPipe => false,
            OnError::ExitNoPipe => errno != Errno::EPIPE,
            OnError::Gnu => errno == Errno::EPIPE,
        }
    }

    /// The `*NoPipe` modes: a reader that went away is no failure, so the fan-out watches
    /// for it while it waits for input, and ends when no reader is left (GNU tee 9.2's
    /// `-p`), rather than at the next write, which may be long in coming.
    pub fn watches_readers(self) -> bool {
        matches!(self, OnError::WarnNoPipe | OnError::ExitNoPipe)
    }

    /// Whether a sink failing with `errno` fails the run (a message, exit 1): not a reader
    /// that went away under the `*NoPipe` modes.
    pub fn counts(self, errno: Errno) -> bool {
        match self {
            OnError::WarnNoPipe | OnError::ExitNoPipe => errno != Errno::EPIPE,
            // SIGPIPE's quiet end: the command's 141, no message.
            OnError::Gnu => errno != Errno::EPIPE,
            OnError::Fail | OnError::Warn | OnError::Exit => true,
        }
    }
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
/// fan-out, no fallback) or `userspace`. `tap`: `--dump`, which the kernel fan-out feeds
/// with tee(2) from the source's pipe before consuming it, the userspace one with a write.
pub fn fan_out(
    src: BorrowedFd<'_>,
    src_info: &FdInfo,
    sinks: &[Sink<'_>],
    via: Via,
    on_error: OnError,
    meter: &Meter,
    tap: Option<&RefCell<Tapped>>,
) -> FanOut {
    let kernel_path = if sinks.len() > 1 {
        DataPath::Tee
    } else {
        DataPath::Splice
    };
    let forced = via != Via::Auto;
    if via == Via::Forced(DataPath::Userspace) {
        return userspace::fan_out(src, None, sinks, on_error, meter, tap);
    }
    let kernel = kernel::fan_out(
        src,
        src_info,
        sinks,
        (kernel_path, forced),
        on_error,
        meter,
        tap,
    );
    let refusal = match kernel {
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
    let mut out = userspace::fan_out(src, carry, sinks, on_error, meter, tap);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// GNU tee's table (coreutils `fail_output`): which failures stop the run and which
    /// count toward exit 1, for a reader that went away (EPIPE) and any other error.
    #[test]
    fn each_mode_stops_and_counts_as_gnu_tee() {
        let (pipe, other) = (Errno::EPIPE, Errno::ENOSPC);
        let table = [
            // mode, stops on EPIPE, on ENOSPC; counts EPIPE, ENOSPC
            (OnError::Fail, true, true, true, true),
            (OnError::Warn, false, false, true, true),
            (OnError::WarnNoPipe, false, false, false, true),
            (OnError::Exit, true, true, true, true),
            (OnError::ExitNoPipe, false, true, false, true),
        ];
        for (mode, stops_pipe, stops_other, counts_pipe, counts_other) in table {
            assert_eq!(mode.stops(pipe), stops_pipe, "{mode:?}");
            assert_eq!(mode.stops(other), stops_other, "{mode:?}");
            assert_eq!(mode.counts(pipe), counts_pipe, "{mode:?}");
            assert_eq!(mode.counts(other), counts_other, "{mode:?}");
        }
    }
}
