//! `--resume`: keep the destination's prefix when every byte of it matches the source's.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Instant;

use nix::unistd::Whence;

use super::entry::Entry;

/// The block `--resume` reads of the source and the destination at a time, comparing the
/// whole kept prefix.
const RESUME_CHECK: usize = 1 << 20;

/// Where the copy of a regular file starts. `resume`: after the destination's prefix when it
/// matches the source ([`resume_point`]), both fds seeked there; the time the check took
/// goes into `e`. Otherwise at 0, a non-empty destination truncated.
pub(super) fn start_offset(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    resume: bool,
    src_size: u64,
    dst_size: u64,
    e: &mut Entry,
) -> Result<u64, String> {
    let mut start = 0;
    if resume {
        let checking = Instant::now();
        start = resume_point(src, dst, src_size, dst_size);
        e.resume_check_seconds = Some(checking.elapsed().as_secs_f64());
    }
    if start == 0 && dst_size > 0 {
        nix::unistd::ftruncate(dst, 0).map_err(|err| format!("cannot truncate: {err}"))?;
    }
    if start > 0 {
        for fd in [src, dst] {
            nix::unistd::lseek(fd.as_raw_fd(), start as i64, Whence::SeekSet)
                .map_err(|err| format!("cannot seek to {start}: {err}"))?;
        }
    }
    e.resumed = start;
    Ok(start)
}

/// `--resume`: how much of the destination to keep. Its whole length when it is no longer
/// than the source and every byte of it matches the source's (compared in [`RESUME_CHECK`]
/// blocks); otherwise 0 (the destination is not trusted and is copied again from the start).
fn resume_point(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, src_size: u64, dst_size: u64) -> u64 {
    if dst_size == 0 || dst_size > src_size {
        return 0;
    }
    let mut a = vec![0u8; RESUME_CHECK];
    let mut b = vec![0u8; RESUME_CHECK];
    let mut offset = 0;
    while offset < dst_size {
        let len = (dst_size - offset).min(RESUME_CHECK as u64) as usize;
        let (a, b) = (&mut a[..len], &mut b[..len]);
        let full = |fd, buf: &mut [u8]| crate::sys::pread_full(fd, buf, offset) == Ok(len);
        if !(full(src, a) && full(dst, b) && a == b) {
            return 0;
        }
        offset += len as u64;
    }
    dst_size
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsFd;

    use super::resume_point;

    fn file(bytes: &[u8]) -> std::fs::File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    #[test]
    fn a_matching_prefix_is_kept_anything_else_is_copied_again() {
        let src = file(b"0123456789");
        let point = |dst: &[u8]| {
            let dst = file(dst);
            resume_point(src.as_fd(), dst.as_fd(), 10, dst.metadata().unwrap().len())
        };
        assert_eq!(point(b"0123"), 4);
        assert_eq!(point(b"0123456789"), 10);
        assert_eq!(point(b"0124"), 0, "a byte differs");
        assert_eq!(point(b"0123456789!"), 0, "longer than the source");
        assert_eq!(point(b""), 0);
    }
}
