//! One regular file: open the source, open the destination without O_TRUNC, refuse the
//! same file, truncate it or keep a verified prefix, then the data through the engine —
//! whole, or extent by extent for a sparse source.

use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::{FileStat, Mode};
use nix::unistd::Whence;

use super::atomic::Sink;
use super::entry::{Entry, Kind, SparseDetection, Status};
use super::meta::preserve_fd;
use super::resume::start_offset;
use super::verify::verify;
use super::{Copier, SparseMode};
use crate::engine::{self, DataPath, Ends, Failure, FileChain, Record, ReflinkMode, Side};
use crate::sys::fdkind::FdInfo;
use crate::sys::pipe::OwnPipe;

impl Copier<'_> {
    pub(super) fn copy_file(&mut self, src: &Path, dst: &Path) {
        // Named at the end, and only if it is shown or kept: a small file's copy is
        // short enough for two path copies to show in its profile.
        let mut e = Entry::new(Path::new(""), Path::new(""), Some(Kind::File));
        e.status = match self.copy_file_data(src, dst, &mut e) {
            Ok(()) => {
                self.totals.files += 1;
                Status::Copied
            }
            Err(status) => status,
        };
        if !self.shows(&e) {
            return self.tally(&e);
        }
        e.src = src.to_path_buf();
        e.dst = dst.to_path_buf();
        self.done(e);
    }

    /// Err: how the entry failed, or why it was skipped.
    fn copy_file_data(&mut self, src: &Path, dst: &Path, e: &mut Entry) -> Result<(), Status> {
        if self.last_was_empty {
            if let Some(done) = self.copy_empty_by_name(src, dst, e) {
                return done;
            }
        }
        let source = self
            .open_source(src, OFlag::empty())
            .map_err(|err| format!("cannot open for reading: {err}"))?;
        let sst = fstat(source.as_fd()).map_err(|err| format!("cannot stat: {err}"))?;
        let verify_against = self.cfg.verify.then_some(source.as_fd());
        // A FIFO or character device operand (cp copies what it reads): read once, so it can
        // be neither verified nor resumed. Said before the destination is touched.
        let stream = !matches!(
            sst.st_mode & nix::libc::S_IFMT,
            nix::libc::S_IFREG | nix::libc::S_IFBLK
        );
        if stream && self.cfg.verify {
            return Err(Status::Failed(
                "--verify reads the source twice; this one is a stream (a FIFO or a device) \
                 that can be read once: not copied (copy without --verify)"
                    .to_string(),
            ));
        }
        let (sink, created) = if self.cfg.atomic {
            (self.open_temporary(src, dst, &sst)?, false)
        } else {
            let (fd, created) = self.open_destination(dst, &sst)?;
            (Sink::InPlace(fd), created)
        };
        // From the fstat already made: a file zerocat opened itself needs no fcntl.
        let src_info = FdInfo::from_stat(&sst);
        // A file just created (O_EXCL) is empty, regular, not the source, and on its
        // directory's filesystem: no fstat (one of a small file's eight syscalls).
        // Only a regular file can keep holes, be truncated or be resumed (cp's rule): a
        // block device (FdKind::File too) keeps its old bytes where a hole is skipped.
        let (dst_info, dst_is_file) = match created.then(|| self.dst_dir(dst).map(|d| d.dev)) {
            Some(Some(dev)) => (FdInfo::created_file(dev), true),
            _ => {
                let st = fstat(sink.as_fd())
                    .map_err(|err| format!("cannot stat the destination: {err}"))?;
                (
                    FdInfo::from_stat(&st),
                    st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFREG,
                )
            }
        };
        if !created && src_info.identity == dst_info.identity {
            return Err(Status::Failed(format!(
                "'{}' and '{}' are the same file: refusing (destination untouched)",
                src.display(),
                dst.display()
            )));
        }
        let src_size = sst.st_size as u64;
        let pseudo = match self.pseudo.iter().find(|(dev, _)| *dev == sst.st_dev) {
            Some(&(_, pseudo)) => pseudo,
            None => {
                let pseudo = is_pseudo_file(source.as_fd());
                self.pseudo.push((sst.st_dev, pseudo));
                pseudo
            }
        };

        let start = if dst_is_file {
            let resume =
                self.cfg.resume && !pseudo && !stream && self.cfg.reflink != ReflinkMode::Always;
            let dst_size = dst_info.size.unwrap_or(0);
            start_offset(source.as_fd(), sink.as_fd(), resume, src_size, dst_size, e)?
        } else {
            0
        };

        let regular = sst.st_mode & nix::libc::S_IFMT == nix::libc::S_IFREG;
        self.last_was_empty = truly_empty(&sst, pseudo);
        if self.last_was_empty && start == 0 {
            // An empty file: no byte to move, so no path to choose or run (a million
            // empty files spent a quarter of their user time there).
            return self.close_file(verify_against, sink, &sst, None, dst_is_file, e);
        }
        let sizeless = src_size == 0 || pseudo;
        let mut chain = self.file_chain(&src_info, &dst_info, start == 0, sizeless)?;
        let devices = (sst.st_dev, dst_info.identity.0);
        if !self.refused.is_empty() {
            chain.leave_out(|path| self.refused.contains(&(devices, path)));
        }
        if chain.paths().contains(&DataPath::Splice) && self.middle.is_none() {
            self.middle = OwnPipe::new().ok();
        }
        // A pseudo file's st_size is not its length (sysfs says 4096, procfs 0 or a guess)
        // and it has no extents: it is read to its end, never walked or extended.
        let walk = dst_is_file
            && !pseudo
            && match self.cfg.sparse {
                SparseMode::Never => false,
                SparseMode::Auto => (sst.st_blocks as u64) * 512 < src_size,
                SparseMode::Always => true,
            };
        // Written whole from its start with a size known: its blocks can be reserved first
        // (never a sparse source's: its holes stay holes).
        let whole = !walk && dst_is_file && start == 0 && !sizeless;
        let ends = Ends {
            src: source.as_fd(),
            src_info,
            dst: sink.as_fd(),
            dst_info,
            reserve: if whole && src_size >= RESERVE_FROM {
                src_size
            } else {
                0
            },
            tap: None,
        };
        if walk {
            let sparse_source = (sst.st_blocks as u64) * 512 < src_size;
            e.sparse_detection = match (self.cfg.sparse, sparse_source) {
                (SparseMode::Always, _) if !chain.may_skip_zeros() => SparseDetection::SeekHole,
                (SparseMode::Always, true) => SparseDetection::SeekHoleZeros,
                (SparseMode::Always, false) => SparseDetection::Zeros,
                _ => SparseDetection::SeekHole,
            };
        }
        let syncer = self.start_syncer(sink.as_fd(), start, src_size);
        let failure = if start == src_size && start > 0 {
            None
        } else if walk {
            self.copy_extents(&ends, chain, start, e)
        } else {
            // A small regular file is copied up to the size it was opened with (as cpz and
            // xcp do): no last call to hear the EOF (one of its seven syscalls), and an
            // empty one takes no call at all. One that grows meanwhile is copied as it was
            // when opened; one that shrinks ends early (the paths' rule for a 0 short of
            // the size). A bigger file is copied to its EOF as cp does: there the call is
            // nothing beside the bytes. Not a pseudo file (its size says nothing) nor a
            // block device (st_size 0).
            let limit = if regular && !pseudo && src_size < SIZE_TRUSTED_BELOW {
                src_size.saturating_sub(start)
            } else {
                u64::MAX
            };
            let (record, failure) = engine::transfer_upto(
                &ends,
                chain.paths(),
                self.middle.as_ref(),
                &self.meter,
                limit,
            );
            e.record = record;
            failure
        };
        self.remember_refusals(devices, &e.record);
        if let Some(failure) = failure {
            return Err(failure_status(failure, &e.record));
        }
        if walk {
            // The holes at the end: the file is as long as its source.
            let size = fstat(source.as_fd())
                .map(|s| s.st_size)
                .unwrap_or(sst.st_size);
            nix::unistd::ftruncate(sink.as_fd(), size)
                .map_err(|err| format!("cannot set the size: {err}"))?;
        }
        self.close_file(verify_against, sink, &sst, syncer, dst_is_file, e)
    }

    /// A file in a tree, after an empty one: empty files come together (a tree of lock
    /// files, markers, `__init__.py`s, a million in issue 27's bench), so this one is
    /// stat'ed by name first, and when it is empty too, its copy is created without the
    /// source ever being opened: fstatat, openat, close — three syscalls where the usual
    /// way takes five (open, fstat, create, close, close) — and no file opened is also no
    /// file to close. None: not empty (the usual way follows, one fstatat more), or not a
    /// case this covers (a top-level operand, --atomic, --verify, --resume, a filesystem
    /// not seen yet or whose sizes say nothing, a destination that exists).
    fn copy_empty_by_name(
        &mut self,
        src: &Path,
        dst: &Path,
        e: &mut Entry,
    ) -> Option<Result<(), Status>> {
        if self.cfg.atomic || self.cfg.verify || self.cfg.resume {
            return None;
        }
        let (dir, name) = self.source_at(src)?;
        let sst =
            nix::sys::stat::fstatat(Some(dir), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                .ok()?;
        // A filesystem not seen yet counts as one whose sizes say nothing.
        let pseudo = !self.pseudo.contains(&(sst.st_dev, false));
        if !truly_empty(&sst, pseudo) {
            self.last_was_empty = false;
            return None;
        }
        let (parent, _, name) = self.at_parent(dst)?;
        // An error is met again, and said, the usual way (an existing file there is
        // checked there: -n, --update, the same file).
        let sink = create_new_at(parent, name, sst.st_mode, false).ok()?;
        Some(self.close_file(None, Sink::InPlace(sink), &sst, None, true, e))
    }

    /// [`FileChain::new`] for this file; the last one made again when what it depends on
    /// is the same (the kinds of both ends, where the copy starts, whether the size says
    /// anything: in a tree, nearly always).
    fn file_chain(
        &mut self,
        src: &FdInfo,
        dst: &FdInfo,
        from_start: bool,
        sizeless: bool,
    ) -> Result<FileChain, Status> {
        let key = (src.kind, dst.kind, from_start, sizeless);
        if let Some((made_for, chain)) = self.last_chain {
            if made_for == key {
                return Ok(chain);
            }
        }
        let chain = FileChain::new(
            src,
            dst,
            self.opts.via,
            self.cfg.reflink,
            from_start,
            sizeless,
            self.cfg.sparse == SparseMode::Never,
        )
        .map_err(|err| format!("--via: {err}"))?;
        self.last_chain = Some((key, chain));
        Ok(chain)
    }

    /// The bytes are in: synced, verified, metadata as asked, then closed (close(2) may
    /// report what the writes did not: NFS, quotas) and a temporary renamed over the
    /// destination.
    /// `verify_against`: the source, when --verify reads it again.
    fn close_file(
        &mut self,
        verify_against: Option<BorrowedFd<'_>>,
        sink: Sink,
        sst: &FileStat,
        syncer: Option<super::sync::Syncer>,
        dst_is_file: bool,
        e: &mut Entry,
    ) -> Result<(), Status> {
        self.sync_file(sink.as_fd(), e.record.bytes(), syncer)?;
        if let Some(source) = verify_against {
            verify(source, sink.as_fd(), dst_is_file, self.cfg.sync, e)?;
        }
        if self.cfg.preserve {
            preserve_fd(sink.as_fd(), sst).map_err(|err| format!("{err:#}"))?;
        }
        sink.finish(self.cfg.sync)?;
        Ok(())
    }

    /// Opens the destination for writing, not truncated yet. Err(Status::Skipped): it
    /// exists and `-n` or `--update` keeps it. The common case in a tree: it does not exist
    /// yet. O_EXCL creates it in one call (and refuses any symlink at that name); only when
    /// something is there do the checks run.
    /// The fd, and whether it was created (it did not exist).
    fn open_destination(&mut self, dst: &Path, sst: &FileStat) -> Result<(OwnedFd, bool), Status> {
        let src_mode = sst.st_mode;
        let resume = self.cfg.resume;
        let read_back = resume || self.cfg.verify;
        let created = match self.at_parent(dst) {
            Some((dir, _, name)) => create_new_at(dir, name, src_mode, read_back),
            None => create_new(dst, src_mode, read_back),
        };
        let err = match created {
            Ok(fd) => return Ok((fd, true)),
            Err(err) => err,
        };
        if err.kind() != io::ErrorKind::AlreadyExists {
            return Err(Status::Failed(format!("cannot open for writing: {err}")));
        }
        let m = fs::symlink_metadata(dst)
            .map_err(|err| format!("cannot stat the destination: {err}"))?;
        if let Some(why) = self.keeps_existing(dst, &m, (sst.st_mtime, sst.st_mtime_nsec)) {
            return Err(Status::Skipped(why));
        }
        if m.is_dir() {
            return Err(Status::Failed(
                "cannot overwrite a directory with a file".into(),
            ));
        }
        if self.cfg.remove_destination {
            if (m.dev(), m.ino()) == (sst.st_dev, sst.st_ino) {
                return Err(Status::Failed(
                    "it is the source itself: refusing (destination untouched)".into(),
                ));
            }
            fs::remove_file(dst).map_err(|err| format!("cannot remove: {err}"))?;
            return match self.at_parent(dst) {
                Some((dir, _, name)) => create_new_at(dir, name, src_mode, read_back),
                None => create_new(dst, src_mode, read_back),
            }
            .map(|fd| (fd, true))
            .map_err(|err| Status::Failed(format!("cannot open for writing: {err}")));
        }
        if m.file_type().is_symlink() {
            match fs::metadata(dst) {
                Ok(_) => {}
                // O_CREAT would create the link's target elsewhere (GNU cp refuses too,
                // with -f as well).
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    return Err(Status::Failed(
                        "not writing through a dangling symlink".into(),
                    ))
                }
                // A loop, an unreadable directory on the way: -f replaces the link, as
                // GNU cp's unlink after a failed open does.
                Err(_) if self.cfg.force => {}
                Err(err) => {
                    return Err(Status::Failed(format!(
                        "cannot follow the destination symlink: {err}"
                    )))
                }
            }
        }
        let sink = open_existing(dst, self.cfg.force, src_mode, read_back)
            .map_err(|err| format!("cannot open for writing: {err}"))?;
        Ok((sink, false))
    }

    /// The directory `dst` is in, opened once per directory (O_PATH): files are created
    /// relative to it, so no path is walked per file and a directory swapped for a
    /// symlink between two files is not followed. None: it cannot be opened (the caller
    /// goes by path and meets the error there).
    fn dst_dir(&mut self, dst: &Path) -> Option<&DstDir> {
        let parent = match super::path::split_name(dst) {
            Some((parent, _)) => parent,
            None => dst.parent()?,
        };
        // Bytes, not components: a tree's next file is most often in the same directory.
        let cached = self
            .dst_dir
            .as_ref()
            .is_some_and(|d| d.path.as_os_str() == parent.as_os_str());
        if !cached {
            let dir = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
            let fd = crate::sys::open_interruptible(None, dir, flags, Mode::empty()).ok()?;
            let dev = fstat(fd.as_fd()).ok()?.st_dev;
            self.dst_dir = Some(DstDir {
                path: parent.to_path_buf(),
                fd,
                dev,
            });
        }
        self.dst_dir.as_ref()
    }

    /// Where `dst` is made or opened relative to an fd: its directory held open (see
    /// [`Copier::dst_dir`]), that directory's st_dev, and `dst`'s name in it. None: by path.
    fn at_parent<'p>(&mut self, dst: &'p Path) -> Option<(RawFd, u64, &'p OsStr)> {
        let (_, name) = super::path::split_name(dst)?;
        let dir = self.dst_dir(dst)?;
        Some((dir.fd.as_raw_fd(), dir.dev, name))
    }

    /// Makes the directory `dst` (mkdirat at its parent's fd where that is open).
    pub(super) fn make_dir(&mut self, dst: &Path, mode: u32) -> io::Result<()> {
        let mode = Mode::from_bits_truncate(mode);
        match self.at_parent(dst) {
            Some((parent, _, name)) => nix::sys::stat::mkdirat(Some(parent), name, mode),
            None => nix::unistd::mkdir(dst, mode),
        }
        .map_err(io::Error::from)
    }

    /// Opens a destination directory the walk just made (`created`) or found, at its
    /// parent's fd, not following a symlink: its files are created at it. One it made is
    /// on its parent's filesystem (no stat).
    pub(super) fn open_made_dir(&mut self, dst: &Path, created: bool) -> io::Result<DstDir> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let (fd, parent_dev) = match self.at_parent(dst) {
            Some((parent, dev, name)) => (
                crate::sys::open_interruptible(Some(parent), Path::new(name), flags, Mode::empty()),
                Some(dev),
            ),
            None => (
                crate::sys::open_interruptible(None, dst, flags, Mode::empty()),
                None,
            ),
        };
        let fd = fd.map_err(io::Error::from)?;
        let dev = match parent_dev.filter(|_| created) {
            Some(dev) => dev,
            None => fstat(fd.as_fd()).map_err(io::Error::from)?.st_dev,
        };
        Ok(DstDir {
            path: dst.to_path_buf(),
            fd,
            dev,
        })
    }

    /// The data extents of the source from `start`, each through the engine; holes between
    /// them are skipped (and counted), the caller sets the final size.
    fn copy_extents(
        &mut self,
        ends: &Ends<'_>,
        mut chain: FileChain,
        start: u64,
        e: &mut Entry,
    ) -> Option<Failure> {
        let (src, dst) = (ends.src.as_raw_fd(), ends.dst.as_raw_fd());
        let skip_zeros = self.cfg.sparse == SparseMode::Always && chain.may_skip_zeros();
        let mut offset = start;
        loop {
            let data = match nix::unistd::lseek(src, offset as i64, Whence::SeekData) {
                Ok(d) => d as u64,
                Err(Errno::ENXIO) => {
                    // Only a hole (or nothing) is left up to the end.
                    let size = fstat(ends.src).map(|s| s.st_size as u64).unwrap_or(offset);
                    e.holes += size.saturating_sub(offset);
                    break;
                }
                Err(err) => return Some(Failure::of(err, Side::Source)),
            };
            let hole = match nix::unistd::lseek(src, data as i64, Whence::SeekHole) {
                Ok(h) => h as u64,
                Err(err) => return Some(Failure::of(err, Side::Source)),
            };
            e.holes += data - offset;
            if let Err(err) = nix::unistd::lseek(src, data as i64, Whence::SeekSet)
                .and_then(|_| nix::unistd::lseek(dst, data as i64, Whence::SeekSet))
            {
                return Some(Failure::of(err, Side::Either));
            }
            let len = hole - data;
            let mut zeros = 0;
            let (record, failure) = if skip_zeros {
                engine::transfer_skipping_zeros(ends, &self.meter, len, &mut zeros)
            } else {
                let middle = self.middle.as_ref();
                engine::transfer_upto(ends, chain.paths(), middle, &self.meter, len)
            };
            e.holes += zeros;
            // The zeros seeked over left the source too: not a sign the file shrank.
            let moved = record.bytes() + zeros;
            let cloned = record
                .paths
                .iter()
                .any(|&(p, n)| p == DataPath::Reflink && n > 0);
            e.record.merge(&record);
            if failure.is_some() || cloned || moved < len {
                // A clone took the whole file; fewer bytes than the extent: it shrank.
                if cloned {
                    e.holes = 0;
                }
                return failure;
            }
            chain.next_extent(&record);
            offset = hole;
        }
        None
    }

    /// Paths the kernel refused for reasons of the two filesystems are not asked again for
    /// the rest of the run between them.
    fn remember_refusals(&mut self, devices: (u64, u64), record: &Record) {
        for f in &record.fallbacks {
            let refusal = (devices, f.from);
            if engine::refuses_the_filesystems(f.reason) && !self.refused.contains(&refusal) {
                self.refused.push(refusal);
            }
        }
    }
}

/// The engine's failure as the entry's status, its message naming the side that failed.
fn failure_status(failure: Failure, record: &Record) -> Status {
    let (err, side) = match failure {
        Failure::Interrupted => return Status::Interrupted,
        Failure::Io(err, side) => (err, side),
    };
    Status::Failed(
        if let Some(f) = record.fallbacks.iter().find(|f| f.to.is_none()) {
            format!("the kernel refused {}: {err}", f.from)
        } else {
            match side {
                Side::Source => format!("cannot read: {err}"),
                Side::Sink => format!("cannot write: {err}"),
                Side::Either => format!("cannot copy: {err}"),
            }
        },
    )
}

/// Files from this size get their blocks reserved before they are written (the engine's
/// walk, `Ends::reserve`). Measured on ext4 (`bench/NOTEBOOK.md#copy-reserved-blocks`,
/// bench/reserve.c): 800 files of 1 MiB in 683 ms instead of 844 (medians of 6); below
/// that nothing was measured to pay, and a small file keeps its seven syscalls.
const RESERVE_FROM: u64 = 1 << 20;

fn fstat(fd: BorrowedFd<'_>) -> nix::Result<FileStat> {
    nix::sys::stat::fstat(fd.as_raw_fd())
}

/// Creates the destination (O_EXCL) with the source's permission bits, as cp does (the
/// umask applies). `read_back`: `--resume` and `--verify` read the destination, hence O_RDWR.
/// Below this size a regular file is copied to the size it was opened with, not to EOF.
const SIZE_TRUSTED_BELOW: u64 = 1 << 20;

/// A destination directory held open: see [`Copier::dst_dir`].
pub(super) struct DstDir {
    pub(super) path: std::path::PathBuf,
    fd: OwnedFd,
    dev: u64,
}

/// [`create_new`] relative to the directory `dir`: `name` is one path component.
/// A regular file whose size says 0 and is believed: not a pseudo file (`pseudo`), whose
/// size says nothing.
fn truly_empty(st: &FileStat, pseudo: bool) -> bool {
    st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFREG && !pseudo && st.st_size == 0
}

fn create_new_at(dir: RawFd, name: &OsStr, src_mode: u32, read_back: bool) -> io::Result<OwnedFd> {
    let access = if read_back {
        OFlag::O_RDWR
    } else {
        OFlag::O_WRONLY
    };
    let flags = access | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC;
    let mode = Mode::from_bits_truncate(src_mode & 0o777);
    crate::sys::open_interruptible(Some(dir), Path::new(name), flags, mode).map_err(io::Error::from)
}

fn create_new(dst: &Path, src_mode: u32, read_back: bool) -> io::Result<OwnedFd> {
    OpenOptions::new()
        .write(true)
        .read(read_back)
        .create_new(true)
        .mode(src_mode & 0o777)
        .open(dst)
        .map(OwnedFd::from)
}

/// Opens an existing destination for writing *without* O_TRUNC: the same-file check comes
/// first. `-f`: one that cannot be opened is removed and created anew.
fn open_existing(dst: &Path, force: bool, src_mode: u32, read_back: bool) -> io::Result<OwnedFd> {
    let access = if read_back {
        OFlag::O_RDWR
    } else {
        OFlag::O_WRONLY
    };
    let flags = access | OFlag::O_CREAT | OFlag::O_CLOEXEC;
    let mode = Mode::from_bits_truncate(src_mode & 0o777);
    let opened = crate::sys::open_interruptible(None, dst, flags, mode).map_err(io::Error::from);
    match opened {
        Err(e) if force => {
            fs::remove_file(dst).map_err(|_| e)?;
            create_new(dst, src_mode, read_back)
        }
        other => other,
    }
}

/// A file of procfs or sysfs, whose st_size and st_blocks say nothing of its bytes.
fn is_pseudo_file(fd: BorrowedFd<'_>) -> bool {
    use nix::sys::statfs::{fstatfs, PROC_SUPER_MAGIC, SYSFS_MAGIC};
    fstatfs(fd).is_ok_and(|fs| {
        let t = fs.filesystem_type();
        t == PROC_SUPER_MAGIC || t == SYSFS_MAGIC
    })
}
