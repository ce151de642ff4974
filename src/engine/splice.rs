//! splice(2): directly when one side is a pipe, otherwise through a pipe of zerocat's own
//! (socket -> socket, socket -> file, file -> file when copy_file_range said no).

use std::cell::RefCell;
use std::os::fd::{AsFd, BorrowedFd};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::{next_len, pump, refuse_or_fail, Ends, Failure, Outcome, Reason, Side};
use crate::engine::dump::Tapped;
use crate::engine::meter::Meter;
use crate::engine::userspace::read_write;
use crate::sys;
use crate::sys::fdkind::FdKind;
use crate::sys::pipe::OwnPipe;

/// Moves bytes with splice until EOF or `limit` bytes; `middle` is the pipe of ours to
/// go through when neither side is a pipe (else one is made for this transfer). Under
/// `--dump` the bytes pass through a pipe the dump can tee(2) from before they are
/// spliced out: the source's, or, when the source is no pipe, one of ours.
pub fn copy_upto(ends: &Ends<'_>, middle: Option<&OwnPipe>, meter: &Meter, limit: u64) -> Outcome {
    let tap = ends.tap;
    let source_pipe = ends.src_info.kind == FdKind::Pipe;
    if source_pipe || (ends.dst_info.kind == FdKind::Pipe && tap.is_none()) {
        return direct(ends.src, ends.dst, meter, limit, tap);
    }
    match middle {
        Some(pipe) => through(ends.src, ends.dst, pipe, meter, limit, tap),
        None => match OwnPipe::new() {
            Ok(pipe) => through(ends.src, ends.dst, &pipe, meter, limit, tap),
            Err(e) => Outcome::Fallback(0, Reason::Errno(e)),
        },
    }
}

/// One side is a pipe: splice straight across (the source pipe's head teed into the
/// dump first, when there is one).
fn direct(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    meter: &Meter,
    limit: u64,
    tap: Option<&RefCell<Tapped>>,
) -> Outcome {
    // EAGAIN means the source is empty or the sink is full (HAZARDS: its two meanings):
    // wait for data first, then for room.
    let ready =
        || sys::wait(src, PollFlags::POLLIN).and_then(|_| sys::wait(dst, PollFlags::POLLOUT));
    pump(
        meter,
        |_| None,
        sys::MAX_CHUNK,
        limit,
        ready,
        |len| match tap {
            None => sys::splice(src, dst, len),
            Some(tap) => splice_tapped(src, dst, len, &mut tap.borrow_mut()),
        },
    )
}

/// One splice out of source pipe `src`, its head copied into the dump first: tee(2) needs
/// bytes in the pipe (on an empty one it would say EAGAIN, counted as missed), so this
/// waits for them, and splices out no more than the dump has accounted for.
fn splice_tapped(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    len: usize,
    tap: &mut Tapped,
) -> Result<usize, Errno> {
    let queued = match bytes_in(src)? {
        0 => return Ok(0),
        n => n.min(len),
    };
    let len = tap.ahead_of_splice(src, queued);
    let n = sys::splice(src, dst, len)?;
    tap.spliced(n);
    Ok(n)
}

/// The bytes waiting in pipe `src`, after waiting for some: 0 once no writer is left and
/// it is empty (its end). EINTR goes back to the caller's loop (its stop check).
pub(crate) fn bytes_in(src: BorrowedFd<'_>) -> Result<usize, Errno> {
    loop {
        let queued = sys::queued(src)?;
        if queued > 0 {
            return Ok(queued);
        }
        let mut fds = [PollFd::new(src, PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::NONE)?;
        let hung_up = fds[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLHUP));
        if hung_up && sys::queued(src)? == 0 {
            return Ok(0);
        }
    }
}

/// Neither side is a pipe: source -> our pipe -> sink. The pipe is emptied into the sink
/// before the next fill; when the sink fails with bytes still in it, they are dropped
/// with the failed transfer ([`OwnPipe::ensure_empty`]), so the pipe starts and ends empty.
fn through(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    pipe: &OwnPipe,
    meter: &Meter,
    limit: u64,
    tap: Option<&RefCell<Tapped>>,
) -> Outcome {
    if let Err(e) = pipe.ensure_empty() {
        return Outcome::Failed(0, Failure::of(e, Side::Either));
    }
    let outcome = fill_and_drain(src, dst, pipe, meter, limit, tap);
    if let Outcome::Failed(..) = outcome {
        // Should this fail, the next transfer's check above meets it again and stops.
        let _ = pipe.ensure_empty();
    }
    outcome
}

fn fill_and_drain(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    pipe: &OwnPipe,
    meter: &Meter,
    limit: u64,
    tap: Option<&RefCell<Tapped>>,
) -> Outcome {
    // Before taking a byte from the source: once bytes sit in our pipe they must go out,
    // and a forced `--via splice` that the sink refuses must move nothing. The pipe is
    // empty here, so the probe moves no byte.
    if let Err(e) = sys::sink_takes_splice(pipe.read.as_fd(), dst) {
        return refuse_or_fail(e, 0, Side::Sink);
    }
    let mut delivered = 0u64;
    loop {
        let len = match next_len(delivered, limit, pipe.size, meter) {
            Ok(len) => len,
            Err(done) => return done,
        };
        let filled = match sys::splice(src, pipe.write.as_fd(), len) {
            Ok(0) => return Outcome::Ended(delivered),
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) => match sys::wait(src, PollFlags::POLLIN) {
                Ok(()) => continue,
                Err(e) => return Outcome::Failed(delivered, Failure::of(e, Side::Source)),
            },
            Err(e) => return refuse_or_fail(e, delivered, Side::Source),
        };
        let mut in_pipe = filled;
        while in_pipe > 0 {
            // The dump copies the pipe's head first (tee): no more goes out than it has.
            let len = match tap {
                Some(tap) => tap.borrow_mut().ahead_of_splice(pipe.read.as_fd(), in_pipe),
                None => in_pipe,
            };
            match sys::splice(pipe.read.as_fd(), dst, len) {
                Ok(n) => {
                    if let Some(tap) = tap {
                        tap.borrow_mut().spliced(n);
                    }
                    in_pipe -= n;
                    delivered += n as u64;
                    meter.add(n as u64);
                }
                // Keep draining when interrupted, within the stop's grace: these bytes
                // left the source.
                Err(Errno::EINTR) if !crate::sys::process::must_stop() => {}
                Err(Errno::EAGAIN) => {
                    if let Err(e) = sys::wait(dst, PollFlags::POLLOUT) {
                        return Outcome::Failed(delivered, Failure::of(e, Side::Sink));
                    }
                }
                Err(e) if super::falls_back(e, delivered) => {
                    // The sink takes no splice. What already left the source goes out
                    // with plain writes, then the userspace path carries on.
                    return match drain_with_writes(pipe, dst, in_pipe, meter, tap) {
                        Ok(()) => Outcome::Fallback(in_pipe as u64, Reason::Errno(e)),
                        Err((done, err)) => Outcome::Failed(done, Failure::of(err, Side::Sink)),
                    };
                }
                Err(e) => return Outcome::Failed(delivered, Failure::of(e, Side::Sink)),
            }
        }
    }
}

/// Moves `len` bytes out of our pipe into `dst` with read/write.
fn drain_with_writes(
    pipe: &OwnPipe,
    dst: BorrowedFd<'_>,
    mut len: usize,
    meter: &Meter,
    tap: Option<&RefCell<Tapped>>,
) -> Result<(), (u64, Errno)> {
    let mut buf = vec![0u8; len.min(pipe.size)];
    let mut done = 0u64;
    while len > 0 {
        let n = read_write(pipe.read.as_fd(), dst, len, &mut buf)
            .map_err(|(_, written, e)| (done + written as u64, e))?;
        if let Some(tap) = tap {
            tap.borrow_mut().wrote(&buf[..n]);
        }
        meter.add(n as u64);
        done += n as u64;
        len -= n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::unix::net::UnixStream;

    use super::*;

    fn file_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        f
    }

    fn contents(mut f: File) -> Vec<u8> {
        let mut out = Vec::new();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn a_pipe_with_bytes_left_is_not_handed_to_the_next_transfer() {
        let pipe = OwnPipe::new().unwrap();
        sys::write_all(pipe.write.as_fd(), b"stale bytes of a failed file").unwrap();
        let (src, dst) = (file_with(b"fresh"), file_with(b""));
        let outcome = through(
            src.as_fd(),
            dst.as_fd(),
            &pipe,
            &Meter::new(),
            u64::MAX,
            None,
        );
        assert!(matches!(outcome, Outcome::Ended(5)), "{outcome:?}");
        assert_eq!(contents(dst), b"fresh");
        assert_eq!(pipe.queued(), Ok(0));
    }

    #[test]
    fn the_sink_probe_moves_no_byte() {
        let pipe = OwnPipe::new().unwrap();
        let dst = file_with(b"");
        assert_eq!(
            sys::sink_takes_splice(pipe.read.as_fd(), dst.as_fd()),
            Ok(())
        );
        assert_eq!(contents(dst), b"");
    }

    #[test]
    fn a_sink_failing_midway_leaves_the_pipe_empty() {
        // The peer is gone: the sink says EPIPE with a pipeful still queued.
        let (sink, peer) = UnixStream::pair().unwrap();
        drop(peer);
        let pipe = OwnPipe::new().unwrap();
        let src = file_with(&vec![7u8; 200_000]);
        let outcome = through(
            src.as_fd(),
            sink.as_fd(),
            &pipe,
            &Meter::new(),
            u64::MAX,
            None,
        );
        assert!(
            matches!(outcome, Outcome::Failed(0, Failure::Io(..))),
            "{outcome:?}"
        );
        assert_eq!(pipe.queued(), Ok(0));
    }
}
