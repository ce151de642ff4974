//! The drop-in flags that work on lines, not bytes: nc's `-C` (LF sent as CRLF) and `-i`
//! (a pause after each line sent), pv's `-l`/`-0` (lines counted, `-L` in lines a second).
//! They must see every byte, which no kernel path lets zerocat do: a thread of their own
//! reads the source, does what the flag asks, and writes into a pipe the engine then reads
//! as its source — by the userspace path, which the report names and says why
//! ([`crate::options::Options::userspace_because`]).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::PollFlags;

use crate::sys;

/// What the thread does to each line on its way.
#[derive(Debug, Clone, Default)]
pub struct Lines {
    /// The byte that ends a line: `\n`, or NUL (pv `-0`).
    pub end: u8,
    /// nc `-C`: a LF not already after a CR goes out as CRLF.
    pub crlf: bool,
    /// nc `-i SECS`: a pause after each whole line written.
    pub pause: Option<Duration>,
    /// pv `-l -L N`: at most N lines a second.
    pub per_second: Option<u64>,
    /// Whole lines passed so far (pv `-l`'s display reads it).
    pub counted: Arc<AtomicU64>,
}

impl Lines {
    /// Lines ended by `end`, passed as they are and counted.
    pub fn ended_by(end: u8) -> Lines {
        Lines {
            end,
            ..Lines::default()
        }
    }

    /// Starts the thread reading `src`; its output is the returned pipe's read end, which
    /// ends (EOF) when `src` does. A failed read or write ends it too: the engine then sees
    /// an early EOF, as nc and pv end at a read error.
    pub fn start(self, src: OwnedFd) -> std::io::Result<OwnedFd> {
        let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        std::thread::Builder::new()
            .name("zerocat-lines".into())
            .spawn(move || {
                let _ = self.pump(src.as_fd(), write_end.as_fd());
            })?;
        Ok(read_end)
    }

    /// Whether each line must be written alone (a pause, a pace, a rewrite after it).
    fn line_by_line(&self) -> bool {
        self.crlf || self.pause.is_some() || self.per_second.is_some()
    }

    fn pump(&self, src: BorrowedFd<'_>, dst: BorrowedFd<'_>) -> Result<(), Errno> {
        let started = Instant::now();
        let mut buf = vec![0u8; 64 * 1024];
        // The byte written last: a CR there means the LF that follows already has one.
        let mut last = 0u8;
        loop {
            let n = match sys::read(src, &mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(Errno::EINTR) if !sys::process::must_stop() => continue,
                Err(Errno::EAGAIN) => {
                    sys::wait(src, PollFlags::POLLIN)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let bytes = &buf[..n];
            if !self.line_by_line() {
                let ends = bytes.iter().filter(|&&b| b == self.end).count() as u64;
                sys::write_all(dst, bytes).map_err(|(_, e)| e)?;
                self.counted.fetch_add(ends, Ordering::Relaxed);
                continue;
            }
            for line in bytes.split_inclusive(|&b| b == self.end) {
                let whole = line.last() == Some(&self.end);
                if whole {
                    self.wait_for_pace(started);
                }
                let before_end = line.len() - usize::from(whole);
                let needs_cr = whole
                    && self.crlf
                    && self.end == b'\n'
                    && line[..before_end].last().unwrap_or(&last) != &b'\r';
                if needs_cr {
                    sys::write_all(dst, &line[..before_end]).map_err(|(_, e)| e)?;
                    sys::write_all(dst, b"\r\n").map_err(|(_, e)| e)?;
                } else {
                    sys::write_all(dst, line).map_err(|(_, e)| e)?;
                }
                last = *line.last().unwrap_or(&last);
                if whole {
                    self.counted.fetch_add(1, Ordering::Relaxed);
                    if let Some(pause) = self.pause {
                        std::thread::sleep(pause);
                    }
                }
            }
        }
    }

    /// pv `-l -L N`: line k (from 0) goes no sooner than k/N seconds after the start.
    fn wait_for_pace(&self, started: Instant) {
        let Some(rate) = self.per_second.filter(|&r| r > 0) else {
            return;
        };
        let k = self.counted.load(Ordering::Relaxed);
        let due = started + Duration::from_secs_f64(k as f64 / rate as f64);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn through(lines: Lines, input: &[u8]) -> (Vec<u8>, u64) {
        let counted = lines.counted.clone();
        let (r, w) = nix::unistd::pipe().unwrap();
        let out = lines.start(r).unwrap();
        let mut w = std::fs::File::from(w);
        w.write_all(input).unwrap();
        drop(w);
        let mut got = Vec::new();
        std::fs::File::from(out).read_to_end(&mut got).unwrap();
        (got, counted.load(Ordering::Relaxed))
    }

    #[test]
    fn crlf_adds_a_cr_where_none_is_and_counts_lines() {
        let lines = Lines {
            crlf: true,
            ..Lines::ended_by(b'\n')
        };
        let (got, n) = through(lines, b"a\nb\r\nc\n\nd");
        assert_eq!(got, b"a\r\nb\r\nc\r\n\r\nd");
        assert_eq!(n, 4);
    }

    #[test]
    fn nul_ended_lines_pass_unchanged_and_counted() {
        let (got, n) = through(Lines::ended_by(0), b"a\0b\0c");
        assert_eq!(got, b"a\0b\0c");
        assert_eq!(n, 2);
    }
}
