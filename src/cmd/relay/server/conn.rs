//! Moving a connection's bytes both ways, and ending it.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nix::fcntl::{fcntl, FcntlArg};
use nix::sys::socket::getpeername;

use super::{dump, inherit};
use super::{slot_token, Conn, Server, Spec, PACE, REAP, REAP_EVERY};
use crate::cmd::relay::end::{ConnEnd, Side};
use crate::cmd::relay::flow::{Blame, FlowError, Port, Turn};
use crate::cmd::relay::pace::Limits;
use crate::cmd::relay::report::{ConnReport, FlowReport};
use crate::endpoint::{command, Endpoint};
use crate::report::{errno_names, printable};
use crate::sys::process::ChildExit;
use crate::sys::socket::{abort_socket, is_tcp, Mptcp};
use crate::sys::{self, process};
use nix::errno::Errno;
use std::process::Child;

/// How long, at the end of the grace, the sinks get to send what their kernel queues
/// hold before the reset drops it (a peer that stopped reading gets this long, no more).
const DRAIN: Duration = Duration::from_millis(100);

/// Bytes a reset of `fd` now would drop: what a TCP socket has not sent yet (bytes sent
/// reach the peer ahead of the RST). A unix socket's queued bytes are already the peer's
/// to read, and anything else has no queue of ours.
fn dropped_by_reset(fd: BorrowedFd<'_>) -> u64 {
    if !is_tcp(fd) {
        return 0;
    }
    sys::not_sent(fd).unwrap_or(0) as u64
}

/// The error a socket holds (a reset that arrived), taken; None when it holds none.
fn pending_error(fd: BorrowedFd<'_>) -> Option<Errno> {
    match nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::SocketError) {
        Ok(0) | Err(_) => None,
        Ok(e) => Some(Errno::from_raw(e)),
    }
}

/// The side the relay connects to: B, unless only A is a connector.
fn upstream_side(specs: &[Spec; 2]) -> usize {
    match (&specs[0], &specs[1]) {
        (Spec::Dial { .. } | Spec::Command { .. }, Spec::Listen(_) | Spec::Inherited(_)) => 0,
        _ => 1,
    }
}

/// How a connection that did not end cleanly is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// At once: what the relay holds is written to the sinks without waiting, then the
    /// reset. Bytes the sockets took count as delivered, though the reset may still drop
    /// some of them: the count is an upper bound.
    Now,
    /// After [`Server::cut_all`]'s flush and [`DRAIN`]: what a TCP sink has still not sent
    /// (its peer stopped reading) is taken back from the count as undelivered, so the
    /// count is what the peer can read.
    Drained,
}

impl Server<'_> {
    /// The grace is over: every connection still open is cut (reset) and reported as cut
    /// by the signal. First what the relay holds is delivered as far as the sinks take it
    /// without waiting, then the sinks get [`DRAIN`] (cut short by another signal) to send
    /// their queues; what is still queued then is counted as undelivered by `finish`.
    pub(super) fn cut_all(&mut self) {
        let live: Vec<usize> = (0..self.conns.len())
            .filter(|&i| self.conns[i].is_some())
            .collect();
        for &idx in &live {
            let conn = self.conns[idx].as_mut().expect("live");
            for d in 0..2 {
                let dst = &mut conn.sides[1 - d];
                if dst.open() {
                    let fd = dst.wfd.as_ref().or(dst.fd.as_ref()).expect("open").as_fd();
                    let tls = dst.tls.as_mut().and_then(|t| t.records());
                    conn.flows[d].flush_now(fd, tls, &mut self.pools);
                }
            }
        }
        let until = Instant::now() + DRAIN;
        while Instant::now() < until && !process::stopped_twice() {
            let queued: u64 = live
                .iter()
                .filter_map(|&idx| self.conns[idx].as_ref())
                .flat_map(|conn| conn.sides.iter())
                .filter(|peer| peer.open())
                .map(|peer| dropped_by_reset(peer.write_fd()))
                .sum();
            if queued == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        for idx in live {
            self.end_conn(idx, ConnEnd::Signal, Cut::Drained);
        }
    }

    /// Moves bytes both ways on a connection whose sides are both open.
    pub(super) fn pump(&mut self, idx: usize) {
        let gen = self.gens[idx];
        let Some(conn) = self.conns[idx].as_mut() else {
            return;
        };
        if !(conn.sides[0].open() && conn.sides[1].open()) {
            return;
        }
        if self.shared.log.is_some() && conn.upstream.is_none() {
            let side = upstream_side(self.specs);
            if let Some(fd) = &conn.sides[side].fd {
                conn.upstream = getpeername(fd.as_raw_fd()).ok();
            }
        }
        if let Some(tap) = &self.shared.dump {
            dump::attach(tap, conn);
        }
        let mut moved = 0u64;
        let mut done = 0;
        let mut busy = false;
        // Pacing reads the clock afresh (its tokens are time); else the turn's wake-up will do.
        let paced = conn.pace.iter().any(Option::is_some) || self.shared.limit_total.is_some();
        let now = if paced { Instant::now() } else { self.turn };
        for d in 0..2 {
            let other_done = conn.flows[1 - d].shut;
            let [s0, s1] = &mut conn.sides;
            let (src, dst) = if d == 0 { (s0, s1) } else { (s1, s0) };
            let src_fd = src.fd.as_ref().expect("open").as_fd();
            let short_read_drains = src.short_read_drains();
            let dst_fd = dst.wfd.as_ref().or(dst.fd.as_ref()).expect("open").as_fd();
            let (src_own, dst_own) = (src.owned(), dst.owned());
            let closed_next = other_done && dst_own;
            let mut limits = Limits {
                own: conn.pace[d].as_mut(),
                total: self.shared.limit_total.as_ref(),
            };
            let mut allowance = limits.allowance(now);
            let mut reset = None;
            if allowance.is_some() && src.hup && src.socket && src.tls.is_none() {
                // Paced, and the source hung up: a reset is taken now, not after the bytes
                // queued before it trickle out at the rate; and out of tokens, an EOF with
                // no byte before it is read now, not after the wait.
                reset = pending_error(src_fd);
                if allowance == Some(0) && sys::queued(src_fd) == Ok(0) {
                    allowance = Some(1);
                }
            }
            conn.flows[d].pace(allowance);
            let result = match reset {
                Some(errno) => Err(FlowError {
                    errno,
                    blame: Blame::Source,
                }),
                None => conn.flows[d].pump(
                    Port {
                        fd: src_fd,
                        ready: &mut src.readable,
                        socket: src.socket,
                        short_read_drains,
                        closed_next: false,
                        own: src_own,
                        tls: src.tls.as_mut().and_then(|t| t.records()),
                    },
                    Port {
                        fd: dst_fd,
                        ready: &mut dst.writable,
                        socket: dst.socket,
                        short_read_drains: false,
                        closed_next,
                        own: dst_own,
                        tls: dst.tls.as_mut().and_then(|t| t.records()),
                    },
                    &mut self.pools,
                    &mut moved,
                ),
            };
            let (took, paced_out) = conn.flows[d].paced();
            limits.charge(took);
            if paced_out && src.readable && !conn.pace_timer[d] {
                conn.pace_timer[d] = true;
                let token = slot_token(gen, idx, PACE + d as u64);
                self.poller.timer(limits.ready_at(now), token);
            }
            let mute = !dst.writable && conn.flows[d].awaits_sink();
            if mute != src.muted && (!mute || short_read_drains) {
                let token = slot_token(gen, idx, (d as u64) << 1);
                if self.poller.mute(src_fd.as_raw_fd(), token, mute).is_ok() {
                    src.muted = mute;
                }
            }
            match result {
                Ok(Turn::Done) => done += 1,
                Ok(Turn::Busy) => busy = true,
                Ok(Turn::Idle) => {}
                Err(e) => {
                    let end = self.failure(idx, Side::of(d), e);
                    self.upstream_failed(idx, end);
                    return;
                }
            }
        }
        if moved > 0 {
            conn.last_active = now;
        }
        // A command's stdin is closed once its direction is over: EOF is how a child hears
        // the half-close (a pipe has no shutdown). Closing takes it out of the epoll.
        for d in 0..2 {
            let dst = &mut conn.sides[1 - d];
            if conn.flows[d].shut && dst.child.is_some() {
                if let Some(wfd) = dst.wfd.take() {
                    dst.polled.remove(wfd.as_raw_fd());
                }
            }
        }
        if done == 2 {
            self.finish(idx, ConnEnd::Eof);
            return;
        }
        if let (1, false, Some(linger)) = (done, conn.lingering, self.cfg.linger) {
            conn.lingering = true;
            let token = slot_token(gen, idx, super::LINGER);
            self.poller.timer(Instant::now() + linger, token);
        }
        if busy && !conn.busy {
            conn.busy = true;
            self.busy.push_back(slot_token(gen, idx, 0));
        }
    }

    /// How an error of the direction from `from` ends the connection.
    fn failure(&self, idx: usize, from: Side, e: FlowError) -> ConnEnd {
        let errno = e.errno;
        match e.blame {
            Blame::Source => ConnEnd::Read {
                side: from,
                uri: self.conn_side_uri(idx, from),
                errno,
            },
            Blame::Sink => ConnEnd::Write {
                side: from.other(),
                uri: self.conn_side_uri(idx, from.other()),
                errno,
            },
            Blame::Relay => ConnEnd::NoPipe {
                from,
                errno,
                budget: self.pools.pipe_budget() as u64,
            },
        }
    }

    /// The side the relay connected to (B when it connected to both), as its peer
    /// address once connected, else the address it was trying, else its URI.
    fn upstream(&self, conn: &Conn) -> String {
        let side = upstream_side(self.specs);
        if let Some(addr) = &conn.upstream {
            return addr.to_string();
        }
        match (self.spec_at(conn.pick, side), &conn.sides[side].dial) {
            (Spec::Dial { addrs, .. }, Some(dial)) => addrs
                .get(dial.addr)
                .map_or_else(|| self.side_uri(Side::of(side)), |a| a.to_string()),
            _ => self.side_uri(Side::of(side)),
        }
    }

    pub(super) fn side_uri(&self, side: Side) -> String {
        self.side_uris[side as usize].clone()
    }

    fn side_endpoint(&self, side: Side) -> &Endpoint {
        self.cfg.side(side)
    }

    /// Ends a connection: a clean end closes both sides (FIN was sent by the half-close);
    /// any other end delivers what it can without waiting, then resets sockets
    /// (SO_LINGER 0), so a peer never takes an abort for a clean end.
    pub(super) fn finish(&mut self, idx: usize, end: ConnEnd) {
        self.end_conn(idx, end, Cut::Now);
    }

    fn end_conn(&mut self, idx: usize, end: ConnEnd, cut: Cut) {
        let Some(mut conn) = self.conns[idx].take() else {
            return;
        };
        // A TLS side whose record layer failed: the EOF the relay read from it was that
        // failure's (the bridge sets its reason before it shuts its end).
        let mut end = end;
        for side in 0..2 {
            let failure = conn.sides[side].tls.as_ref().and_then(|t| t.error());
            // The EPROTO of a flow through in-loop records is that failure too.
            let protocol = matches!(
                end,
                ConnEnd::Read {
                    errno: nix::errno::Errno::EPROTO,
                    ..
                } | ConnEnd::Write {
                    errno: nix::errno::Errno::EPROTO,
                    ..
                }
            );
            if let (Some(text), true) = (failure, end.is_clean() || protocol) {
                let uri = self.side_endpoint(Side::of(side)).to_string();
                end = ConnEnd::Tls {
                    side: Side::of(side),
                    uri,
                    text,
                };
            }
        }
        let tls = [0, 1].map(|side| {
            conn.sides[side]
                .tls
                .as_ref()
                .map(|t| Box::new(t.info.clone()))
        });
        let abort = !matches!(end, ConnEnd::Eof | ConnEnd::Linger);
        let upstream = self.upstream(&conn);
        let upstream_uri = match (&self.shared.upstreams, conn.pick) {
            (Some(ups), Some(pick)) => {
                ups.leave(pick, conn.sides[super::pick::UPSTREAM].open());
                Some(ups.uri(pick).to_string())
            }
            _ => None,
        };
        let undelivered = [0, 1].map(|d| {
            let dst = &mut conn.sides[1 - d];
            let mut left = if dst.open() && cut == Cut::Now {
                let fd = dst.wfd.as_ref().or(dst.fd.as_ref()).expect("open").as_fd();
                let tls = dst.tls.as_mut().and_then(|t| t.records());
                conn.flows[d].flush_now(fd, tls, &mut self.pools) as u64
            } else {
                let tls = dst.tls.as_mut().and_then(|t| t.records());
                (conn.flows[d].held() + tls.map_or(0, |r| r.unsent())) as u64
            };
            // Drained as far as the sink took it; the rest is lost (and said so): the
            // pipe is pooled only if empty, and its capacity returns to the budget.
            conn.flows[d].close(&mut self.pools);
            if cut == Cut::Drained && dst.open() {
                // What the sink's TCP socket could not send in the drain, the reset drops.
                let queued = dropped_by_reset(dst.write_fd());
                conn.flows[d].withdraw(queued);
                left += queued;
            }
            left
        });
        let mptcp = [0, 1].map(|side| {
            let asks = self.side_endpoint(Side::of(side)).asks_mptcp();
            let fd = conn.sides[side].fd.as_ref().filter(|_| asks)?;
            Some(Mptcp::of(fd.as_fd()))
        });
        for peer in &mut conn.sides {
            // Closing the relay's own sockets takes them out of the epoll (the last
            // reference to the file goes); an inherited fd's dup does not, as the original
            // stays open: only those are deleted first.
            let inherited = !peer.owned();
            for fd in peer.polled.take() {
                if inherited {
                    self.poller.delete(fd);
                }
            }
            for (fd, flags) in peer.restore.drain(..) {
                let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
            }
            inherit::shared_flags::forget();
            let socket = peer.socket;
            if abort {
                if let Some(tls) = &peer.tls {
                    tls.cut();
                }
            }
            if let Some(fd) = peer.fd.take() {
                if abort && socket {
                    abort_socket(fd);
                }
            }
            peer.wfd.take();
        }
        // Its pipes closed (EOF on stdin, EPIPE on stdout), a command's child is waited for;
        // one cut by a signal gets SIGTERM, then SIGKILL after the grace.
        let cut_by_signal = matches!(end, ConnEnd::Signal);
        let children = [0, 1].map(|side| {
            let (child, group) = conn.sides[side].child.take()?;
            if cut_by_signal {
                command::terminate(&child, group);
            }
            Some((child, group))
        });
        // The connection is gone: its report takes its strings and records, not copies.
        let report = ConnReport {
            id: conn.id,
            seq: self.shared.ended.fetch_add(1, Ordering::Relaxed),
            peer: std::mem::take(&mut conn.peer),
            upstream,
            upstream_uri,
            seconds: conn.started.elapsed().as_secs_f64(),
            flows: [0, 1].map(|d| FlowReport {
                record: std::mem::take(&mut conn.flows[d].record),
                bytes: conn.flows[d].delivered,
                switches: conn.flows[d].switches(),
                ended: if conn.flows[d].shut {
                    ConnEnd::Eof
                } else {
                    end.clone()
                },
                undelivered: undelivered[d],
            }),
            end,
            mptcp,
            children: [None, None],
            datagrams: None,
            tls,
        };
        if children.iter().all(Option::is_none) {
            // No child to wait for: reported now (not through `reaping`, which would move
            // the report twice more and look at every child still running).
            self.ended(report);
        } else {
            let kill_at = cut_by_signal.then(|| Instant::now() + self.cfg.grace);
            self.reaping.push(Reaping {
                report,
                children,
                kill_at,
            });
            self.reap();
        }
        self.gens[idx] = self.gens[idx].wrapping_add(1);
        self.free.push(idx);
        self.active -= 1;
        self.unreserve();
        if self.accepting && self.accept_paused_until.is_none() && !self.at_capacity() {
            self.poll_listener(true);
        }
        if self.accepting && self.accept_paused_until.is_some() {
            // An fd just came free: try again now rather than at the end of the backoff.
            self.accept_paused_until = None;
            self.poll_listener(true);
        }
    }
}

/// A connection that ended, and the children of its command sides not yet exited: its
/// report waits for their exit status.
pub(in crate::cmd::relay) struct Reaping {
    report: ConnReport,
    /// With whether each leads a process group of its own.
    children: [Option<(Child, bool)>; 2],
    /// When a child that has not exited by then gets SIGKILL (it got SIGTERM).
    kill_at: Option<Instant>,
}

impl Server<'_> {
    /// Collects the children that have exited (never blocking: `try_wait` on each one's
    /// pid); a connection whose children all exited is reported, its end made a failure
    /// when one exited non-zero or died by a signal. Those still running are looked at
    /// again in [`REAP_EVERY`].
    pub(super) fn reap(&mut self) {
        let now = Instant::now();
        let cfg = self.cfg;
        let mut i = 0;
        while i < self.reaping.len() {
            let entry = &mut self.reaping[i];
            for side in 0..2 {
                let Some((child, group)) = entry.children[side].as_mut() else {
                    continue;
                };
                match child.try_wait() {
                    Ok(Some(status)) => {
                        let exit = ChildExit::of(child.id(), status);
                        entry.report.children[side] = Some(exit);
                        entry.children[side] = None;
                        if exit.failed() && entry.report.end == ConnEnd::Eof {
                            let side = Side::of(side);
                            entry.report.end = ConnEnd::CommandFailed {
                                side,
                                uri: cfg.side(side).to_string(),
                                words: exit.describe(),
                            };
                        }
                    }
                    Ok(None) => {
                        if entry.kill_at.is_some_and(|t| t <= now) {
                            command::kill_group(child, *group);
                        }
                    }
                    // ECHILD: not ours to wait for any more; nothing to report.
                    Err(_) => entry.children[side] = None,
                }
            }
            if entry.children.iter().all(Option::is_none) {
                let done = self.reaping.swap_remove(i);
                self.ended(done.report);
            } else {
                i += 1;
            }
        }
        if !self.reaping.is_empty() && !self.reap_timer {
            self.reap_timer = true;
            self.poller.timer(now + REAP_EVERY, REAP);
        }
    }

    /// A second signal: every child still running is killed now (SIGKILL).
    pub(super) fn kill_children(&mut self) {
        for entry in &mut self.reaping {
            for (child, group) in entry.children.iter().flatten() {
                command::kill_group(child, *group);
            }
            entry.kill_at = Some(Instant::now());
        }
    }

    /// A connection is over: its `-v` line, its log line, and its place in the report.
    pub(super) fn ended(&mut self, report: ConnReport) {
        for (d, flow) in report.flows.iter().enumerate() {
            self.shared.bytes_done[d].fetch_add(flow.bytes, Ordering::Relaxed);
        }
        // Text mode names each connection that failed (rate-limited); a cut at a stop
        // signal is the run's ending, and an unusable or refused one was said where it was
        // refused.
        let failed = !matches!(
            report.end,
            ConnEnd::Eof
                | ConnEnd::Quiet
                | ConnEnd::Signal
                | ConnEnd::Unusable(_)
                | ConnEnd::Refused(_)
        );
        if self.opts.verbose {
            eprintln!("zerocat: {}", printable(&errno_names(&report.line())));
        } else if failed && !self.opts.quiet {
            if let Ok(mut lines) = self.shared.failed_lines.lock() {
                for line in lines.admit(report.line(), Instant::now()) {
                    eprintln!("zerocat: {}", printable(&errno_names(&line)));
                }
            }
        }
        if let Some(log) = &self.shared.log {
            if let Ok(mut log) = log.lock() {
                log.connection(&report, self.worker);
            }
        }
        self.tally.add(report);
    }
}
