//! The userspace fan-out: one read into one buffer, written to every live sink. It
//! serves `--via userspace` and carries on where the kernel fan-out was refused.

use std::cell::RefCell;
use std::os::fd::BorrowedFd;

use super::{FanOut, OnError, Sink, SinkOutcome, Slowest, SCRATCH};
use crate::engine::dump::Tapped;
use crate::engine::meter::Meter;
use crate::engine::userspace::read_step;
use crate::engine::{DataPath, Failure, Record, Side};
use crate::sys;

/// Reads `src` to its end and writes every buffer to every live sink. `carry`:
/// bytes already taken from the source into a pipe of ours, read (and delivered) first.
pub(super) fn fan_out(
    src: BorrowedFd<'_>,
    carry: Option<(BorrowedFd<'_>, usize)>,
    sinks: &[Sink<'_>],
    on_error: OnError,
    meter: &Meter,
    tap: Option<&RefCell<Tapped>>,
) -> FanOut {
    let (carry_fd, mut carry_left) = carry.unwrap_or((src, 0));
    let mut outs: Vec<SinkOutcome> = sinks
        .iter()
        .map(|_| {
            let mut out = SinkOutcome::default();
            out.record.add(DataPath::Userspace, 0);
            out
        })
        .collect();
    let mut buf = vec![0u8; SCRATCH];
    let mut read_total = 0u64;
    let mut failure = None;
    let mut slowest = Slowest::default();
    'rounds: while outs.iter().any(|o| o.failure.is_none()) {
        slowest.report(&outs, meter);
        let quota = meter.chunk(buf.len());
        if crate::sys::process::interrupted() && carry_left == 0 {
            failure = Some(Failure::Interrupted);
            break;
        }
        let (from, want) = match carry_left {
            0 => (src, quota),
            left => (carry_fd, left.min(quota)),
        };
        let n = match read_step(from, &mut buf[..want]) {
            Ok(Some(0)) => break,
            Ok(Some(n)) => n,
            Ok(None) => continue,
            Err(e) => {
                failure = Some(Failure::of(e, Side::Source));
                break;
            }
        };
        carry_left = carry_left.saturating_sub(n);
        read_total += n as u64;
        if let Some(tap) = tap {
            tap.borrow_mut().wrote(&buf[..n]);
        }
        for (sink, out) in sinks.iter().zip(outs.iter_mut()) {
            if out.failure.is_some() {
                continue;
            }
            match sys::write_all(sink.fd, &buf[..n]) {
                Ok(()) => out.record.add(DataPath::Userspace, n as u64),
                Err((done, e)) => {
                    out.record.add(DataPath::Userspace, done as u64);
                    match Failure::of(e, Side::Sink) {
                        // The stop's grace ran out with this sink taking nothing.
                        Failure::Interrupted => {
                            failure = Some(Failure::Interrupted);
                            break 'rounds;
                        }
                        sink_failure => {
                            out.failure = Some(sink_failure);
                            if on_error.stops(e) {
                                break 'rounds;
                            }
                        }
                    }
                }
            }
        }
    }
    slowest.report(&outs, meter);
    let mut record = Record::default();
    record.add(DataPath::Userspace, read_total);
    FanOut {
        record,
        sinks: outs,
        failure,
    }
}
