//! The pipes and buffers every direction of the loop shares, within two budgets: a relay
//! full of stalled sinks holds bounded memory and stays within the user's pipe pages.

use std::cell::Cell;
use std::os::fd::{AsFd, BorrowedFd};
use std::rc::Rc;

use nix::errno::Errno;
use nix::fcntl::OFlag;

use crate::sys;
use crate::sys::pipe::{grow_pipe_within, set_pipe_size, OwnPipe};

/// Size of a userspace buffer (one per busy direction, pooled).
pub const BUFFER_SIZE: usize = 256 * 1024;
/// Total of all userspace buffers alive (in use and pooled): 64 of them. A direction that
/// finds the budget spent takes an [`ALLOWANCE`] instead.
pub const BUFFER_BUDGET: usize = 16 << 20;
/// A direction's own buffer, outside the budget, when the budget is spent (HAProxy's
/// `tune.bufsize`): directions whose sinks stopped reading may hold every shared buffer
/// and pipe, and the others then go on in 16 KiB reads instead of waiting for memory
/// (issue 26: 150 clients that stopped reading had stopped the relay for everyone). Freed
/// as soon as it is empty, so it costs 16 KiB per direction that holds unsent bytes while
/// the budget is spent: at most 32 KiB per connection, which `--max-conns` bounds.
pub const ALLOWANCE: usize = 16 * 1024;
/// The capacity of a fresh pipe (the kernel default).
const PIPE_DEFAULT: usize = 64 * 1024;
/// What a pipe that a splice filled grows to (or `pipe-max-size`, if lower): a bulk
/// stream moves it in 1/16 the splices of a fresh one, for 40-60% less CPU a byte
/// (bench/NOTEBOOK.md, `relay: per-event cost`).
pub const PIPE_GROWN: usize = 1 << 20;
/// Total capacity of all pipes zerocat holds (in use and pooled): 1,000 busy connections
/// stay within `pipe-user-pages-soft` (64 MiB per user), leaving half of it to others.
pub const PIPE_BUDGET: usize = 32 << 20;
/// Pipes kept for reuse once a direction goes idle.
const POOL_MAX: usize = 64;
/// Buffers kept for reuse (the rest are freed: an idle relay holds little memory).
const BUFFERS_POOLED: usize = 8;

/// A pipe of the relay's own, counted in the pipe budget for as long as it lives: dropped
/// anywhere (a connection cut with bytes in it, a full pool), it gives its capacity back.
pub struct BudgetPipe {
    pipe: OwnPipe,
    spent: Rc<Cell<usize>>,
    /// Grown once already, as far as the kernel and the budget let it.
    grown: bool,
}

impl BudgetPipe {
    /// Grown past the kernel's default: a bulk stream's pipe.
    pub fn bulk_sized(&self) -> bool {
        self.pipe.size > PIPE_DEFAULT
    }
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

/// Capacity the relay's pipe budget counts for a pipe it does not own (a command's stdin
/// or stdout, grown by [`Pools::grow_childs_pipe`]) for as long as this lives.
pub struct HeldPipe {
    bytes: usize,
    spent: Rc<Cell<usize>>,
}

impl Drop for HeldPipe {
    fn drop(&mut self) {
        self.spent.set(self.spent.get() - self.bytes);
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
    /// [`BUFFER_BUDGET`], or this worker's share of it.
    buffer_budget: usize,
    /// [`ALLOWANCE`]s alive.
    allowances: usize,
    /// The first allowance since none was alive: said once, by [`Pools::take_notice`].
    notice: bool,
}

impl Pools {
    pub fn new(budget: usize) -> Pools {
        Pools {
            pipes: Vec::new(),
            buffers: Vec::new(),
            buffers_alive: 0,
            pipe_bytes: Rc::new(Cell::new(0)),
            budget,
            buffer_budget: BUFFER_BUDGET,
            allowances: 0,
            notice: false,
        }
    }

    /// One worker's share of both budgets when `workers` event loops run (the process
    /// stays within the budgets), at least one pipe and one buffer.
    pub fn share(mut self, workers: usize) -> Pools {
        let workers = workers.max(1);
        self.budget = (self.budget / workers).max(PIPE_DEFAULT);
        self.buffer_budget = (BUFFER_BUDGET / workers).max(BUFFER_SIZE);
        self
    }

    pub fn pipe_budget(&self) -> usize {
        self.budget
    }

    /// This loop's buffer budget.
    pub fn buffer_budget(&self) -> usize {
        self.buffer_budget
    }

    /// A pipe from the pool, or a fresh one. `fresh_size`: one of the kernel's default
    /// size (a pooled pipe that grew is shrunk back), for a direction judging its segments
    /// by the pipe's 16 buffers ([`mod@super::policy`]).
    pub(super) fn take_pipe(&mut self, fresh_size: bool) -> Result<BudgetPipe, Errno> {
        if let Some(mut pipe) = self.pipes.pop() {
            if fresh_size && pipe.size > PIPE_DEFAULT {
                if let Ok(size) = set_pipe_size(pipe.write.as_fd(), PIPE_DEFAULT) {
                    self.resized(&mut pipe, size);
                    pipe.grown = false;
                }
            }
            return Ok(pipe);
        }
        if self.pipe_bytes.get() + PIPE_DEFAULT > self.budget {
            return Err(Errno::ENOBUFS);
        }
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let size = crate::sys::pipe::pipe_size(write.as_fd()).unwrap_or(PIPE_DEFAULT);
        self.pipe_bytes.set(self.pipe_bytes.get() + size);
        Ok(BudgetPipe {
            pipe: OwnPipe { read, write, size },
            spent: self.pipe_bytes.clone(),
            grown: false,
        })
    }

    /// Pools a pipe for the next direction only if it is empty (asked of the kernel, not of
    /// our count); any other is dropped, which closes it and gives its capacity back.
    pub(super) fn give_pipe(&mut self, pipe: BudgetPipe) {
        let empty = sys::queued(pipe.read.as_fd()) == Ok(0);
        if empty && self.pipes.len() < POOL_MAX {
            self.pipes.push(pipe);
        }
    }

    /// The kernel gave `pipe` a capacity of `size`: the budget counts that.
    fn resized(&self, pipe: &mut BudgetPipe, size: usize) {
        self.pipe_bytes
            .set(self.pipe_bytes.get() + size - pipe.pipe.size);
        pipe.pipe.size = size;
    }

    /// A pipe that a splice filled grows to [`PIPE_GROWN`] (or `pipe-max-size`, if
    /// lower) when the budget has room for all of it and for a fresh pipe after it; the
    /// budget counts the size the kernel granted. What a full-size growth would not fit is
    /// left to fresh pipes, so a busy relay gives more connections a pipe rather than a few
    /// connections bigger ones.
    pub(super) fn grow(&mut self, pipe: &mut BudgetPipe) {
        let after = self.pipe_bytes.get() - pipe.pipe.size + PIPE_GROWN;
        if pipe.grown || after + PIPE_DEFAULT > self.budget {
            return;
        }
        pipe.grown = true;
        if let Some(size) = grow_pipe_within(pipe.write.as_fd(), PIPE_GROWN) {
            self.resized(pipe, size);
        }
    }

    /// A command's pipe (its stdin or stdout, which the relay splices to or from) grows to
    /// [`PIPE_GROWN`] as the relay's own do when the budget has room for the growth and a
    /// fresh pipe after it: the child then reads and writes in large pieces (an echo through
    /// `cat` runs about twice as fast as through 64 KiB pipes: bench/results/exec/RESULTS.md). The
    /// growth is counted until the returned [`HeldPipe`] drops; the default-sized pipe the
    /// child gets anyway is not.
    pub(super) fn grow_childs_pipe(&mut self, fd: BorrowedFd<'_>) -> Option<HeldPipe> {
        if self.pipe_bytes.get() + PIPE_GROWN + PIPE_DEFAULT > self.budget {
            return None;
        }
        let size = grow_pipe_within(fd, PIPE_GROWN)?;
        let bytes = size.saturating_sub(PIPE_DEFAULT);
        self.pipe_bytes.set(self.pipe_bytes.get() + bytes);
        Some(HeldPipe {
            bytes,
            spent: self.pipe_bytes.clone(),
        })
    }

    /// A buffer within the buffer budget ([`BUFFER_BUDGET`] or a worker's share), else an
    /// [`ALLOWANCE`] of the direction's own: no direction waits for memory. `drain`: for
    /// bytes already in our own pipe, which may go over the budget (the pipes bound them).
    pub(super) fn take_buffer(&mut self, drain: bool) -> Box<[u8]> {
        if let Some(buf) = self.buffers.pop() {
            return buf;
        }
        if !drain && (self.buffers_alive + 1) * BUFFER_SIZE > self.buffer_budget {
            self.notice |= self.allowances == 0;
            self.allowances += 1;
            return vec![0u8; ALLOWANCE].into_boxed_slice();
        }
        self.buffers_alive += 1;
        vec![0u8; BUFFER_SIZE].into_boxed_slice()
    }

    /// True once each time directions start running on allowances (none was alive).
    pub fn take_notice(&mut self) -> bool {
        std::mem::take(&mut self.notice)
    }

    /// Allowances alive: directions going on with 16 KiB buffers while the budget is spent.
    #[cfg(test)]
    pub fn allowances(&self) -> usize {
        self.allowances
    }

    pub(super) fn give_buffer(&mut self, buf: Box<[u8]>) {
        if buf.len() == ALLOWANCE {
            self.allowances -= 1;
            return;
        }
        if self.buffers.len() < BUFFERS_POOLED
            && self.buffers_alive * BUFFER_SIZE <= self.buffer_budget
        {
            self.buffers.push(buf);
        } else {
            self.buffers_alive -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::relay::flow::{Blame, Flow, FlowError, Port, Turn};
    use crate::cmd::relay::policy::{Choice, Policy, BULK_READ};
    use crate::sys;
    use nix::errno::Errno;
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    use std::os::fd::{AsFd, OwnedFd};

    fn pair() -> (OwnedFd, OwnedFd) {
        socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        )
        .unwrap()
    }

    /// A direction on a fixed path, without the prior.
    fn flow(policy: Policy) -> Flow {
        Flow::new(Choice::new(policy, false))
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
            Port {
                fd: src.as_fd(),
                ready: &mut r,
                socket: true,
                short_read_drains: false,
                closed_next: false,
                own: true,
                tls: None,
            },
            Port {
                fd: dst.as_fd(),
                ready: &mut w,
                socket: true,
                short_read_drains: false,
                closed_next: false,
                own: true,
                tls: None,
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
        let mut pools = Pools::new(PIPE_BUDGET);
        let (client, src) = pair();
        let (dst, _backend) = pair();
        fill(&dst);
        sys::write(client.as_fd(), b"stranded").unwrap();
        let mut flow = flow(Policy::Splice);
        pump(&mut flow, &src, &dst, &mut pools).unwrap();
        assert_eq!(flow.held(), 8, "the bytes sit in the pipe");
        assert_eq!(pools.pipe_bytes.get(), PIPE_DEFAULT);
        assert_eq!(flow.flush_now(dst.as_fd(), None, &mut pools), 8);
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
        let mut pools = Pools::new(PIPE_BUDGET);
        let (client, src) = pair();
        let (dst, _backend) = pair();
        sys::write(client.as_fd(), b"passes").unwrap();
        let mut flow = flow(Policy::Splice);
        pump(&mut flow, &src, &dst, &mut pools).unwrap();
        assert_eq!(flow.held(), 0);
        flow.close(&mut pools);
        assert_eq!(pools.pipes.len(), 1);
        assert_eq!(pools.pipe_bytes.get(), PIPE_DEFAULT);
    }

    /// Growth stays within the budget and leaves room for a fresh pipe; the budget counts
    /// what the kernel granted.
    #[test]
    fn a_pipe_grows_only_when_the_budget_has_room_for_it() {
        let budget = PIPE_GROWN + 2 * PIPE_DEFAULT;
        let mut pools = Pools::new(budget);
        let size = |p: &BudgetPipe| sys::pipe::pipe_size(p.write.as_fd()).unwrap();
        let mut first = pools.take_pipe(false).unwrap();
        pools.grow(&mut first);
        assert_eq!(first.size, size(&first));
        assert!(
            first.size > PIPE_DEFAULT && first.size <= PIPE_GROWN,
            "{}",
            first.size
        );
        let mut second = pools.take_pipe(false).unwrap();
        pools.grow(&mut second); // no room for 1 MiB more and a fresh pipe
        assert_eq!(second.size, PIPE_DEFAULT);
        assert_eq!(pools.pipe_bytes.get(), size(&first) + size(&second));
        assert!(pools.pipe_bytes.get() <= budget);
        let third = pools.take_pipe(false).unwrap(); // growth left room for one
        assert!(pools.take_pipe(false).is_err(), "the budget is spent");
        drop(first);
        drop(third);
        pools.grow(&mut second); // the room is back
        assert_eq!(second.size, size(&second));
        assert!(second.size > PIPE_DEFAULT, "{}", second.size);
        assert_eq!(pools.pipe_bytes.get(), size(&second));
        drop(second);
        assert_eq!(pools.pipe_bytes.get(), 0);
    }

    /// Drains what `backend` holds, returns it.
    fn drain(backend: &OwnedFd) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = sys::read(backend.as_fd(), &mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
        got
    }

    /// Auto's one rule: a socket direction starts in userspace, and its first read of
    /// BULK_READ or more moves it to splice (those bytes still leave from the buffer).
    #[test]
    fn auto_starts_in_userspace_and_a_bulk_read_moves_it_to_splice() {
        use crate::engine::DataPath::{Splice, Userspace};
        let mut pools = Pools::new(PIPE_BUDGET);
        let (client, src) = pair();
        let (dst, backend) = pair();
        let mut flow = Flow::new(Choice::new(Policy::Auto, true));
        sys::write(client.as_fd(), b"ping").unwrap();
        pump(&mut flow, &src, &dst, &mut pools).unwrap();
        assert_eq!(drain(&backend), b"ping");
        assert_eq!(flow.record.paths, [(Userspace, 4)]);
        assert_eq!(flow.switches(), 0);
        let bulk = vec![7u8; BULK_READ + 1000];
        sys::write_all(client.as_fd(), &bulk).unwrap();
        pump(&mut flow, &src, &dst, &mut pools).unwrap();
        assert_eq!(drain(&backend), bulk);
        assert_eq!(flow.switches(), 1, "on splice after the bulk read");
        let tail = vec![9u8; 5000];
        sys::write_all(client.as_fd(), &tail).unwrap();
        pump(&mut flow, &src, &dst, &mut pools).unwrap();
        assert_eq!(drain(&backend), tail);
        let moved = 4 + bulk.len() as u64;
        assert_eq!(flow.record.paths, [(Userspace, moved), (Splice, 5000)]);
    }

    #[test]
    fn no_pipe_under_via_splice_blames_the_relay_not_a_side() {
        let mut pools = Pools::new(0);
        let (client, src) = pair();
        let (dst, _backend) = pair();
        sys::write(client.as_fd(), b"x").unwrap();
        let mut flow = flow(Policy::Splice);
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
    fn a_direction_finding_the_budget_spent_goes_on_with_an_allowance_of_its_own() {
        let mut pools = Pools::new(PIPE_BUDGET);
        let held: Vec<_> = (0..BUFFER_BUDGET / BUFFER_SIZE)
            .map(|_| pools.take_buffer(false))
            .collect();
        assert!(!pools.take_notice(), "nothing beyond the budget yet");
        let (client, src) = pair();
        let (dst, backend) = pair();
        sys::write(client.as_fd(), b"later").unwrap();
        let mut flow = flow(Policy::Userspace);
        assert_eq!(pump(&mut flow, &src, &dst, &mut pools), Ok(Turn::Idle));
        assert_eq!(flow.delivered, 5, "it did not wait for a shared buffer");
        let mut got = [0u8; 5];
        assert_eq!(sys::read(backend.as_fd(), &mut got), Ok(5));
        assert_eq!(&got, b"later");
        assert!(pools.take_notice(), "the first allowance is said");
        assert!(!pools.take_notice(), "once");
        assert_eq!(pools.allowances(), 0, "given back as soon as it was empty");
        // A stalled sink: the allowance holds the bytes, and only 16 KiB of them.
        fill(&dst);
        sys::write(client.as_fd(), &[7u8; 40_000]).unwrap();
        assert_eq!(pump(&mut flow, &src, &dst, &mut pools), Ok(Turn::Idle));
        assert_eq!(flow.held(), ALLOWANCE);
        assert_eq!(pools.allowances(), 1);
        flow.close(&mut pools);
        assert_eq!(pools.allowances(), 0);
        for buf in held {
            pools.give_buffer(buf);
        }
    }
}
