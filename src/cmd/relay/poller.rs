//! The one epoll instance of the relay, and its timers.
//!
//! nix's epoll rather than mio: nix is already a dependency, the relay is Linux-only
//! anyway (splice), it works on raw fds (sockets, stdio, pipes alike) which mio would
//! wrap in `SourceFd`, and it lets us wait with `epoll_pwait`: SIGINT/SIGTERM stay
//! blocked except inside the wait, so a signal can never slip in between "check the
//! flag" and "sleep" (mio has no pwait).
//!
//! Registration is edge-triggered, once per fd, for reading and writing: no epoll_ctl per
//! event; the loop keeps readiness flags that an event sets and EAGAIN clears (or a read
//! shorter than asked: it drained the fd, and the next bytes bring the next event — unless
//! the fd reported RDHUP/HUP, see [`Ready::hup`]). The one epoll_ctl after that is
//! [`Poller::mute`]: reading is unwatched while the direction it feeds waits on a full
//! sink, and watched again when the sink drains (two calls a stall, where each segment
//! arriving meanwhile used to wake the loop for nothing).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::signal::{SigSet, SigmaskHow, Signal};

pub struct Poller {
    epoll: Epoll,
    events: Vec<libc::epoll_event>,
    /// The signal mask to wait with (SIGINT/SIGTERM unblocked); the thread's mask outside.
    wait_mask: SigSet,
    /// The longest wait: a worker that never receives the stop signals itself looks at
    /// their flag this often.
    max_wait_ms: Option<i32>,
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
}

/// One readiness event: the token it was registered with, and what it says.
#[derive(Debug, Clone, Copy)]
pub struct Ready {
    pub token: u64,
    pub readable: bool,
    pub writable: bool,
    /// The peer shut its side, or the fd hung up or failed (RDHUP, HUP, ERR): a read may
    /// return less than asked with an EOF or an error right behind it, so the reader
    /// reads on instead of waiting for an event that will not come.
    pub hup: bool,
}

impl Poller {
    /// Creates the epoll instance and blocks SIGINT/SIGTERM outside of [`Poller::wait`].
    pub fn new() -> nix::Result<Poller> {
        Poller::with_signals(true)
    }

    /// A worker's poller (`--workers` above 1): the calling thread blocks SIGINT, SIGTERM
    /// and SIGALRM for good, so they reach the main thread only (and the tick of
    /// `sys::process` interrupts no worker's syscall); the wait wakes every 100 ms to look
    /// at the stop flag.
    pub fn for_worker() -> nix::Result<Poller> {
        let mut blocked = SigSet::empty();
        blocked.add(Signal::SIGINT);
        blocked.add(Signal::SIGTERM);
        blocked.add(Signal::SIGALRM);
        nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&blocked), None)?;
        let mut poller = Poller::with_signals(false)?;
        poller.max_wait_ms = Some(100);
        Ok(poller)
    }

    fn with_signals(unblock_in_wait: bool) -> nix::Result<Poller> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        let mut stop = SigSet::empty();
        stop.add(Signal::SIGINT);
        stop.add(Signal::SIGTERM);
        let mut old = SigSet::empty();
        nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&stop), Some(&mut old))?;
        let mut wait_mask = old;
        if unblock_in_wait {
            wait_mask.remove(Signal::SIGINT);
            wait_mask.remove(Signal::SIGTERM);
        } else {
            wait_mask.add(Signal::SIGINT);
            wait_mask.add(Signal::SIGTERM);
        }
        Ok(Poller {
            epoll,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 1024],
            wait_mask,
            max_wait_ms: None,
            timers: BinaryHeap::new(),
        })
    }

    /// Watches `fd` for reading and writing, edge-triggered. EPERM means the fd cannot be
    /// polled (a regular file, /dev/null): it is always ready, and the caller treats it so.
    pub fn add(&self, fd: RawFd, token: u64) -> nix::Result<()> {
        let flags = EpollFlags::EPOLLIN
            | EpollFlags::EPOLLOUT
            | EpollFlags::EPOLLRDHUP
            | EpollFlags::EPOLLET;
        // SAFETY: the fd is open for as long as it is registered (the caller deletes it
        // before closing, unless the close is the file's last reference: that removes it).
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        self.epoll.add(fd, EpollEvent::new(flags, token))
    }

    /// Watches a listening socket for readability, level-triggered: while connections wait
    /// in the backlog it keeps saying so (accept is paused by not asking, not by ignoring).
    /// `shared`: several workers watch the one listener, so it is exclusive — a new
    /// connection wakes one of those waiting (a busy worker is passed over), not all of
    /// them. (The kernel refuses EPOLLEXCLUSIVE on an epoll fd, which a multiplexed
    /// listener is; such a listener has one worker.)
    pub fn add_listener(&self, fd: RawFd, token: u64, shared: bool) -> nix::Result<()> {
        // SAFETY: as in add().
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let mut flags = EpollFlags::EPOLLIN;
        if shared {
            flags |= EpollFlags::EPOLLEXCLUSIVE;
        }
        self.epoll.add(fd, EpollEvent::new(flags, token))
    }

    /// Stops (`muted`) or resumes watching `fd` for reading; writing stays watched. A
    /// direction that cannot take bytes until its sink does is not woken by its source
    /// (bench/NOTEBOOK.md, `relay: a full sink mutes its source`). Resuming re-arms the edge: if the
    /// fd is readable (or hung up) by then, the next wait reports it.
    pub fn mute(&self, fd: RawFd, token: u64, muted: bool) -> nix::Result<()> {
        let mut flags = EpollFlags::EPOLLOUT | EpollFlags::EPOLLET;
        if !muted {
            flags |= EpollFlags::EPOLLIN | EpollFlags::EPOLLRDHUP;
        }
        // SAFETY: as in add().
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        self.epoll.modify(fd, &mut EpollEvent::new(flags, token))
    }

    pub fn delete(&self, fd: RawFd) {
        // SAFETY: as in add().
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let _ = self.epoll.delete(fd);
    }

    /// Calls `token` back at `when` (at the next wait after it passes).
    pub fn timer(&mut self, when: Instant, token: u64) {
        self.timers.push(Reverse((when, token)));
    }

    /// Pops a timer that is due.
    pub fn due(&mut self, now: Instant) -> Option<u64> {
        match self.timers.peek() {
            Some(Reverse((when, _))) if *when <= now => self.timers.pop().map(|r| r.0 .1),
            _ => None,
        }
    }

    /// Waits for events until the next timer (or forever; or not at all when `busy`).
    /// A signal ends the wait early (EINTR); the caller checks the flag.
    pub fn wait(&mut self, busy: bool, out: &mut Vec<Ready>) -> nix::Result<()> {
        out.clear();
        let timeout_ms: i32 = if busy {
            0
        } else {
            match self.timers.peek() {
                None => -1,
                Some(Reverse((when, _))) => {
                    let left = when.saturating_duration_since(Instant::now());
                    // Round up: waking a little early would spin until the timer is due.
                    (left + Duration::from_micros(999))
                        .as_millis()
                        .min(i32::MAX as u128) as i32
                }
            }
        };
        let timeout_ms = match self.max_wait_ms {
            Some(max) if timeout_ms < 0 || timeout_ms > max => max,
            _ => timeout_ms,
        };
        // SAFETY: the events buffer is valid for its length; the mask is a valid sigset.
        let n = unsafe {
            libc::epoll_pwait(
                self.epoll.0.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as i32,
                timeout_ms,
                self.wait_mask.as_ref(),
            )
        };
        if n < 0 {
            return match Errno::last() {
                Errno::EINTR => Ok(()),
                e => Err(e),
            };
        }
        let err = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
        let hup = libc::EPOLLRDHUP as u32 | err;
        for e in &self.events[..n as usize] {
            let bits = e.events;
            out.push(Ready {
                token: e.u64,
                readable: bits & (libc::EPOLLIN as u32 | libc::EPOLLRDHUP as u32 | err) != 0,
                writable: bits & (libc::EPOLLOUT as u32 | err) != 0,
                hup: bits & hup != 0,
            });
        }
        Ok(())
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        let mut stop = SigSet::empty();
        stop.add(Signal::SIGINT);
        stop.add(Signal::SIGTERM);
        let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&stop), None);
    }
}
