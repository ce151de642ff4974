//! How a direction chooses between splice and userspace (read/write through a buffer).
//!
//! `--via splice` and `--via userspace` fix the path; `--via auto` chooses per direction,
//! because neither path wins everywhere (the measurements: bench/RESULTS.md, sections
//! `relay: first path per direction` to `relay: trials only try splice`):
//! - the prior: a socket -> TCP direction starts in userspace, every other with splice;
//! - tiny segments: a socket source whose first [`JUDGE_SPLICES`] full-pipe splices average
//!   under [`SMALL_SEGMENT`] bytes a pipe buffer goes to userspace (read() coalesces them);
//! - trials: a direction in userspace, after [`FIRST_TRIAL`] bytes, times a phase on its
//!   path and one on splice (wall clock, counting what the sink's peer took); splice takes
//!   over only if faster by [`TAKEOVER`]. Gaps between trials grow fourfold up to
//!   [`GAP_MAX`]. A spliced direction runs no trials.

use std::os::fd::BorrowedFd;
use std::time::Instant;

use nix::errno::Errno;

use crate::engine;
use crate::sys;

/// How much faster the other path must be to take over.
const TAKEOVER: f64 = 1.25;
/// A direction runs its first trial once it has delivered this much (a bulk stream, past
/// its start-up). The other sizes of a trial scale with it.
pub const FIRST_TRIAL: u64 = 192 << 20;
/// The longest gap between two trials.
const GAP_MAX: u64 = 4 << 30;
/// Splices that stopped on a full pipe with bytes still queued, judged for tiny segments.
const JUDGE_SPLICES: u32 = 64;
/// Bytes a pipe buffer: below this on average, the segments are tiny (1 and 2 KiB writes;
/// bench/RESULTS.md, `relay: tiny segments go to userspace`).
const SMALL_SEGMENT: usize = 2304;
/// A direction stops judging its segments once it has delivered this much.
const JUDGE_BYTES: u64 = 16 << 20;

/// How a direction may move bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Auto,
    Splice,
    Userspace,
}

/// Where a trial of the other path is (auto).
#[derive(Debug, Clone, Copy)]
enum Trial {
    /// Timing the current path since `since`, when `from` bytes were delivered and the
    /// sink's peer had taken `taken`.
    Current {
        since: Instant,
        from: u64,
        taken: u64,
    },
    /// On the other path, moving bytes untimed until `until` are delivered.
    Settle { current: f64, until: u64 },
    /// Timing the other path; `current` is the current path's rate.
    Other {
        current: f64,
        since: Instant,
        from: u64,
        taken: u64,
    },
}

/// One direction's path: the policy, the path it is on, and the state of its choice.
pub struct Choice {
    policy: Policy,
    splicing: bool,
    /// Auto: the first path is chosen (at the first turn, when both ends are known).
    primed: bool,
    /// Auto, splicing from a socket: judging the segment size.
    judging: bool,
    /// Splices judged so far, and the sum of their bytes per pipe buffer.
    judged: u32,
    segment_bytes: usize,
    trial: Option<Trial>,
    /// [`FIRST_TRIAL`], or a smaller one (tests).
    first_trial: u64,
    next_trial: u64,
    trial_gap: u64,
    /// Switches between splice and userspace (adaptive, or for want of a pipe).
    switches: u32,
}

impl Choice {
    /// `prior`: under auto, let the kinds of the two ends choose the first path.
    /// `first_trial`: see [`FIRST_TRIAL`].
    pub fn new(policy: Policy, prior: bool, first_trial: u64) -> Choice {
        Choice {
            policy,
            splicing: policy != Policy::Userspace,
            primed: !prior,
            judging: false,
            judged: 0,
            segment_bytes: 0,
            trial: None,
            first_trial,
            next_trial: first_trial,
            trial_gap: first_trial * 4 / 3,
            switches: 0,
        }
    }

    pub fn splicing(&self) -> bool {
        self.splicing
    }

    pub fn switches(&self) -> u32 {
        self.switches
    }

    /// At the first turn, under auto: the prior from the kinds of the two ends.
    pub fn prime(&mut self, src_socket: bool, dst: BorrowedFd<'_>) {
        if self.primed {
            return;
        }
        self.primed = true;
        if self.policy == Policy::Auto && src_socket {
            if sys::socket::is_tcp(dst) {
                self.splicing = false;
            } else {
                self.judging = true;
            }
        }
    }

    /// Judging tiny segments: a splice in should report whether it stopped on a full pipe.
    pub fn judging(&self) -> bool {
        self.judging
    }

    /// After a splice in: if it stopped on a pipe out of buffers (`full`), the bytes per
    /// buffer (`in_pipe` over `buffers`) tell the segment size. A pipe full of bytes
    /// (`in_pipe` = its `size`) holds a page or more a buffer: no tiny segments.
    pub fn judge_segments(&mut self, delivered: u64, in_pipe: usize, size: usize, full: bool) {
        if delivered >= JUDGE_BYTES || in_pipe == size {
            self.judging = false;
            return;
        }
        let buffers = size / sys::page_size();
        if !full {
            return;
        }
        self.judged += 1;
        self.segment_bytes += in_pipe / buffers.max(1);
        if self.judged == JUDGE_SPLICES {
            self.judging = false;
            if self.segment_bytes / (JUDGE_SPLICES as usize) < SMALL_SEGMENT {
                self.switch(false);
            }
        }
    }

    /// Auto runs trials in userspace (however it got there), and through a trial's splice
    /// phase; a direction on splice otherwise runs none, so a trial that lands on splice is
    /// the last.
    fn runs_trials(&self) -> bool {
        self.policy == Policy::Auto && (!self.splicing || self.trial.is_some())
    }

    /// Adaptive, once `delivered` bytes reached the sink `dst`: start, advance or conclude a
    /// trial of the other path, when one is due.
    pub fn trial_step(&mut self, delivered: u64, dst: BorrowedFd<'_>) {
        if !self.runs_trials() || delivered < self.next_trial {
            return;
        }
        match self.trial {
            None => {
                self.trial = Some(Trial::Current {
                    since: Instant::now(),
                    from: delivered,
                    taken: taken(delivered, dst),
                });
            }
            Some(Trial::Current { since, from, taken }) if delivered - from >= self.phase() => {
                let current = rate_since(delivered, dst, since, taken);
                self.switch(!self.splicing);
                self.trial = Some(Trial::Settle {
                    current,
                    until: delivered + self.settle(),
                });
            }
            Some(Trial::Settle { current, until }) if delivered >= until => {
                self.trial = Some(Trial::Other {
                    current,
                    since: Instant::now(),
                    from: delivered,
                    taken: taken(delivered, dst),
                });
            }
            Some(Trial::Other {
                current,
                since,
                from,
                taken,
            }) if delivered - from >= self.phase() => {
                let other = rate_since(delivered, dst, since, taken);
                if other < current * TAKEOVER {
                    self.switch(!self.splicing);
                }
                self.trial = None;
                self.next_trial = delivered + self.trial_gap;
                self.trial_gap = (self.trial_gap * 4).min(GAP_MAX);
            }
            Some(_) => {}
        }
    }

    /// Bytes each side of a trial is timed over.
    fn phase(&self) -> u64 {
        self.first_trial / 3
    }

    /// Bytes moved on the other path before its phase is timed (the buffers adjust).
    fn settle(&self) -> u64 {
        self.first_trial / 48
    }

    /// No pipe to be had (budget spent, or out of fds). True: the bytes go through the
    /// buffer, and trials bring splice back when it pays; false under `--via splice`,
    /// which has no other path.
    pub fn without_pipe(&mut self) -> bool {
        if self.policy == Policy::Splice {
            return false;
        }
        self.switch(false);
        true
    }

    pub fn switch(&mut self, splicing: bool) {
        if self.splicing != splicing {
            self.splicing = splicing;
            self.switches += 1;
        }
    }

    /// Under `--via auto`, the engine's fallback rule
    /// ([`engine::falls_back`]: an unsupported errno before splice delivered a byte) hands the
    /// direction over to userspace; under a forced path every errno is a failure.
    pub fn falls_back(&self, errno: Errno, spliced: u64) -> bool {
        self.policy == Policy::Auto && engine::falls_back(errno, spliced)
    }

    /// Userspace from now on (after [`Choice::falls_back`]).
    pub fn fall_back(&mut self) {
        self.policy = Policy::Userspace;
        self.splicing = false;
    }
}

/// Bytes the sink's peer has taken: `delivered`, less what still waits in the sink.
fn taken(delivered: u64, dst: BorrowedFd<'_>) -> u64 {
    let waiting = sys::unsent(dst).or_else(|_| sys::queued(dst)).unwrap_or(0);
    delivered.saturating_sub(waiting as u64)
}

/// Bytes per second the sink's peer took since `since`, when it had taken `taken`.
fn rate_since(delivered: u64, dst: BorrowedFd<'_>, since: Instant, taken_then: u64) -> f64 {
    let seconds = since.elapsed().as_secs_f64().max(1e-9);
    taken(delivered, dst).saturating_sub(taken_then) as f64 / seconds
}
