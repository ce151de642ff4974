//! One direction of a relayed connection: bytes from a source fd to a sink fd, through a
//! pipe of zerocat's own (splice in, splice out) or a userspace buffer (read, write).
//!
//! Everything here is non-blocking and driven by readiness flags that the event loop
//! keeps (edge-triggered epoll: a flag is set by an event and cleared by EAGAIN).
//!
//! Order of bytes: the buffer holds the oldest bytes, then the pipe, then the source. So
//! output always takes the buffer first, then the pipe; in userspace mode the buffer is
//! refilled from the pipe before the source. Switching mode (adaptive, or a fallback)
//! therefore never reorders, loses or duplicates a byte.
//!
//! Adaptive choice (`--via auto`), per direction:
//! - the first path is a prior from what was measured on loopback (bench seed table, each
//!   process pinned to a core): into a TCP socket from a socket, read/write through a
//!   256 KiB buffer beat splice at every chunk size from 16 KiB up (by 1.15-1.8x), while
//!   into a unix socket or a pipe splice won (by 1.1-1.5x). So a socket -> TCP direction
//!   starts in userspace, every other one with splice;
//! - a socket source that writes tiny segments goes to userspace after its first splices:
//!   each segment takes a buffer of the pipe (16 in a 64 KiB pipe), so a splice stops at
//!   16 segments while the source still has bytes queued, and the pipe passes them on as
//!   tiny pieces, while read() coalesces them. Measured unix -> unix at 1 and 2 KiB writes,
//!   a splice moved 15.5 and 29 KiB (about one segment a buffer), and userspace was 3-8%
//!   faster; at 4 KiB and up splices stopped because the source ran dry, and splice was
//!   1.3-1.4x faster. So [`JUDGE_SPLICES`] splices that stop on a full pipe, at under
//!   [`SMALL_SEGMENT`] bytes a buffer on average, send the direction to userspace;
//! - a bulk stream that starts in userspace then runs trials, because the prior is one
//!   machine's (under TCP cubic with a sendfile feeder, splice into TCP was 2.4-2.7x faster):
//!   after [`FIRST_TRIAL`] bytes, a phase of a third of that on the current path, then (after
//!   1/48 of it to let the buffers adjust) as long a phase on the other path, each timed by
//!   the wall clock and counted as what the sink's peer took (delivered minus the sink's
//!   unsent queue, so a socket buffer swallowing a burst does not pass for speed). The
//!   other path takes over only if it was faster by [`TAKEOVER`]. A trial costs bytes on
//!   the worse path, so the gap to the next one grows fourfold, up to [`GAP_MAX`].
//!   Throughput, not CPU: the relay's CPU per byte ranked the paths wrongly for tcp ->
//!   tcp, where splice costs the relay less but its sink more. Long phases, because a
//!   phase shorter than a few scheduler slices (4 MiB took 2 ms) timed which process had
//!   the core, not the path: rates of one path varied 8x from phase to phase;
//! - trials only ever try splice from userspace: a spliced direction (from the start, or
//!   since a trial) runs none. Trying userspace cost more than its bytes: on a 1 GiB
//!   unix -> unix or tcp -> unix stream (three busy processes, two cores) the relay's
//!   copying reshuffled the scheduler, and splice, back after the trial, ran at about
//!   half its rate for the rest of the stream (auto at 0.64-0.73x of `--via splice`);
//!   under cubic, tcp -> tcp with a sendfile feeder ran 1.1x faster without the trials
//!   that followed the switch to splice. Into a unix socket or a pipe userspace never won
//!   by the takeover margin. A direction pushed into userspace (tiny segments, or no pipe
//!   to be had) runs them, to get back to splice.

use std::cell::Cell;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::time::Instant;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::libc;

use crate::engine::{is_unsupported, DataPath, Fallback, Reason, Record};
use crate::sys;
use crate::sys::pipe::{grow_pipe, OwnPipe};

/// Size of a userspace buffer (one per busy direction, pooled).
pub const BUFFER_SIZE: usize = 256 * 1024;
/// Total of all userspace buffers alive (in use and pooled): 64 of them. A direction that
/// finds none waits until one is given back (backpressure), so a relay full of stalled
/// sinks stays in bounded memory.
pub const BUFFER_BUDGET: usize = 16 << 20;
/// The capacity of a fresh pipe (the kernel default).
const PIPE_DEFAULT: usize = 64 * 1024;
/// Total capacity of all pipes zerocat holds (in use and pooled): 1,000 busy connections
/// stay within `pipe-user-pages-soft` (64 MiB per user), leaving half of it to others.
pub const PIPE_BUDGET: usize = 32 << 20;
/// Pipes kept for reuse once a direction goes idle.
const POOL_MAX: usize = 64;
/// Buffers kept for reuse (the rest are freed: an idle relay holds little memory).
const BUFFERS_POOLED: usize = 8;
/// How much faster the other path must be to take over.
const TAKEOVER: f64 = 1.25;
/// A direction runs its first trial once it has delivered this much (a bulk stream, past
/// its start-up). The other sizes of a trial scale with it.
pub const FIRST_TRIAL: u64 = 192 << 20;
pub const GAP_MAX: u64 = 4 << 30;
/// Splices that stopped on a full pipe with bytes still queued, judged for tiny segments.
const JUDGE_SPLICES: u32 = 64;
/// Bytes a pipe buffer: below this on average, the segments are tiny. Measured unix ->
/// unix: 1 and 2 KiB writes gave 1,024 and 2,048 bytes a buffer (userspace faster), 3 KiB
/// writes 2,880, 6 KiB 3,072 (a segment over a page takes two buffers), 4 and 8 KiB never
/// filled the pipe's buffers first.
const SMALL_SEGMENT: usize = 2304;
/// A direction stops judging its segments once it has delivered this much.
const JUDGE_BYTES: u64 = 16 << 20;
/// Syscalls one direction may make before the loop turns to other connections.
const OPS_PER_TURN: u32 = 64;

/// How a direction may move bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Auto,
    Splice,
    Userspace,
}

/// A pipe of the relay's own, counted in the pipe budget for as long as it lives: dropped
/// anywhere (a connection cut with bytes in it, a full pool), it gives its capacity back.
pub struct BudgetPipe {
    pipe: OwnPipe,
    spent: Rc<Cell<usize>>,
}

impl std::ops::Deref for BudgetPipe {
    type Target = OwnPipe;
    fn deref(&self) -> &OwnPipe {
        &self.pipe
    }
}

impl Drop for BudgetPipe {
    fn drop(&mut self) {
        self.spent.set(self.spent.get() - self.pipe.size);
    }
}

/// Pipes and buffers shared by every direction of the loop.
pub struct Pools {
    /// Empty pipes only (FIONREAD 0): a pipe that holds bytes is never handed on.
    pipes: Vec<BudgetPipe>,
    buffers: Vec<Box<[u8]>>,
    /// Buffers alive, in use or pooled.
    buffers_alive: usize,
    /// Capacity of every pipe alive (held or pooled).
    pipe_bytes: Rc<Cell<usize>>,
    budget: usize,
    /// Grow busy pipes to `pipe-max-size` (within the budget).
    pub grow: bool,
}

impl Pools {
    pub fn new(budget: usize, grow: bool) -> Pools {
        Pools {
            pipes: Vec::new(),
            buffers: Vec::new(),
            buffers_alive: 0,
            pipe_bytes: Rc::new(Cell::new(0)),
            budget,
            grow,
        }
    }

    pub fn pipe_budget(&self) -> usize {
        self.budget
    }

    fn take_pipe(&mut self) -> Result<BudgetPipe, Errno> {
        if let Some(pipe) = self.pipes.pop() {
            return Ok(pipe);
        }
        if self.pipe_bytes.get() + PIPE_DEFAULT > self.budget {
            return Err(Errno::ENOBUFS);
        }
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let size = fcntl(write.as_raw_fd(), FcntlArg::F_GETPIPE_SZ)
            .map(|n| n as usize)
            .unwrap_or(PIPE_DEFAULT);
        self.pipe_bytes.set(self.pipe_bytes.get() + size);
        Ok(BudgetPipe {
            pipe: OwnPipe { read, write, size },
            spent: self.pipe_bytes.clone(),
        })
    }

    /// Pools a pipe for the next direction only if it is empty (asked of the kernel, not of
    /// our count); any other is dropped, which closes it and gives its capacity back.
    fn give_pipe(&mut self, pipe: BudgetPipe) {
        let empty = sys::queued(pipe.read.as_fd()) == Ok(0);
        if empty && self.pipes.len() < POOL_MAX {
            self.pipes.push(pipe);
        }
    }

    /// A pipe that keeps filling up grows, if the budget has room for it.
    fn grow(&mut self, pipe: &mut BudgetPipe) {
        if !self.grow || self.pipe_bytes.get() + (1 << 20) > self.budget {
            return;
        }
        if let Some(size) = grow_pipe(pipe.write.as_fd()) {
            self.pipe_bytes
                .set(self.pipe_bytes.get() + size - pipe.pipe.size);
            pipe.pipe.size = size;
        }
    }

    /// A buffer within [`BUFFER_BUDGET`], or none: the direction waits. `drain`: for bytes
    /// already in our own pipe, which may go over the budget (the pipes bound them).
    fn take_buffer(&mut self, drain: bool) -> Option<Box<[u8]>> {
        if let Some(buf) = self.buffers.pop() {
            return Some(buf);
        }
        if !drain && (self.buffers_alive + 1) * BUFFER_SIZE > BUFFER_BUDGET {
            return None;
        }
        self.buffers_alive += 1;
        Some(vec![0u8; BUFFER_SIZE].into_boxed_slice())
    }

    fn give_buffer(&mut self, buf: Box<[u8]>) {
        if self.buffers.len() < BUFFERS_POOLED && self.buffers_alive * BUFFER_SIZE <= BUFFER_BUDGET
        {
            self.buffers.push(buf);
        } else {
            self.buffers_alive -= 1;
        }
    }

    /// A direction waiting for a buffer could have one now.
    pub fn buffer_free(&self) -> bool {
        !self.buffers.is_empty() || (self.buffers_alive + 1) * BUFFER_SIZE <= BUFFER_BUDGET
    }
}

/// One end of a flow as the loop sees it: the fd and its readiness flag.
pub struct End<'a> {
    pub fd: BorrowedFd<'a>,
    /// Readable (source) or writable (sink), as far as we know.
    pub ready: &'a mut bool,
    pub socket: bool,
}

/// Which end an error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    Source,
    Sink,
    /// Neither: the relay's own resources (no pipe to be had under `--via splice`).
    Relay,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowError {
    pub errno: Errno,
    pub blame: Blame,
}

/// What a turn of [`Flow::pump`] left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Waiting for readiness.
    Idle,
    /// Used its share of the loop and may have more to do now.
    Busy,
    /// Source at EOF, every byte delivered, sink shut for writing.
    Done,
    /// Waiting for a buffer (the budget is spent): pump again when one is given back.
    Starved,
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

pub struct Flow {
    policy: Policy,
    splicing: bool,
    pipe: Option<BudgetPipe>,
    in_pipe: usize,
    /// A splice into the pipe said EAGAIN while the pipe held bytes: it may be out of
    /// slots (HAZARDS: EAGAIN's two meanings). Cleared when the pipe drains.
    pipe_maybe_full: bool,
    buf: Option<Box<[u8]>>,
    /// The last turn found no buffer to read into (see [`BUFFER_BUDGET`]).
    starved: bool,
    start: usize,
    end: usize,
    pub eof: bool,
    pub shut: bool,
    pub record: Record,
    /// Bytes delivered into the sink.
    pub delivered: u64,
    /// Bytes splice has delivered (an unsupported errno counts as "refused" only at 0).
    spliced: u64,
    /// Auto: the first path is chosen (at the first turn, when both ends are known).
    primed: bool,
    /// Auto, splicing from a socket: judging the segment size (see the module comment).
    judging: bool,
    /// Splices judged so far, and the sum of their bytes per pipe buffer.
    judged: u32,
    segment_bytes: usize,
    trial: Option<Trial>,
    /// [`FIRST_TRIAL`], or a smaller one (tests).
    first_trial: u64,
    next_trial: u64,
    trial_gap: u64,
    /// Adaptive switches between splice and userspace.
    pub switches: u32,
}

impl Flow {
    /// `prior`: under auto, let the kinds of the two ends choose the first path.
    /// `first_trial`: see [`FIRST_TRIAL`].
    pub fn new(policy: Policy, prior: bool, first_trial: u64) -> Flow {
        Flow {
            policy,
            splicing: policy != Policy::Userspace,
            pipe: None,
            in_pipe: 0,
            pipe_maybe_full: false,
            buf: None,
            starved: false,
            start: 0,
            end: 0,
            eof: false,
            shut: false,
            record: Record::default(),
            delivered: 0,
            spliced: 0,
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

    /// Bytes that left the source and are not delivered yet.
    pub fn held(&self) -> usize {
        self.end - self.start + self.in_pipe
    }

    /// Moves what it can. Returns the turn's state, or the error that ends the flow.
    /// `moved` grows by the bytes delivered (for idle accounting).
    pub fn pump(
        &mut self,
        mut src: End<'_>,
        mut dst: End<'_>,
        pools: &mut Pools,
        moved: &mut u64,
    ) -> Result<Turn, FlowError> {
        if !self.primed {
            self.primed = true;
            if self.policy == Policy::Auto && src.socket {
                if is_tcp(dst.fd) {
                    self.splicing = false;
                } else {
                    self.judging = true;
                }
            }
        }
        self.starved = false;
        let mut ops = 0;
        loop {
            if self.shut {
                return Ok(Turn::Done);
            }
            if ops >= OPS_PER_TURN {
                return Ok(Turn::Busy);
            }
            ops += 1;
            let before = self.delivered;
            let out = self.output(&mut dst)?;
            *moved += self.delivered - before;
            if self.runs_trials() && self.delivered >= self.next_trial {
                self.trial_step(dst.fd);
            }
            let into = self.input(&mut src, pools)?;
            if !(out || into) {
                break;
            }
        }
        if self.eof && self.held() == 0 {
            if dst.socket {
                // Half-close: the peer sees EOF and may still answer (HAZARDS §2).
                match nix::sys::socket::shutdown(
                    dst.fd.as_raw_fd(),
                    nix::sys::socket::Shutdown::Write,
                ) {
                    Ok(()) | Err(Errno::ENOTCONN) => {}
                    Err(errno) => {
                        return Err(FlowError {
                            errno,
                            blame: Blame::Sink,
                        })
                    }
                }
            }
            self.shut = true;
            self.release(pools);
            return Ok(Turn::Done);
        }
        if !*src.ready && self.held() == 0 {
            self.release(pools);
        }
        if self.starved {
            return Ok(Turn::Starved);
        }
        Ok(Turn::Idle)
    }

    /// Gives the pipe and buffer back while nothing is in them.
    pub fn release(&mut self, pools: &mut Pools) {
        if self.in_pipe == 0 {
            if let Some(pipe) = self.pipe.take() {
                pools.give_pipe(pipe);
            }
        }
        if self.start == self.end {
            if let Some(buf) = self.buf.take() {
                pools.give_buffer(buf);
            }
            self.start = 0;
            self.end = 0;
        }
    }

    /// At the end of the connection (after [`Flow::flush_now`]): the pipe goes back to the
    /// pool if it is empty, else it is closed with what it holds (counted as undelivered);
    /// either way its capacity returns to the budget.
    pub fn close(&mut self, pools: &mut Pools) {
        if let Some(pipe) = self.pipe.take() {
            pools.give_pipe(pipe);
        }
        self.in_pipe = 0;
        self.pipe_maybe_full = false;
        if let Some(buf) = self.buf.take() {
            pools.give_buffer(buf); // what it held is counted as undelivered
        }
        self.start = 0;
        self.end = 0;
    }

    /// Delivers the oldest bytes: the buffer, then (splicing) the pipe. True on progress.
    fn output(&mut self, dst: &mut End<'_>) -> Result<bool, FlowError> {
        let sink_error = |errno| FlowError {
            errno,
            blame: Blame::Sink,
        };
        if self.start < self.end {
            if !*dst.ready {
                return Ok(false);
            }
            let buf = self.buf.as_ref().expect("bytes in a buffer");
            return match sys::write(dst.fd, &buf[self.start..self.end]) {
                Ok(n) => {
                    self.start += n;
                    if self.start == self.end {
                        self.start = 0;
                        self.end = 0;
                    }
                    self.deliver(DataPath::Userspace, n);
                    Ok(n > 0)
                }
                Err(Errno::EINTR) => Ok(true),
                Err(Errno::EAGAIN) => {
                    *dst.ready = false;
                    Ok(false)
                }
                Err(errno) => Err(sink_error(errno)),
            };
        }
        if self.in_pipe == 0 || !self.splicing || !*dst.ready {
            return Ok(false);
        }
        let pipe = self.pipe.as_ref().expect("bytes in a pipe");
        match sys::splice(pipe.read.as_fd(), dst.fd, self.in_pipe) {
            Ok(n) => {
                self.in_pipe -= n;
                self.pipe_maybe_full = false;
                self.spliced += n as u64;
                self.deliver(DataPath::Splice, n);
                Ok(n > 0)
            }
            Err(Errno::EINTR) => Ok(true),
            Err(Errno::EAGAIN) => {
                *dst.ready = false;
                Ok(false)
            }
            Err(errno) if self.may_fall_back(errno) => {
                // The sink takes no splice: what is in the pipe goes out through the
                // buffer (input() refills it from the pipe first), and so does the rest.
                self.fall_back(errno);
                Ok(true)
            }
            Err(errno) => Err(sink_error(errno)),
        }
    }

    /// Takes bytes in: the pipe into the buffer (userspace), or the source into the pipe
    /// (splice) or the buffer (userspace). True on progress.
    fn input(&mut self, src: &mut End<'_>, pools: &mut Pools) -> Result<bool, FlowError> {
        if self.splicing {
            return self.splice_in(src, pools);
        }
        if self.start < self.end {
            return Ok(false); // fill only an empty buffer
        }
        if self.in_pipe == 0 && (self.eof || !*src.ready) {
            return Ok(false);
        }
        if self.in_pipe > 0 {
            return self.pipe_to_buffer(pools);
        }
        if self.buf.is_none() {
            match pools.take_buffer(false) {
                Some(buf) => self.buf = Some(buf),
                None => {
                    self.starved = true;
                    return Ok(false);
                }
            }
        }
        let buf = self.buf.as_mut().expect("just taken");
        match sys::read(src.fd, buf) {
            Ok(0) => {
                self.eof = true;
                Ok(true)
            }
            Ok(n) => {
                self.end = n;
                Ok(true)
            }
            Err(Errno::EINTR) => Ok(true),
            Err(Errno::EAGAIN) => {
                *src.ready = false;
                Ok(false)
            }
            Err(errno) => Err(FlowError {
                errno,
                blame: Blame::Source,
            }),
        }
    }

    fn splice_in(&mut self, src: &mut End<'_>, pools: &mut Pools) -> Result<bool, FlowError> {
        if self.eof || !*src.ready || self.pipe_maybe_full {
            return Ok(false);
        }
        if self.pipe.is_none() {
            match pools.take_pipe() {
                Ok(pipe) => self.pipe = Some(pipe),
                Err(errno) => {
                    // No pipe to be had (budget spent, or out of fds): the bytes go
                    // through the buffer, and trials bring splice back when it pays.
                    if self.policy == Policy::Splice {
                        return Err(FlowError {
                            errno,
                            blame: Blame::Relay,
                        });
                    }
                    self.switch(false);
                    return Ok(true);
                }
            }
        }
        let pipe = self.pipe.as_mut().expect("just taken");
        let room = pipe.size.saturating_sub(self.in_pipe);
        if room == 0 {
            return Ok(false);
        }
        // Judging: bytes queued before the splice cannot vanish (we are the only reader), so
        // a splice that stops short of them stopped on the pipe's buffers.
        let queued = if self.judging {
            sys::queued(src.fd).unwrap_or(0)
        } else {
            0
        };
        match sys::splice(src.fd, pipe.write.as_fd(), room) {
            Ok(0) => {
                self.eof = true;
                Ok(true)
            }
            Ok(n) => {
                self.in_pipe += n;
                let size = pipe.size;
                if n == size && size < (1 << 20) {
                    pools.grow(pipe);
                }
                if self.judging {
                    self.judge_segments(n < room && queued >= room, size / sys::page_size());
                }
                Ok(true)
            }
            Err(Errno::EINTR) => Ok(true),
            Err(Errno::EAGAIN) => {
                if self.in_pipe == 0 {
                    *src.ready = false;
                } else {
                    self.pipe_maybe_full = true;
                }
                Ok(false)
            }
            Err(errno) if self.may_fall_back(errno) => {
                self.fall_back(errno);
                Ok(true)
            }
            Err(errno) => Err(FlowError {
                errno,
                blame: Blame::Source,
            }),
        }
    }

    /// After a splice in: if it stopped on a pipe out of buffers (`full`), the bytes per
    /// buffer tell the segment size.
    fn judge_segments(&mut self, full: bool, buffers: usize) {
        if self.delivered >= JUDGE_BYTES {
            self.judging = false;
            return;
        }
        if !full {
            return;
        }
        self.judged += 1;
        self.segment_bytes += self.in_pipe / buffers.max(1);
        if self.judged == JUDGE_SPLICES {
            self.judging = false;
            if self.segment_bytes / (JUDGE_SPLICES as usize) < SMALL_SEGMENT {
                self.switch(false);
            }
        }
    }

    /// Auto runs trials in userspace (however it got there), and through a trial's splice
    /// phase; a direction on splice otherwise runs none, so a trial that lands on splice is
    /// the last (see the module comment).
    fn runs_trials(&self) -> bool {
        self.policy == Policy::Auto && (!self.splicing || self.trial.is_some())
    }

    /// Adaptive: start, advance or conclude a trial of the other path.
    fn trial_step(&mut self, dst: BorrowedFd<'_>) {
        let delivered = self.delivered;
        match self.trial {
            None => {
                self.trial = Some(Trial::Current {
                    since: Instant::now(),
                    from: delivered,
                    taken: self.taken(dst),
                });
            }
            Some(Trial::Current { since, from, taken }) if delivered - from >= self.phase() => {
                let current = self.rate_since(dst, since, taken);
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
                    taken: self.taken(dst),
                });
            }
            Some(Trial::Other {
                current,
                since,
                from,
                taken,
            }) if delivered - from >= self.phase() => {
                let other = self.rate_since(dst, since, taken);
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

    /// Bytes the sink's peer has taken: delivered, less what still waits in the sink.
    fn taken(&self, dst: BorrowedFd<'_>) -> u64 {
        let waiting = sys::unsent(dst).or_else(|_| sys::queued(dst)).unwrap_or(0);
        self.delivered.saturating_sub(waiting as u64)
    }

    /// Bytes per second the sink's peer took since `since`, when it had taken `taken`.
    fn rate_since(&self, dst: BorrowedFd<'_>, since: Instant, taken: u64) -> f64 {
        let seconds = since.elapsed().as_secs_f64().max(1e-9);
        self.taken(dst).saturating_sub(taken) as f64 / seconds
    }

    fn switch(&mut self, splicing: bool) {
        if self.splicing != splicing {
            self.splicing = splicing;
            self.switches += 1;
        }
    }

    /// An unsupported errno before splice delivered a byte, under `--via auto`.
    fn may_fall_back(&self, errno: Errno) -> bool {
        self.policy == Policy::Auto && self.spliced == 0 && is_unsupported(errno)
    }

    fn fall_back(&mut self, errno: Errno) {
        self.record.add(DataPath::Splice, 0);
        self.record.fallbacks.push(Fallback {
            from: DataPath::Splice,
            to: Some(DataPath::Userspace),
            reason: Reason::Errno(errno),
        });
        self.policy = Policy::Userspace;
        self.splicing = false;
    }

    fn deliver(&mut self, path: DataPath, n: usize) {
        self.delivered += n as u64;
        self.record.add(path, n as u64);
    }

    /// At the end (abort, signal, timeout): try once more to deliver what is held, without
    /// waiting. Returns the bytes that could not be delivered.
    pub fn flush_now(&mut self, dst: BorrowedFd<'_>, pools: &mut Pools) -> usize {
        let mut ready = true;
        let mut end = End {
            fd: dst,
            ready: &mut ready,
            socket: false,
        };
        for _ in 0..OPS_PER_TURN {
            if self.held() == 0 {
                break;
            }
            let progressed = matches!(self.output(&mut end), Ok(true));
            let refilled = !self.splicing && matches!(self.pipe_to_buffer(pools), Ok(true));
            if !(progressed || refilled) {
                break;
            }
        }
        let left = self.held();
        self.release(pools);
        left
    }

    /// Userspace mode with bytes still in the pipe (after a switch or a fallback): they
    /// are older than anything in the source, so they go first.
    fn pipe_to_buffer(&mut self, pools: &mut Pools) -> Result<bool, FlowError> {
        if self.start < self.end || self.in_pipe == 0 {
            return Ok(false);
        }
        let buf = self
            .buf
            .get_or_insert_with(|| pools.take_buffer(true).expect("a buffer to drain into"));
        let pipe = self.pipe.as_ref().expect("bytes in a pipe");
        let want = self.in_pipe.min(buf.len());
        match sys::read(pipe.read.as_fd(), &mut buf[..want]) {
            Ok(n) => {
                self.in_pipe -= n;
                self.start = 0;
                self.end = n;
                Ok(n > 0)
            }
            Err(Errno::EINTR) => Ok(true),
            Err(errno) => Err(FlowError {
                errno,
                blame: Blame::Source,
            }),
        }
    }
}

/// Sets O_NONBLOCK on `fd`; returns the flags it had (to restore on a shared stdio fd).
pub fn set_nonblocking(fd: RawFd) -> Result<OFlag, Errno> {
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    if !flags.contains(OFlag::O_NONBLOCK) {
        fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    }
    Ok(flags)
}

/// Closes a socket with SO_LINGER {1, 0}: the peer gets RST, not FIN — an abort is
/// never mistaken for a clean end.
pub fn abort_socket(fd: OwnedFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid fd and a linger struct of the right size.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(fd);
}

/// A TCP socket (the sink a socket source reaches faster through read/write).
fn is_tcp(fd: BorrowedFd<'_>) -> bool {
    let mut protocol: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_PROTOCOL writes one int into a buffer of that size.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PROTOCOL,
            (&mut protocol as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    ret == 0 && protocol == libc::IPPROTO_TCP
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};

    fn pair() -> (OwnedFd, OwnedFd) {
        socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        )
        .unwrap()
    }

    /// Pumps `flow` from `src` into `dst` (both ready).
    fn pump(
        flow: &mut Flow,
        src: &OwnedFd,
        dst: &OwnedFd,
        pools: &mut Pools,
    ) -> Result<Turn, FlowError> {
        let (mut r, mut w) = (true, true);
        flow.pump(
            End {
                fd: src.as_fd(),
                ready: &mut r,
                socket: true,
            },
            End {
                fd: dst.as_fd(),
                ready: &mut w,
                socket: true,
            },
            pools,
            &mut 0,
        )
    }

    /// A sink that takes nothing more: its send queue and its peer's receive queue full.
    fn fill(fd: &OwnedFd) {
        let junk = vec![0u8; 64 * 1024];
        while sys::write(fd.as_fd(), &junk).is_ok() {}
    }

    #[test]
    fn a_pipe_left_holding_bytes_is_not_pooled_and_gives_its_capacity_back() {
        let mut pools = Pools::new(PIPE_BUDGET, false);
        let (client, src) = pair();
        let (dst, _backend) = pair();
        fill(&dst);
        sys::write(client.as_fd(), b"stranded").unwrap();
        let mut flow = Flow::new(Policy::Splice, false, FIRST_TRIAL);
        pump(&mut flow, &src, &dst, &mut pools).unwrap();
        assert_eq!(flow.held(), 8, "the bytes sit in the pipe");
        assert_eq!(pools.pipe_bytes.get(), PIPE_DEFAULT);
        assert_eq!(flow.flush_now(dst.as_fd(), &mut pools), 8);
        flow.close(&mut pools);
        assert!(pools.pipes.is_empty(), "a pipe with bytes was pooled");
        assert_eq!(
            pools.pipe_bytes.get(),
            0,
            "its capacity is back in the budget"
        );
    }

    #[test]
    fn an_empty_pipe_is_pooled_and_reused() {
        let mut pools = Pools::new(PIPE_BUDGET, false);
        let (client, src) = pair();
        let (dst, _backend) = pair();
        sys::write(client.as_fd(), b"passes").unwrap();
        let mut flow = Flow::new(Policy::Splice, false, FIRST_TRIAL);
        pump(&mut flow, &src, &dst, &mut pools).unwrap();
        assert_eq!(flow.held(), 0);
        flow.close(&mut pools);
        assert_eq!(pools.pipes.len(), 1);
        assert_eq!(pools.pipe_bytes.get(), PIPE_DEFAULT);
    }

    #[test]
    fn no_pipe_under_via_splice_blames_the_relay_not_a_side() {
        let mut pools = Pools::new(0, false);
        let (client, src) = pair();
        let (dst, _backend) = pair();
        sys::write(client.as_fd(), b"x").unwrap();
        let mut flow = Flow::new(Policy::Splice, false, FIRST_TRIAL);
        let err = pump(&mut flow, &src, &dst, &mut pools).unwrap_err();
        assert_eq!(
            err,
            FlowError {
                errno: Errno::ENOBUFS,
                blame: Blame::Relay
            }
        );
    }

    #[test]
    fn a_direction_without_a_buffer_waits_and_moves_once_one_is_given_back() {
        let mut pools = Pools::new(PIPE_BUDGET, false);
        let held: Vec<_> = (0..BUFFER_BUDGET / BUFFER_SIZE)
            .map(|_| pools.take_buffer(false).unwrap())
            .collect();
        let (client, src) = pair();
        let (dst, backend) = pair();
        sys::write(client.as_fd(), b"later").unwrap();
        let mut flow = Flow::new(Policy::Userspace, false, FIRST_TRIAL);
        assert_eq!(pump(&mut flow, &src, &dst, &mut pools), Ok(Turn::Starved));
        assert_eq!(flow.delivered, 0);
        assert!(!pools.buffer_free());
        for buf in held {
            pools.give_buffer(buf);
        }
        assert!(pools.buffer_free());
        assert_eq!(pump(&mut flow, &src, &dst, &mut pools), Ok(Turn::Idle));
        let mut got = [0u8; 5];
        assert_eq!(sys::read(backend.as_fd(), &mut got), Ok(5));
        assert_eq!(&got, b"later");
    }
}
