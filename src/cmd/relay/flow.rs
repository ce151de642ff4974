//! One direction of a relayed connection: bytes from a source fd to a sink fd, through a
//! pipe of zerocat's own (splice in, splice out) or a userspace buffer (read, write); which
//! of the two is [`Choice`]'s to say.
//!
//! Everything here is non-blocking and driven by readiness flags that the event loop
//! keeps (edge-triggered epoll: a flag is set by an event and cleared by EAGAIN).
//!
//! Order of bytes: the buffer holds the oldest bytes, then the pipe, then the source. So
//! output always takes the buffer first, then the pipe; in userspace mode the buffer is
//! refilled from the pipe before the source. Switching mode (adaptive, or a fallback)
//! therefore never reorders, loses or duplicates a byte.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use nix::errno::Errno;

use super::policy::Choice;
use super::pool::{BudgetPipe, Pools};
use crate::endpoint::tls::Records;
use crate::engine::dump::Tapped;
use crate::engine::{DataPath, Fallback, Reason, Record};
use crate::sys;

/// Syscalls one direction may make before the loop turns to other connections.
const OPS_PER_TURN: u32 = 64;

/// One end of a flow as the loop sees it: the fd and its readiness flag.
pub struct Port<'a> {
    pub fd: BorrowedFd<'a>,
    /// Readable (source) or writable (sink), as far as we know.
    pub ready: &'a mut bool,
    pub socket: bool,
    /// A source whose read shorter than asked means "drained": it is polled
    /// (edge-triggered, so the next bytes bring an event) and has not reported
    /// RDHUP/HUP/ERR (then an EOF or error may sit behind the bytes, with no event to
    /// come). Such a source stops at a short read instead of reading on into EAGAIN.
    pub short_read_drains: bool,
    /// A sink the relay closes as soon as this direction is done: the other direction is
    /// done and the socket is the relay's own (not inherited, so no other process holds
    /// it). Its FIN goes with close(2), and both sources were read to EOF, so no unread
    /// byte turns that close into a reset: no shutdown(2) first (one syscall of a short
    /// connection's ~17).
    pub closed_next: bool,
    /// The relay's own socket (accepted or dialed), whose options it may set; not an
    /// inherited fd that another process may hold too.
    pub own: bool,
    /// A TLS side whose records the loop carries: bytes go through rustls, never raw
    /// read/write (the direction is on userspace for good).
    pub tls: Option<&'a mut Records>,
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
}

pub struct Flow {
    choice: Choice,
    pipe: Option<BudgetPipe>,
    in_pipe: usize,
    /// A splice into the pipe said EAGAIN while the pipe held bytes: it may be out of
    /// slots (HAZARDS: EAGAIN's two meanings). Cleared when the pipe drains.
    pipe_maybe_full: bool,
    /// The last splice in moved less than the pipe had room for: drain before the next.
    short_in: bool,
    buf: Option<Box<[u8]>>,
    start: usize,
    end: usize,
    eof: bool,
    pub shut: bool,
    pub record: Record,
    /// Bytes delivered into the sink.
    pub delivered: u64,
    /// Bytes splice has delivered (an unsupported errno counts as "refused" only at 0).
    spliced: u64,
    /// The sink's unsent bytes are capped at the pipe's size (or were tried: not TCP).
    unsent_capped: bool,
    /// `--dump`: where a copy of the bytes that go out goes (tee'd from the pipe, or
    /// written from the buffer).
    pub tap: Option<Tapped>,
    /// Pacing (`--limit`, `--limit-total`): bytes this turn may still take from the source
    /// (None: no limit), those it took, and whether it stopped for want of more.
    allowance: Option<u64>,
    took: u64,
    paced_out: bool,
}

impl Flow {
    pub fn new(choice: Choice) -> Flow {
        Flow {
            choice,
            pipe: None,
            in_pipe: 0,
            pipe_maybe_full: false,
            short_in: false,
            buf: None,
            start: 0,
            end: 0,
            eof: false,
            shut: false,
            record: Record::default(),
            delivered: 0,
            spliced: 0,
            unsent_capped: false,
            tap: None,
            allowance: None,
            took: 0,
            paced_out: false,
        }
    }

    /// Before a turn: how many bytes it may take from its source (None: any).
    pub fn pace(&mut self, allowance: Option<u64>) {
        self.allowance = allowance;
        self.took = 0;
        self.paced_out = false;
    }

    /// After a turn: the bytes it took from its source, and whether it stopped short of
    /// the source's end for want of allowance (its source may still be ready).
    pub fn paced(&self) -> (u64, bool) {
        (self.took, self.paced_out)
    }

    /// How long the next read from the source may be, at most `len`; 0 when the turn's
    /// allowance is spent (said by [`Flow::paced`]).
    fn paced_len(&mut self, len: usize) -> usize {
        match self.allowance {
            None => len,
            Some(left) => {
                if left == 0 && len > 0 {
                    self.paced_out = true;
                }
                len.min(usize::try_from(left).unwrap_or(usize::MAX))
            }
        }
    }

    /// `n` bytes came from the source.
    fn took_in(&mut self, n: usize) {
        self.took += n as u64;
        if let Some(left) = self.allowance.as_mut() {
            *left = left.saturating_sub(n as u64);
        }
    }

    /// Switches between splice and userspace so far.
    pub fn switches(&self) -> u32 {
        self.choice.switches()
    }

    /// Bytes that left the source and are not delivered yet.
    pub fn held(&self) -> usize {
        self.end - self.start + self.in_pipe
    }

    /// Nothing taken from its source yet, nothing delivered, no EOF seen: a direction
    /// that can be dropped and started afresh on another source.
    pub fn untouched(&self) -> bool {
        self.delivered == 0 && self.held() == 0 && !self.eof && !self.shut
    }

    /// Takes nothing from its source until the sink takes some: splicing, the pipe is
    /// (maybe) full; in userspace, the buffer still holds bytes (only an empty one is
    /// filled). Until then its source's readiness can wait.
    pub fn awaits_sink(&self) -> bool {
        if self.choice.splicing() {
            self.in_pipe > 0
                && (self.pipe_maybe_full
                    || self.pipe.as_ref().is_some_and(|p| self.in_pipe >= p.size))
        } else {
            self.start < self.end
        }
    }

    /// Moves what it can. Returns the turn's state, or the error that ends the flow.
    /// `moved` grows by the bytes delivered (for idle accounting).
    pub fn pump(
        &mut self,
        mut src: Port<'_>,
        mut dst: Port<'_>,
        pools: &mut Pools,
        moved: &mut u64,
    ) -> Result<Turn, FlowError> {
        self.choice.prime(src.socket);
        // Fill, then drain: take bytes in until the pipe (or the buffer) is full, the source
        // said EAGAIN or ended, or a splice came back short (the source is drained or the
        // pipe out of buffers: splicing on would likely meet EAGAIN), then deliver until
        // the sink is full or nothing is held. Fewer, larger splices than one splice in and
        // one out in turn (bench/NOTEBOOK.md, `relay: one path rule`).
        let mut ops = 0;
        loop {
            if self.shut {
                return Ok(Turn::Done);
            }
            let mut into = false;
            self.short_in = false;
            while !self.short_in && ops < OPS_PER_TURN && self.input(&mut src, pools)? {
                ops += 1;
                into = true;
            }
            let mut out = false;
            let before = self.delivered;
            while ops < OPS_PER_TURN && self.output(&mut dst)? {
                ops += 1;
                out = true;
            }
            *moved += self.delivered - before;
            if ops >= OPS_PER_TURN {
                return Ok(Turn::Busy);
            }
            if !(out || into) {
                break;
            }
        }
        if self.eof && self.held() == 0 {
            if let Some(records) = dst.tls.as_deref_mut() {
                // TLS's EOF: close_notify, sent before the socket's FIN.
                records.close();
                match records.flush(dst.fd) {
                    Ok(()) => {
                        let sent = records.take_sent();
                        self.deliver(DataPath::Userspace, sent);
                    }
                    Err(Errno::EAGAIN) => {
                        *dst.ready = false;
                        return Ok(Turn::Idle);
                    }
                    Err(errno) => {
                        return Err(FlowError {
                            errno,
                            blame: Blame::Sink,
                        })
                    }
                }
            }
            if dst.socket && !dst.closed_next {
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
            if let Some(tap) = &mut self.tap {
                tap.end();
            }
            self.release(pools);
            return Ok(Turn::Done);
        }
        if !*src.ready && self.held() == 0 {
            self.release(pools);
        }
        Ok(Turn::Idle)
    }

    /// Gives the pipe and buffer back while nothing is in them.
    fn release(&mut self, pools: &mut Pools) {
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
    fn output(&mut self, dst: &mut Port<'_>) -> Result<bool, FlowError> {
        let sink_error = |errno| FlowError {
            errno,
            blame: Blame::Sink,
        };
        if self.start < self.end {
            if !*dst.ready {
                return Ok(false);
            }
            let buf = self.buf.as_ref().expect("bytes in a buffer");
            let pending = &buf[self.start..self.end];
            // A TLS sink takes the bytes into records; they are delivered once the
            // records carrying them are on the socket (`take_sent`), not before.
            let (wrote, sent) = match dst.tls.as_deref_mut() {
                Some(records) => {
                    let wrote = records.write(dst.fd, pending);
                    (wrote, Some(records.take_sent()))
                }
                None => (sys::write(dst.fd, pending), None),
            };
            if let Some(sent) = sent.filter(|&s| s > 0) {
                self.deliver(DataPath::Userspace, sent);
            }
            return match wrote {
                Ok(n) => {
                    if let (Some(tap), Some(buf)) = (&mut self.tap, &self.buf) {
                        tap.wrote(&buf[self.start..self.start + n]);
                    }
                    self.start += n;
                    if self.start == self.end {
                        self.start = 0;
                        self.end = 0;
                    }
                    if sent.is_none() {
                        self.deliver(DataPath::Userspace, n);
                    }
                    Ok(n > 0 || sent.is_some_and(|s| s > 0))
                }
                Err(Errno::EINTR) => Ok(true),
                Err(Errno::EAGAIN) => {
                    *dst.ready = false;
                    Ok(false)
                }
                Err(errno) => Err(sink_error(errno)),
            };
        }
        // Records still queued for a TLS sink (a write's tail, an alert or key update the
        // reading side queued): out as the socket takes them.
        if let Some(records) = dst.tls.as_deref_mut() {
            if !records.pending() || !*dst.ready {
                return Ok(false);
            }
            return match records.flush(dst.fd) {
                Ok(()) => {
                    let sent = records.take_sent();
                    self.deliver(DataPath::Userspace, sent);
                    Ok(true)
                }
                Err(Errno::EAGAIN) => {
                    *dst.ready = false;
                    Ok(false)
                }
                Err(errno) => Err(sink_error(errno)),
            };
        }
        if self.in_pipe == 0 || !self.choice.splicing() || !*dst.ready {
            return Ok(false);
        }
        let pipe = self.pipe.as_ref().expect("bytes in a pipe");
        if !self.unsent_capped && dst.socket && dst.own && pipe.bulk_sized() {
            // A bulk stream into TCP: the socket holds at most a pipe's worth unsent, the
            // rest waits in the pipe (bench/NOTEBOOK.md, `relay: a sink holds a pipe's worth unsent`).
            self.unsent_capped = true;
            let _ = sys::socket::limit_unsent(dst.fd, pipe.size);
        }
        // The dump copies the pipe's head first (tee): no more goes out than it has.
        let len = match &mut self.tap {
            Some(tap) => tap.ahead_of_splice(pipe.read.as_fd(), self.in_pipe),
            None => self.in_pipe,
        };
        match sys::splice(pipe.read.as_fd(), dst.fd, len) {
            Ok(n) => {
                if let Some(tap) = &mut self.tap {
                    tap.spliced(n);
                }
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
            Err(errno) if self.choice.falls_back(errno, self.spliced) => {
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
    fn input(&mut self, src: &mut Port<'_>, pools: &mut Pools) -> Result<bool, FlowError> {
        if self.choice.splicing() {
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
        let buf_len = self
            .buf
            .get_or_insert_with(|| pools.take_buffer(false))
            .len();
        let want = self.paced_len(buf_len);
        if want == 0 {
            return Ok(false);
        }
        let buf = &mut self.buf.as_mut().expect("just taken")[..want];
        let got = match src.tls.as_deref_mut() {
            Some(records) => records.read(src.fd, buf),
            None => sys::read(src.fd, buf),
        };
        match got {
            Ok(0) => {
                self.eof = true;
                Ok(true)
            }
            Ok(n) => {
                if n < want && src.short_read_drains {
                    *src.ready = false; // the next bytes bring the next EPOLLIN
                }
                self.took_in(n);
                self.end = n;
                if self.choice.bulk_read(n) {
                    self.move_to_splice(src.socket, pools);
                }
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

    /// After a bulk read: on to splice, if a pipe is to be had (else the next bulk read
    /// tries again). The bytes just read go out first, from the buffer.
    fn move_to_splice(&mut self, socket: bool, pools: &mut Pools) {
        if self.pipe.is_none() {
            match pools.take_pipe(socket) {
                Ok(pipe) => self.pipe = Some(pipe),
                Err(_) => return,
            }
        }
        self.choice.move_to_splice(self.delivered, socket);
    }

    fn splice_in(&mut self, src: &mut Port<'_>, pools: &mut Pools) -> Result<bool, FlowError> {
        if self.eof || !*src.ready || self.pipe_maybe_full {
            return Ok(false);
        }
        if self.pipe.is_none() {
            match pools.take_pipe(self.choice.judging()) {
                Ok(pipe) => self.pipe = Some(pipe),
                Err(_) if self.choice.without_pipe() => return Ok(true),
                Err(errno) => {
                    return Err(FlowError {
                        errno,
                        blame: Blame::Relay,
                    })
                }
            }
        }
        let size = self.pipe.as_ref().expect("just taken").size;
        let room = self.paced_len(size.saturating_sub(self.in_pipe));
        if room == 0 {
            return Ok(false);
        }
        let pipe = self.pipe.as_mut().expect("just taken");
        // Judging: bytes queued before the splice cannot vanish (we are the only reader), so
        // a splice that stops short of them stopped on the pipe's buffers.
        let queued = if self.choice.judging() {
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
                self.took += n as u64;
                if let Some(left) = self.allowance.as_mut() {
                    *left = left.saturating_sub(n as u64);
                }
                self.short_in = n < room;
                if self.choice.judging() {
                    // The pipe stays at its first size while judging: the rule's figures
                    // are for 16 buffers.
                    let full = n < room && queued >= room;
                    self.choice
                        .judge_segments(self.delivered, self.in_pipe, pipe.size, full);
                } else if n == pipe.size {
                    pools.grow(pipe); // a bulk stream: fewer, larger splices
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
            Err(errno) if self.choice.falls_back(errno, self.spliced) => {
                self.fall_back(errno);
                Ok(true)
            }
            Err(errno) => Err(FlowError {
                errno,
                blame: Blame::Source,
            }),
        }
    }

    fn fall_back(&mut self, errno: Errno) {
        self.record.add(DataPath::Splice, 0);
        self.record.fallbacks.push(Fallback {
            from: DataPath::Splice,
            to: Some(DataPath::Userspace),
            reason: Reason::Errno(errno),
        });
        self.choice.fall_back();
    }

    /// The sink's kernel queue held `n` of the bytes counted as delivered when it was reset
    /// (SO_LINGER 0 drops them): they are taken back from the count and from the paths,
    /// the path running now first (the newest bytes are the ones still queued).
    pub fn withdraw(&mut self, n: u64) {
        let n = n.min(self.delivered);
        self.delivered -= n;
        let now = if self.choice.splicing() {
            DataPath::Splice
        } else {
            DataPath::Userspace
        };
        let mut left = n;
        let paths = &mut self.record.paths;
        let first = paths.iter().position(|(p, _)| *p == now);
        let order = first.into_iter().chain((0..paths.len()).rev());
        for i in order {
            let take = left.min(paths[i].1);
            paths[i].1 -= take;
            left -= take;
        }
    }

    fn deliver(&mut self, path: DataPath, n: usize) {
        self.delivered += n as u64;
        self.record.add(path, n as u64);
    }

    /// At the end (abort, signal, timeout): try once more to deliver what is held, without
    /// waiting. Returns the bytes that could not be delivered (a TLS sink's: also those in
    /// records not all sent).
    /// A TLS sink's bytes go through its `tls` records (never raw onto the socket).
    pub fn flush_now(
        &mut self,
        dst: BorrowedFd<'_>,
        tls: Option<&mut Records>,
        pools: &mut Pools,
    ) -> usize {
        if self.unsent_capped && self.held() > 0 {
            // The cap is for a stream that goes on; at its end the socket takes all it
            // can, so what the peer may still read gets the drain, not the pipe's close.
            let _ = sys::socket::limit_unsent(dst, usize::MAX);
        }
        let mut ready = true;
        let mut end = Port {
            fd: dst,
            ready: &mut ready,
            socket: false,
            short_read_drains: false,
            closed_next: false,
            own: false,
            tls,
        };
        for _ in 0..OPS_PER_TURN {
            if self.held() == 0 && !end.tls.as_deref().is_some_and(Records::pending) {
                break;
            }
            let progressed = matches!(self.output(&mut end), Ok(true));
            let refilled =
                !self.choice.splicing() && matches!(self.pipe_to_buffer(pools), Ok(true));
            if !(progressed || refilled) {
                break;
            }
        }
        let left = self.held() + end.tls.as_deref().map_or(0, Records::unsent);
        self.release(pools);
        left
    }

    /// Userspace mode with bytes still in the pipe (after a switch or a fallback): they
    /// are older than anything in the source, so they go first.
    fn pipe_to_buffer(&mut self, pools: &mut Pools) -> Result<bool, FlowError> {
        if self.start < self.end || self.in_pipe == 0 {
            return Ok(false);
        }
        let buf = self.buf.get_or_insert_with(|| pools.take_buffer(true));
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
