//! `--sync`: each file is fdatasync'ed before it counts as done, and the progress bar shows
//! bytes on disk (pv's `--sync` habit), not bytes in the page cache.
//!
//! The bar then reads a counter of its own ([`Copier::on_disk`]): a file's bytes join it
//! when its fdatasync returns. A large file is not one jump at its end: while it is copied,
//! a thread calls fdatasync on it every [`SYNC_EVERY`] and credits what was written before
//! that call began (the destination's file offset, which every path advances).

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::unistd::Whence;

use super::Copier;
use crate::engine::meter::Meter;

/// How often a file being copied is synced for the bar.
const SYNC_EVERY: Duration = Duration::from_millis(250);

/// A file shorter than this is only synced at its end (a thread per file costs more).
const SYNC_WHILE_COPYING: u64 = 16 << 20;

/// The thread that syncs one file while it is copied.
pub(super) struct Syncer {
    stop: Arc<AtomicBool>,
    credited: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Copier<'_> {
    /// With `--sync` and a bar for a file of more than [`SYNC_WHILE_COPYING`] bytes from
    /// `start`: a [`Syncer`] on a duplicate of `dst` (which shares its offset).
    pub(super) fn start_syncer(&self, dst: BorrowedFd<'_>, start: u64, len: u64) -> Option<Syncer> {
        let on_disk = Arc::clone(self.on_disk.as_ref()?);
        if !self.opts.progress || len.saturating_sub(start) < SYNC_WHILE_COPYING {
            return None;
        }
        let fd: OwnedFd = dst.try_clone_to_owned().ok()?;
        let stop = Arc::new(AtomicBool::new(false));
        let credited = Arc::new(AtomicU64::new(0));
        let (halt, counted) = (Arc::clone(&stop), Arc::clone(&credited));
        let thread = std::thread::Builder::new()
            .name("zerocat-sync".into())
            .spawn(move || loop {
                std::thread::park_timeout(SYNC_EVERY);
                if halt.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(at) = nix::unistd::lseek(fd.as_raw_fd(), 0, Whence::SeekCur) else {
                    return;
                };
                if nix::unistd::fdatasync(fd.as_raw_fd()).is_err() {
                    return;
                }
                let written = (at as u64).saturating_sub(start);
                let before = counted.fetch_max(written, Ordering::Relaxed);
                on_disk.add(written.saturating_sub(before));
            })
            .ok()?;
        Some(Syncer {
            stop,
            credited,
            thread: Some(thread),
        })
    }

    /// `--sync`: fdatasync of the finished file, then its `bytes` count on the bar (less
    /// what `syncer` already counted). Without `--sync`, nothing.
    pub(super) fn sync_file(
        &self,
        dst: BorrowedFd<'_>,
        bytes: u64,
        syncer: Option<Syncer>,
    ) -> Result<(), String> {
        let credited = syncer.map_or(0, Syncer::stop);
        let Some(on_disk) = &self.on_disk else {
            return Ok(());
        };
        datasync(dst).map_err(|err| format!("cannot sync: {err}"))?;
        on_disk.add(bytes.saturating_sub(credited));
        Ok(())
    }
}

impl Syncer {
    /// Stops the thread (woken at once, or done with the fdatasync it is in); the bytes it
    /// counted.
    fn stop(mut self) -> u64 {
        self.halt();
        self.credited.load(Ordering::Relaxed)
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// A file that failed stops its syncer too: it counts nothing more.
impl Drop for Syncer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// fdatasync, again after EINTR.
pub(super) fn datasync(fd: BorrowedFd<'_>) -> nix::Result<()> {
    loop {
        match nix::unistd::fdatasync(fd.as_raw_fd()) {
            Err(nix::errno::Errno::EINTR) => {}
            other => return other,
        }
    }
}

/// A meter for the bar under `--sync`: bytes on disk.
pub(super) fn on_disk_meter(sync: bool) -> Option<Arc<Meter>> {
    sync.then(|| Arc::new(Meter::new()))
}
