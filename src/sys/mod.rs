//! Thin wrappers over the raw syscalls the paths use: one place for the unsafe calls and
//! for waiting on non-blocking fds; fd classification, our own pipes and the process's
//! signal state. Imports nothing of the crate.

pub mod datagram;
pub mod dirent;
pub mod fdkind;
pub mod ktls;
pub mod memfd;
pub mod pipe;
pub mod probe;
pub mod process;
pub mod socket;
pub mod terminal;
pub mod xattr;

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr;

use nix::errno::Errno;
use nix::libc;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// Most bytes asked of one call: Rust and Go copy at most 1 GiB per call, glibc 2.41/2.42
/// miscount above INT_MAX, and splice refuses SIZE_MAX.
pub const MAX_CHUNK: usize = 1 << 30;

fn cvt(ret: isize) -> Result<usize, Errno> {
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(ret as usize)
    }
}

pub fn copy_file_range(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    len: usize,
) -> Result<usize, Errno> {
    // SAFETY: valid fds, NULL offsets (the kernel uses and advances the file offsets).
    cvt(unsafe {
        libc::copy_file_range(
            src.as_raw_fd(),
            ptr::null_mut(),
            dst.as_raw_fd(),
            ptr::null_mut(),
            len,
            0,
        )
    })
}

pub fn sendfile(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, len: usize) -> Result<usize, Errno> {
    // SAFETY: valid fds, NULL offset (the source's file offset is used and advanced).
    cvt(unsafe { libc::sendfile(dst.as_raw_fd(), src.as_raw_fd(), ptr::null_mut(), len) })
}

pub fn splice(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, len: usize) -> Result<usize, Errno> {
    // SAFETY: valid fds, NULL offsets. No SPLICE_F_NONBLOCK: it does not make a socket
    // non-blocking anyway (HAZARDS), the fds' own O_NONBLOCK decides.
    cvt(unsafe {
        libc::splice(
            src.as_raw_fd(),
            ptr::null_mut(),
            dst.as_raw_fd(),
            ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE,
        )
    })
}

/// Asks whether `dst` takes splice from pipe `empty` (which must hold no data and have a
/// writer open): the kernel checks the sink (O_APPEND, no splice_write…) before it waits
/// for pipe data, so a sink that would take it answers EAGAIN under SPLICE_F_NONBLOCK,
/// one that would not answers with the refusal, and no byte moves either way.
pub fn sink_takes_splice(empty: BorrowedFd<'_>, dst: BorrowedFd<'_>) -> Result<(), Errno> {
    loop {
        // SAFETY: valid fds, NULL offsets.
        let ret = unsafe {
            libc::splice(
                empty.as_raw_fd(),
                ptr::null_mut(),
                dst.as_raw_fd(),
                ptr::null_mut(),
                1,
                libc::SPLICE_F_NONBLOCK,
            )
        };
        match cvt(ret) {
            Ok(_) | Err(Errno::EAGAIN) => return Ok(()),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// tee(2): duplicate up to `len` bytes from pipe `src` into pipe `dst` without consuming.
pub fn tee(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, len: usize) -> Result<usize, Errno> {
    // SAFETY: valid fds. No SPLICE_F_NONBLOCK, as for splice.
    cvt(unsafe { libc::tee(src.as_raw_fd(), dst.as_raw_fd(), len, 0) })
}

/// tee(2) that never waits: a full `dst` (or an empty `src`) is EAGAIN, whatever the fds'
/// own flags say. For a tap that must not slow the stream it copies.
pub fn tee_nonblocking(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    len: usize,
) -> Result<usize, Errno> {
    // SAFETY: valid fds.
    cvt(unsafe {
        libc::tee(
            src.as_raw_fd(),
            dst.as_raw_fd(),
            len,
            libc::SPLICE_F_NONBLOCK,
        )
    })
}

/// `_IOW(0x94, 9, int)` from <linux/fs.h>.
const FICLONE: libc::c_ulong = 0x4004_9409;

/// ioctl(FICLONE): `dst` shares all of `src`'s extents, replacing its content.
pub fn ficlone(src: BorrowedFd<'_>, dst: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: FICLONE takes the source fd as its argument; both fds are valid.
    let ret = unsafe { libc::ioctl(dst.as_raw_fd(), FICLONE, src.as_raw_fd()) };
    Errno::result(ret).map(drop)
}

/// fallocate(2) with FALLOC_FL_KEEP_SIZE from offset 0: blocks for `len` bytes, the size
/// unchanged.
pub fn reserve_blocks(fd: BorrowedFd<'_>, len: u64) -> Result<(), Errno> {
    use nix::fcntl::{fallocate, FallocateFlags};
    let len = i64::try_from(len).map_err(|_| Errno::EFBIG)?;
    fallocate(fd.as_raw_fd(), FallocateFlags::FALLOC_FL_KEEP_SIZE, 0, len)
}

/// Frees the blocks reserved past a file's end: truncating it to its own size does.
pub fn free_past_end(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    let size = nix::sys::stat::fstat(fd.as_raw_fd())?.st_size;
    nix::unistd::ftruncate(fd, size)
}

pub fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
    // SAFETY: buf is valid for writes of buf.len() bytes.
    cvt(unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) })
}

pub fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> Result<usize, Errno> {
    // SAFETY: buf is valid for reads of buf.len() bytes.
    cvt(unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) })
}

/// Reads at `offset` until `buf` is full or the file ends: the bytes read. EINTR is
/// retried until SIGINT/SIGTERM arrived, then returned.
pub fn pread_full(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
    let mut got = 0;
    while got < buf.len() {
        match nix::sys::uio::pread(fd, &mut buf[got..], (offset + got as u64) as i64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::EINTR) if !process::interrupted() => {}
            Err(err) => return Err(err),
        }
    }
    Ok(got)
}

/// Writes all of `buf`, retrying EINTR and short writes and waiting out EAGAIN.
/// On error, returns how many bytes did go out. Bytes already read are delivered even
/// when a signal asks us to stop: they left the source and exist nowhere else — but only
/// within the stop's grace; after it, EINTR comes back ([`crate::sys::process::must_stop`]).
pub fn write_all(fd: BorrowedFd<'_>, mut buf: &[u8]) -> Result<(), (usize, Errno)> {
    let mut done = 0;
    while !buf.is_empty() {
        match write(fd, buf) {
            Ok(n) => {
                done += n;
                buf = &buf[n..];
            }
            Err(Errno::EINTR) if !crate::sys::process::must_stop() => {}
            Err(Errno::EAGAIN) => wait(fd, PollFlags::POLLOUT).map_err(|e| (done, e))?,
            Err(e) => return Err((done, e)),
        }
    }
    Ok(())
}

/// Blocks until `fd` is ready for `events` (for fds someone handed us non-blocking).
/// EINTR returns Ok so the caller's loop sees the signal flag, and EINTR itself once the
/// stop's grace is over, for loops that deliver bytes after a signal.
pub fn wait(fd: BorrowedFd<'_>, events: PollFlags) -> Result<(), Errno> {
    let mut fds = [PollFd::new(fd, events)];
    match poll(&mut fds, PollTimeout::NONE) {
        Err(Errno::EINTR) if crate::sys::process::must_stop() => Err(Errno::EINTR),
        Ok(_) | Err(Errno::EINTR) => Ok(()),
        Err(e) => Err(e),
    }
}

/// [`wait`], for at most `timeout`: Ok(false) when it passed with `fd` not ready.
pub fn wait_within(
    fd: BorrowedFd<'_>,
    events: PollFlags,
    timeout: std::time::Duration,
) -> Result<bool, Errno> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        // Round up: a poll of 0 ms for what is left of a millisecond would spin.
        let ms = left.as_millis() + u128::from(!left.subsec_nanos().is_multiple_of(1_000_000));
        let mut fds = [PollFd::new(fd, events)];
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) if left.is_zero() => return Ok(false),
            Ok(0) => {}
            Ok(_) => return Ok(true),
            Err(Errno::EINTR) if crate::sys::process::must_stop() => return Err(Errno::EINTR),
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Bytes written into a socket that its peer has not taken yet (TIOCOUTQ, alias
/// SIOCOUTQ; for TCP, not yet acknowledged).
pub fn unsent(fd: BorrowedFd<'_>) -> Result<usize, Errno> {
    ioctl_count(fd, libc::TIOCOUTQ)
}

/// Bytes a TCP socket holds that it has not sent yet (SIOCOUTQNSD): a reset drops
/// them, while bytes sent but not yet acknowledged still reach the peer ahead of the RST.
pub fn not_sent(fd: BorrowedFd<'_>) -> Result<usize, Errno> {
    ioctl_count(fd, libc::SIOCOUTQNSD as libc::Ioctl)
}

/// The size of a memory page: a pipe holds `F_GETPIPE_SZ / page_size()` buffers.
pub fn page_size() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .map_or(4096, |n| n as usize)
}

/// Bytes queued in a pipe or socket (FIONREAD).
pub fn queued(fd: BorrowedFd<'_>) -> Result<usize, Errno> {
    ioctl_count(fd, libc::FIONREAD)
}

/// An ioctl that writes one int count.
fn ioctl_count(fd: BorrowedFd<'_>, request: libc::Ioctl) -> Result<usize, Errno> {
    let mut n: libc::c_int = 0;
    // SAFETY: the requests passed here write one int.
    let ret = unsafe { libc::ioctl(fd.as_raw_fd(), request, &mut n) };
    Errno::result(ret).map(|_| n.max(0) as usize)
}

/// open(2), or openat(2) relative to `dir`, retrying EINTR as std does — but not once
/// SIGINT/SIGTERM arrived: std's OpenOptions retries forever, and the open of a FIFO
/// whose other end never comes blocks, so the run could not end. Returns EINTR then.
pub fn open_interruptible(
    dir: Option<std::os::fd::RawFd>,
    path: &std::path::Path,
    flags: nix::fcntl::OFlag,
    mode: nix::sys::stat::Mode,
) -> Result<std::os::fd::OwnedFd, Errno> {
    use std::os::fd::FromRawFd;
    loop {
        let opened = match dir {
            Some(dirfd) => nix::fcntl::openat(Some(dirfd), path, flags, mode),
            None => nix::fcntl::open(path, flags, mode),
        };
        match opened {
            Err(Errno::EINTR) if !crate::sys::process::interrupted() => {}
            // SAFETY: open just returned this descriptor; nothing else owns it.
            other => return other.map(|raw| unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) }),
        }
    }
}
