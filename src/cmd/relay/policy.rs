//! How a direction chooses between splice and userspace (read/write through a buffer).
//!
//! `--via splice` and `--via userspace` fix the path. Under `--via auto` one rule
//! (bench/NOTEBOOK.md, `relay: one path rule`): a direction from a socket starts in
//! userspace, where a request or an answer costs one read and one write, and moves to
//! splice at its first read of [`BULK_READ`] bytes or more (a bulk stream), if a pipe is to
//! be had; from then on, its first [`JUDGE_SPLICES`] splices that stop on a full pipe
//! averaging under [`SMALL_SEGMENT`] bytes a pipe buffer (tiny segments, which read()
//! coalesces: `relay: tiny segments go to userspace`) send it back to userspace for good.
//! A direction from anything else (a pipe, a file) starts with splice.

use nix::errno::Errno;

use crate::engine;
use crate::sys;

/// A read of this much is a bulk stream's: more than request/response messages carry, and
/// less than a unix socket queues (about 230 KB), so a unix source reaches it too.
pub const BULK_READ: usize = 64 * 1024;
/// Splices that stopped on a full pipe with bytes still queued, judged for tiny segments.
const JUDGE_SPLICES: u32 = 64;
/// Bytes a pipe buffer: below this on average, the segments are tiny (1 and 2 KiB writes;
/// bench/NOTEBOOK.md, `relay: tiny segments go to userspace`).
const SMALL_SEGMENT: usize = 2304;
/// A direction stops judging its segments once it has delivered this much on splice.
const JUDGE_BYTES: u64 = 16 << 20;

/// How a direction may move bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Auto,
    Splice,
    Userspace,
}

/// One direction's path: the policy, the path it is on, and the state of its choice.
pub struct Choice {
    policy: Policy,
    splicing: bool,
    /// Auto: the first path is chosen (at the first turn, when the source is known).
    primed: bool,
    /// Auto: a socket source starts on splice (see [`Choice::new`]).
    splice_first: bool,
    /// Auto, in userspace for good (tiny segments).
    settled: bool,
    /// Auto, splicing from a socket: judging the segment size until this much is delivered.
    judging: Option<u64>,
    /// Splices judged so far, and the sum of their bytes per pipe buffer.
    judged: u32,
    segment_bytes: usize,
    /// Switches between splice and userspace (adaptive, or for want of a pipe).
    switches: u32,
}

impl Choice {
    /// `prior`: under auto, a socket source starts in userspace; without it (the hidden
    /// `--splice-first`, for tests aimed at splice), every direction starts on splice as
    /// if a bulk read had moved it there.
    pub fn new(policy: Policy, prior: bool) -> Choice {
        Choice {
            policy,
            splicing: policy != Policy::Userspace,
            primed: false,
            splice_first: !prior,
            settled: false,
            judging: None,
            judged: 0,
            segment_bytes: 0,
            switches: 0,
        }
    }

    pub fn splicing(&self) -> bool {
        self.splicing
    }

    pub fn switches(&self) -> u32 {
        self.switches
    }

    /// At the first turn, under auto: a socket source starts in userspace, and (without
    /// the prior) is judged on splice from its first byte.
    pub fn prime(&mut self, src_socket: bool) {
        if self.primed {
            return;
        }
        self.primed = true;
        if self.policy == Policy::Auto && src_socket {
            if self.splice_first {
                self.judging = Some(JUDGE_BYTES);
            } else {
                self.splicing = false;
            }
        }
    }

    /// A read of `n` bytes in userspace: is it the bulk read that moves the direction to
    /// splice? (The caller takes a pipe, then calls [`Choice::move_to_splice`].)
    pub fn bulk_read(&self, n: usize) -> bool {
        self.policy == Policy::Auto && !self.splicing && !self.settled && n >= BULK_READ
    }

    /// On splice after a bulk read; a socket source is judged for tiny segments over its
    /// next [`JUDGE_BYTES`] (`delivered`: its count so far).
    pub fn move_to_splice(&mut self, delivered: u64, src_socket: bool) {
        self.switch(true);
        if src_socket && self.judged == 0 {
            self.judging = Some(delivered + JUDGE_BYTES);
        }
    }

    /// Judging tiny segments: a splice in should report whether it stopped on a full pipe.
    pub fn judging(&self) -> bool {
        self.judging.is_some()
    }

    /// After a splice in: if it stopped on a pipe out of buffers (`full`), the bytes per
    /// buffer (`in_pipe` over the pipe's buffers) tell the segment size. A pipe full of
    /// bytes (`in_pipe` = its `size`) holds a page or more a buffer: no tiny segments.
    pub fn judge_segments(&mut self, delivered: u64, in_pipe: usize, size: usize, full: bool) {
        let Some(until) = self.judging else {
            return;
        };
        if delivered >= until || in_pipe == size {
            self.judging = None;
            self.judged = JUDGE_SPLICES; // judged: not tiny
            return;
        }
        if !full {
            return;
        }
        self.judged += 1;
        self.segment_bytes += in_pipe / (size / sys::page_size()).max(1);
        if self.judged == JUDGE_SPLICES {
            self.judging = None;
            if self.segment_bytes / (JUDGE_SPLICES as usize) < SMALL_SEGMENT {
                self.settled = true;
                self.switch(false);
            }
        }
    }

    /// No pipe to be had (budget spent, or out of fds). True: the bytes go through the
    /// buffer (and the next bulk read tries splice again); false under `--via splice`,
    /// which has no other path.
    pub fn without_pipe(&mut self) -> bool {
        if self.policy == Policy::Splice {
            return false;
        }
        self.switch(false);
        true
    }

    fn switch(&mut self, splicing: bool) {
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
