//! The kernel fan-out, its pipes and its loop. The source's bytes sit in one pipe `S` (the
//! source itself when it is a pipe, else a pipe of ours filled by splice). tee(2)
//! duplicates the head of `S` into one pipe per sink (the sink itself when it is a pipe,
//! else a lane pipe of ours that is then spliced into the sink), and one sink, the
//! *consumer*, is fed by splicing straight out of `S`, which is what consumes the bytes.
//!
//! tee(2) always copies from the head of `S` and does not consume. So a lane that already
//! holds `ahead` bytes of that head must not be teed again until `S` has been consumed past
//! them, or it would get them twice (HAZARDS: 12,288 bytes delivered for 8,192). The loop
//! tees only into lanes with `ahead == 0`, and consumes exactly the least `ahead` of all
//! lanes: what every sink has been given. Lane pipes are emptied into their sinks every
//! round, so memory is the pipes and nothing else, and a slow sink slows everyone.

use std::cell::RefCell;
use std::os::fd::{AsFd, BorrowedFd};

use nix::errno::Errno;
use nix::poll::PollFlags;

use super::{FanOut, OnError, Sink, SinkOutcome, Slowest, SCRATCH};
use crate::engine::dump::Tapped;
use crate::engine::meter::Meter;
use crate::engine::userspace::read_write;
use crate::engine::{falls_back, DataPath, Failure, Fallback, Reason, Record, Side};
use crate::sys;
use crate::sys::fdkind::{FdInfo, FdKind};
use crate::sys::pipe::{discard, grow_pipe, grow_unless_shrunk, OwnPipe};

/// The kernel fan-out refused before any sink was given a byte.
pub(super) struct Refusal {
    pub reason: Reason,
    /// Our inbound pipe with the bytes already taken from the source into it: they exist
    /// nowhere else and go out first.
    pub carried: Option<(OwnPipe, usize)>,
}

/// Runs the kernel fan-out to the end, or returns its refusal. `forced`: `--via`
/// named the path, so a refusal is a failure (there is no next path).
pub(super) fn fan_out(
    src: BorrowedFd<'_>,
    src_info: &FdInfo,
    sinks: &[Sink<'_>],
    (path, forced): (DataPath, bool),
    on_error: OnError,
    meter: &Meter,
    tap: Option<&RefCell<Tapped>>,
) -> Result<FanOut, Refusal> {
    let pipes = Pipes::new(src_info, sinks).map_err(|errno| Refusal {
        reason: Reason::Errno(errno),
        carried: None,
    })?;
    let mut kernel = Kernel::new(src, sinks, &pipes, path, forced);
    kernel.tap = tap;
    let (reason, queued) = match kernel.run(on_error, meter) {
        Ok(()) => return Ok(kernel.finish()),
        Err(reason) => (reason, kernel.queued),
    };
    let carried = pipes
        .inbound
        .filter(|_| queued > 0)
        .map(|pipe| (pipe, queued));
    Err(Refusal { reason, carried })
}

/// The pipes of the kernel fan-out, owned apart from the loop's state.
struct Pipes {
    /// Between a source that is not a pipe and `S`.
    inbound: Option<OwnPipe>,
    /// One per sink: a lane pipe for a sink that is neither a pipe nor the consumer.
    lanes: Vec<Option<OwnPipe>>,
    /// The sink fed straight out of `S`: the last one that is not a pipe (a pipe sink is
    /// teed into directly and needs no lane pipe), else the last one.
    consumer: usize,
}

impl Pipes {
    fn new(src_info: &FdInfo, sinks: &[Sink<'_>]) -> Result<Pipes, Errno> {
        let inbound = match src_info.kind {
            FdKind::Pipe => None,
            _ => Some(OwnPipe::new()?),
        };
        let kinds: Vec<FdKind> = sinks.iter().map(|s| s.info.kind).collect();
        let consumer = consumer_of(&kinds);
        let mut lanes = Vec::with_capacity(sinks.len());
        for (i, sink) in sinks.iter().enumerate() {
            let own = i != consumer && sink.info.kind != FdKind::Pipe;
            lanes.push(if own { Some(OwnPipe::new()?) } else { None });
        }
        Ok(Pipes {
            inbound,
            lanes,
            consumer,
        })
    }
}

/// Which sink the kernel fan-out feeds straight out of the source's pipe.
pub fn consumer_of(sinks: &[FdKind]) -> usize {
    sinks
        .iter()
        .rposition(|&kind| kind != FdKind::Pipe)
        .unwrap_or(sinks.len().saturating_sub(1))
}

/// How the kernel fan-out plans to feed each sink, for `-v` and `--explain`.
pub fn lane_words(sinks: &[FdKind]) -> Vec<&'static str> {
    let consumer = consumer_of(sinks);
    sinks
        .iter()
        .enumerate()
        .map(|(i, &kind)| match kind {
            _ if i == consumer => "splice from the source pipe",
            FdKind::Pipe => "tee",
            _ => "tee + splice",
        })
        .collect()
}

/// How a lane gets its copy of the bytes.
enum Feed<'a> {
    /// tee(2) straight into the sink, itself a pipe.
    Direct,
    /// tee(2) into a pipe of ours, then splice (or write) from it into the sink.
    Lane(&'a OwnPipe),
    /// Spliced (or read and written) straight out of `S`: this consumes the bytes.
    Consumer,
}

struct Lane<'a> {
    fd: BorrowedFd<'a>,
    feed: Feed<'a>,
    /// Bytes at the head of `S` this lane already holds (teed, not yet consumed from `S`).
    ahead: usize,
    /// Bytes in our lane pipe not yet delivered to the sink.
    pending: usize,
    /// The sink takes no splice from a pipe: deliver with read/write from the pipe's data.
    writes: bool,
    /// The path this lane's bytes take when the kernel takes them (tee or splice).
    path: DataPath,
    out: SinkOutcome,
}

impl Lane<'_> {
    fn live(&self) -> bool {
        self.out.failure.is_none()
    }

    fn delivered(&self) -> u64 {
        self.out.record.bytes()
    }

    fn credit(&mut self, n: usize) {
        let path = if self.writes {
            DataPath::Userspace
        } else {
            self.path
        };
        self.out.record.add(path, n as u64);
    }

    /// A splice out of a pipe into this sink was refused: switch to writes when the
    /// engine's rule says so for what this sink got, unless the path was forced.
    fn refuse(&mut self, errno: Errno, forced: bool) -> Result<(), Errno> {
        if forced || self.writes || !falls_back(errno, self.delivered()) {
            return Err(errno);
        }
        self.writes = true;
        self.out.record.fallbacks.push(Fallback {
            from: self.path,
            to: Some(DataPath::Userspace),
            reason: Reason::Errno(errno),
        });
        Ok(())
    }

    fn fail(&mut self, failure: Failure) {
        self.out.failure = Some(failure);
        // Bytes meant for a dead sink stay in its lane pipe, never read again.
        self.pending = 0;
        self.ahead = 0;
    }
}

struct Kernel<'a> {
    src: BorrowedFd<'a>,
    /// `S`: the pipe the bytes are teed and consumed from.
    head: BorrowedFd<'a>,
    /// True when `S` is our inbound pipe (then `queued` is known).
    inbound: Option<&'a OwnPipe>,
    lanes: Vec<Lane<'a>>,
    /// Bytes in our inbound pipe.
    queued: usize,
    consumed: u64,
    path: DataPath,
    forced: bool,
    /// Shared by every delivery with writes (and by discarding): constant memory, and
    /// no page of it touched unless used.
    scratch: Vec<u8>,
    failure: Option<Failure>,
    /// What the meter was told every live sink has got.
    slowest: Slowest,
    /// `--dump`: gets the head of `S` (tee(2)) before it is consumed.
    tap: Option<&'a RefCell<Tapped>>,
}

impl<'a> Kernel<'a> {
    fn new(
        src: BorrowedFd<'a>,
        sinks: &[Sink<'a>],
        pipes: &'a Pipes,
        path: DataPath,
        forced: bool,
    ) -> Kernel<'a> {
        let inbound = pipes.inbound.as_ref();
        if inbound.is_none() {
            grow_pipe(src);
        }
        let lanes = sinks
            .iter()
            .zip(&pipes.lanes)
            .enumerate()
            .map(|(i, (sink, own))| {
                let feed = match own {
                    _ if i == pipes.consumer => Feed::Consumer,
                    Some(pipe) => Feed::Lane(pipe),
                    None => Feed::Direct,
                };
                if sink.info.kind == FdKind::Pipe {
                    grow_unless_shrunk(sink.fd);
                }
                let path = match feed {
                    Feed::Consumer => DataPath::Splice,
                    _ => DataPath::Tee,
                };
                let mut out = SinkOutcome::default();
                out.record.add(path, 0);
                Lane {
                    fd: sink.fd,
                    feed,
                    ahead: 0,
                    pending: 0,
                    writes: false,
                    path,
                    out,
                }
            })
            .collect();
        Kernel {
            src,
            head: inbound.map_or(src, |p| p.read.as_fd()),
            inbound,
            lanes,
            queued: 0,
            consumed: 0,
            path,
            forced,
            scratch: vec![0u8; SCRATCH],
            failure: None,
            slowest: Slowest::default(),
            tap: None,
        }
    }

    /// The fallback rule's "moved", summed over the sinks: what each was given (teed into
    /// its lane, or delivered), and what was consumed from `S`. Bytes only taken into our
    /// inbound pipe do not count: a refusal carries them to the userspace fan-out.
    fn given(&self) -> u64 {
        let lanes: u64 = self
            .lanes
            .iter()
            .map(|l| l.ahead as u64 + l.delivered())
            .sum();
        self.consumed + lanes
    }

    /// Nothing is in flight: our inbound pipe is empty and every lane has delivered all
    /// it was given, so stopping here strands no byte in a pipe of ours.
    fn all_level(&self) -> bool {
        self.queued == 0 && self.lanes.iter().all(|l| l.ahead == 0 && l.pending == 0)
    }

    /// Runs to the end. `Err` means the kernel refused before any byte moved.
    fn run(&mut self, on_error: OnError, meter: &Meter) -> Result<(), Reason> {
        let head = self.head;
        let mut stop = false;
        while !stop {
            // A signal: take nothing more from the source, deliver what is in flight, and
            // stop once it is out — or once the stop's grace is over, a sink that took
            // nothing keeping its bytes (the report shows what each sink got).
            let taking = !crate::sys::process::interrupted();
            if !taking && (self.all_level() || crate::sys::process::must_stop()) {
                self.failure = Some(Failure::Interrupted);
                break;
            }
            if !self.lanes.iter().any(Lane::live) {
                break;
            }
            // -p: while no input waits, a sink whose reader left is dropped now.
            if on_error.watches_readers() && taking && self.queued == 0 {
                match self.readers_gone() {
                    Ok(gone) => {
                        for i in gone {
                            stop |= self.sink_failed(i, Errno::EPIPE, on_error);
                        }
                        if stop || !self.lanes.iter().any(Lane::live) {
                            break;
                        }
                    }
                    Err(Errno::EINTR) => continue,
                    Err(_) => {} // the reads and writes will say what is wrong
                }
            }
            // `--limit`: how much this round may take in (it may sleep first).
            let quota = meter.chunk(sys::MAX_CHUNK);
            // 1. Fill our inbound pipe once it is empty.
            if self.inbound.is_some() && self.queued == 0 && taking {
                match self.fill(quota) {
                    Ok(0) => break,
                    Ok(n) => self.queued = n,
                    Err(Errno::EINTR) => continue,
                    Err(e) if !self.forced && falls_back(e, self.given()) => {
                        return Err(Reason::Errno(e))
                    }
                    Err(e) => {
                        self.failure = Some(Failure::of(e, Side::Source));
                        break;
                    }
                }
            }
            // 2. tee the head of S into every lane that holds none of it.
            let mut eof = false;
            let head_empty = self.inbound.is_some() && self.queued == 0;
            for i in 0..self.lanes.len() {
                let lane = &self.lanes[i];
                if head_empty
                    || !lane.live()
                    || lane.ahead > 0
                    || matches!(lane.feed, Feed::Consumer)
                {
                    continue;
                }
                let target = match &lane.feed {
                    Feed::Lane(pipe) => pipe.write.as_fd(),
                    _ => lane.fd,
                };
                match tee_once(head, target, quota) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => {
                        let lane = &mut self.lanes[i];
                        lane.ahead = n;
                        match lane.feed {
                            Feed::Lane(_) => lane.pending = n,
                            _ => lane.credit(n),
                        }
                    }
                    // Back to the top: it decides whether to stop or go on.
                    Err(Errno::EINTR) => break,
                    Err(e) if !self.forced && falls_back(e, self.given()) => {
                        return Err(Reason::Errno(e))
                    }
                    Err(e) => stop |= self.sink_failed(i, e, on_error),
                }
                if stop {
                    break;
                }
            }
            if eof {
                break;
            }
            // 3. Consume from S what every lane has been given, feeding the consumer.
            if !stop {
                match self.consume(quota) {
                    Ok(Some(0)) => break, // an external source pipe at EOF
                    Ok(_) => {}
                    Err((consumer, e)) => stop |= self.sink_failed(consumer, e, on_error),
                }
            }
            // 4. Empty every lane pipe into its sink, also when stopping.
            for i in 0..self.lanes.len() {
                if let Err(e) = self.drain_lane(i) {
                    stop |= self.sink_failed(i, e, on_error);
                }
            }
            self.slowest
                .report(self.lanes.iter().map(|l| &l.out), meter);
        }
        // After a stop, what is already in lane pipes still goes out (within the grace
        // of a stop signal).
        for i in 0..self.lanes.len() {
            if crate::sys::process::must_stop() {
                break;
            }
            if let Err(e) = self.drain_lane(i) {
                self.sink_failed(i, e, on_error);
            }
        }
        self.slowest
            .report(self.lanes.iter().map(|l| &l.out), meter);
        Ok(())
    }

    /// Lane `i`'s sink failed with `e`; returns whether the fan-out stops. EINTR is the
    /// stop's grace running out, not the sink's fault: the whole fan-out ends, interrupted.
    fn sink_failed(&mut self, i: usize, e: Errno, on_error: OnError) -> bool {
        match Failure::of(e, Side::Sink) {
            Failure::Interrupted => {
                self.failure = Some(Failure::Interrupted);
                true
            }
            failure => {
                self.lanes[i].fail(failure);
                on_error.stops(e)
            }
        }
    }

    /// Waits until the source has input (or its end) or the reader of a live sink that is
    /// a pipe has gone (POLLERR on its write end); returns the lanes whose reader has gone.
    /// A lane holding undelivered bytes is not watched: its writes will tell.
    fn readers_gone(&self) -> Result<Vec<usize>, Errno> {
        use nix::poll::{poll, PollFd, PollTimeout};
        let watched: Vec<usize> = (0..self.lanes.len())
            .filter(|&i| {
                let lane = &self.lanes[i];
                lane.live() && lane.pending == 0 && lane.ahead == 0
            })
            .collect();
        let mut fds = vec![PollFd::new(self.src, PollFlags::POLLIN)];
        fds.extend(
            watched
                .iter()
                .map(|&i| PollFd::new(self.lanes[i].fd, PollFlags::empty())),
        );
        poll(&mut fds, PollTimeout::NONE)?;
        Ok(watched
            .iter()
            .zip(&fds[1..])
            .filter(|(_, fd)| fd.revents().is_some_and(|r| r.contains(PollFlags::POLLERR)))
            .map(|(&i, _)| i)
            .collect())
    }

    /// splice up to `quota` bytes of the source into our inbound pipe (blocking until
    /// data or EOF).
    fn fill(&self, quota: usize) -> Result<usize, Errno> {
        let pipe = self.inbound.expect("fill needs our inbound pipe");
        loop {
            match sys::splice(self.src, pipe.write.as_fd(), pipe.size.min(quota)) {
                Err(Errno::EAGAIN) => sys::wait(self.src, PollFlags::POLLIN)?,
                other => return other,
            }
        }
    }

    /// Consumes from S the bytes every live tee lane holds (or, with no tee lane, what
    /// the consumer takes, at most `quota`), delivering them to the consumer, or
    /// discarding them when the consumer is gone. `Ok(Some(n))`: consumed n (0 = EOF of
    /// an external source); `Ok(None)`: nothing to consume yet; `Err`: the consumer
    /// (this lane) failed now, with this errno.
    fn consume(&mut self, quota: usize) -> Result<Option<usize>, (usize, Errno)> {
        let head = self.head;
        let bound = self
            .lanes
            .iter()
            .filter(|l| l.live() && !matches!(l.feed, Feed::Consumer))
            .map(|l| l.ahead)
            .min();
        let mut limit = match (bound, self.inbound.is_some()) {
            (Some(n), _) => Some(n),
            (None, true) => Some(self.queued),
            (None, false) => None,
        };
        if limit == Some(0) {
            return Ok(None);
        }
        let consumer = self
            .lanes
            .iter()
            .position(|l| matches!(l.feed, Feed::Consumer))
            .expect("one lane consumes");
        if let Some(tap) = self.tap {
            // The dump tees the head first and no more is consumed than it has: so it
            // needs the bytes in `S` first (a source pipe of someone else's: wait for some).
            if limit.is_none() {
                if !self.lanes[consumer].live() {
                    return Ok(None);
                }
                match crate::engine::splice::bytes_in(head) {
                    Ok(0) => return Ok(Some(0)),
                    Ok(n) => limit = Some(n.min(quota)),
                    Err(Errno::EINTR) => return Ok(None),
                    Err(e) => return Err((consumer, e)),
                }
            }
            limit = limit.map(|n| tap.borrow_mut().ahead_of_splice(head, n));
        }
        let result = if self.lanes[consumer].live() {
            feed_consumer(
                head,
                &mut self.lanes[consumer],
                limit.ok_or(quota),
                self.forced,
                &mut self.scratch,
            )
        } else if let Some(limit) = limit {
            discard(head, limit, &mut self.scratch).map_err(|e| (0, e))
        } else {
            return Ok(None);
        };
        let (taken, failed) = match result {
            Ok(n) => (n, None),
            Err((n, e)) => (n, Some(e)),
        };
        if let Some(tap) = self.tap {
            tap.borrow_mut().spliced(taken);
        }
        for lane in &mut self.lanes {
            lane.ahead = lane.ahead.saturating_sub(taken);
        }
        self.queued = self.queued.saturating_sub(taken);
        self.consumed += taken as u64;
        match failed {
            None => Ok(Some(taken)),
            Some(e) => Err((consumer, e)),
        }
    }

    /// Empties lane `i`'s own pipe into its sink.
    fn drain_lane(&mut self, i: usize) -> Result<(), Errno> {
        let forced = self.forced;
        let lane = &mut self.lanes[i];
        let Feed::Lane(pipe) = lane.feed else {
            return Ok(());
        };
        let pipe_read = pipe.read.as_fd();
        while lane.pending > 0 {
            if lane.writes {
                match read_write(pipe_read, lane.fd, lane.pending, &mut self.scratch) {
                    Ok(n) => {
                        lane.pending -= n;
                        lane.credit(n);
                    }
                    Err((_, written, e)) => {
                        lane.credit(written);
                        return Err(e);
                    }
                }
                continue;
            }
            match sys::splice(pipe_read, lane.fd, lane.pending) {
                Ok(n) => {
                    lane.pending -= n;
                    lane.credit(n);
                }
                Err(Errno::EINTR) if !crate::sys::process::must_stop() => {}
                Err(Errno::EAGAIN) => sys::wait(lane.fd, PollFlags::POLLOUT)?,
                Err(e) => lane.refuse(e, forced)?,
            }
        }
        Ok(())
    }

    fn finish(self) -> FanOut {
        let mut record = Record::default();
        record.add(self.path, self.consumed);
        FanOut {
            record,
            sinks: self.lanes.into_iter().map(|l| l.out).collect(),
            failure: self.failure,
        }
    }
}

/// One tee(2) of the head of `head` (at most `quota` bytes) into `target`, waiting out
/// EAGAIN (an empty non-blocking source, or a full non-blocking sink).
fn tee_once(head: BorrowedFd<'_>, target: BorrowedFd<'_>, quota: usize) -> Result<usize, Errno> {
    loop {
        match sys::tee(head, target, quota) {
            Err(Errno::EAGAIN) => {
                sys::wait(head, PollFlags::POLLIN)?;
                sys::wait(target, PollFlags::POLLOUT)?;
            }
            other => return other,
        }
    }
}

/// Feeds the consumer from `head`: exactly `Ok(limit)` bytes, or for `Err(quota)` one
/// call's worth of at most `quota` (0 at EOF). Returns what left `head`; on error, also
/// what left it before.
fn feed_consumer(
    head: BorrowedFd<'_>,
    lane: &mut Lane<'_>,
    limit: Result<usize, usize>,
    forced: bool,
    scratch: &mut [u8],
) -> Result<usize, (usize, Errno)> {
    let mut taken = 0;
    loop {
        let want = match limit {
            Ok(l) => l - taken,
            Err(quota) => quota,
        };
        if want == 0 {
            return Ok(taken);
        }
        let step = if lane.writes {
            read_write(head, lane.fd, want, scratch).map_err(|(read, written, e)| {
                lane.credit(written);
                (read, e)
            })
        } else {
            match sys::splice(head, lane.fd, want) {
                Ok(n) => Ok(n),
                Err(Errno::EINTR) if !crate::sys::process::must_stop() => continue,
                Err(Errno::EAGAIN) => {
                    // The head holds bytes when bounded; unbounded, it may be empty.
                    let waited = if limit.is_err() {
                        sys::wait(head, PollFlags::POLLIN)
                    } else {
                        Ok(())
                    };
                    waited
                        .and_then(|_| sys::wait(lane.fd, PollFlags::POLLOUT))
                        .map_err(|e| (taken, e))?;
                    continue;
                }
                Err(e) => match lane.refuse(e, forced) {
                    Ok(()) => continue,
                    Err(e) => return Err((taken, e)),
                },
            }
        };
        match step {
            Ok(n) => {
                lane.credit(n);
                taken += n;
                if limit.is_err() {
                    return Ok(n);
                }
            }
            // A write that failed after its read: those bytes left the head too.
            Err((done, e)) => return Err((taken + done, e)),
        }
    }
}
