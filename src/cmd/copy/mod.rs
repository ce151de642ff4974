//! `zerocat copy SRC DST`, `copy SRC... DIR`, `copy -r TREE DST`: files and trees, the way
//! `cp` users expect, along reflink -> copy_file_range -> splice -> userspace.
//!
//! Per file: open the source; open the destination *without* O_TRUNC; refuse when both are
//! the same inode (same path, hard link, symlink, /proc/self/fd/N) with the destination
//! untouched; only then truncate (or keep a verified prefix under `--resume`). Sparse sources
//! are walked extent by extent (SEEK_DATA/SEEK_HOLE), each extent through the engine's one
//! chain walker; holes are left by the final ftruncate. In a tree, one failed entry is
//! reported and the rest continue; the run exits 1 with the count.
//!
//! Report: a total line always (unless -q), one line per entry with -v; `--stats json` has
//! the totals, every path with its bytes, holes skipped, bytes resumed, and one object per
//! entry in `entries` (always: scripts get what failed and why without -v).

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use anyhow::Context;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::{FileStat, Mode, SFlag};
use nix::unistd::Whence;

use crate::cmd::pipe::{self, PipeConfig};
use crate::endpoint::{Endpoint, FileOpts};
use crate::engine::meter::Meter;
use crate::engine::{self, DataPath, Ends, Failure, Reason, Record, ReflinkMode};
use crate::exit::{ExitCode, UsageError};
use crate::options::Options;
use crate::progress::{self, ProgressGuard, Watch};
use crate::report::{self, json_array, json_string, JsonObject, StatsFormat};
use crate::sys::fdkind::{FdInfo, FdKind};
use crate::sys::pipe::OwnPipe;
use crate::units::{human_bytes, human_duration};

/// `--sparse`: where the copy has holes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SparseMode {
    /// Holes of a sparse source (fewer blocks than its size) stay holes.
    #[default]
    Auto,
    /// Also turn runs of zeros (whole 4 KiB blocks) into holes; the data is read in
    /// userspace to find them.
    Always,
    /// Write every byte, holes as zeros.
    Never,
}

#[derive(Debug, Clone)]
pub struct CopyConfig {
    pub sources: Vec<Endpoint>,
    pub dest: Endpoint,
    pub recursive: bool,
    pub no_clobber: bool,
    pub force: bool,
    pub preserve: bool,
    pub reflink: ReflinkMode,
    pub sparse: SparseMode,
    pub resume: bool,
    /// Recreate FIFOs and device nodes (mknod) instead of refusing them.
    pub special: bool,
}

/// The block `--resume` reads of the source and the destination at a time, comparing the
/// whole kept prefix.
const RESUME_CHECK: usize = 1 << 20;

pub fn run(opts: &Options, cfg: &CopyConfig) -> anyhow::Result<ExitCode> {
    let operands: Vec<&Endpoint> = cfg.sources.iter().chain([&cfg.dest]).collect();
    let plain = |e: &Endpoint| match e {
        Endpoint::File { path, opts } if *opts == FileOpts::default() => Some(path.clone()),
        _ => None,
    };
    if operands.iter().any(|e| plain(e).is_none()) {
        // A stream or a file with options (`append`, `excl`, `mode=`): what `pipe` does.
        if cfg.sources.len() == 1 {
            let pipe_cfg = PipeConfig {
                src: cfg.sources[0].clone(),
                dst: cfg.dest.clone(),
            };
            return pipe::run(opts, &pipe_cfg);
        }
        return Err(UsageError(
            "copy with several sources takes plain file paths only".to_string(),
        )
        .into());
    }
    let sources: Vec<PathBuf> = cfg.sources.iter().filter_map(plain).collect();
    let dest = plain(&cfg.dest).expect("checked above");
    if matches!(
        opts.via,
        engine::Via::Forced(DataPath::Tee | DataPath::Sendfile)
    ) {
        return Err(UsageError(format!(
            "--via {}: copy moves files with reflink, copy_file_range, splice or userspace",
            match opts.via {
                engine::Via::Forced(p) => p.name(),
                engine::Via::Auto => "auto",
            }
        ))
        .into());
    }
    let dest_is_dir = fs::metadata(&dest).map(|m| m.is_dir()).unwrap_or(false);
    if sources.len() > 1 && !dest_is_dir {
        return Err(UsageError(format!(
            "target '{}' is not a directory (copying several sources needs one)",
            dest.display()
        ))
        .into());
    }

    let mut copier = Copier::new(opts, cfg);
    let chain = engine::chain_for_copy(
        &FdInfo::assumed(FdKind::File),
        &FdInfo::assumed(FdKind::File),
        opts.via,
        cfg.reflink,
    )
    .map_err(|e| UsageError(format!("--via: {e}")))?;
    opts.print_plan(&format!(
        "plan: copy {} -> '{}'{}: per file via {}; sparse {}{}{}",
        sources
            .iter()
            .map(|s| format!("'{}'", s.display()))
            .collect::<Vec<_>>()
            .join(" "),
        dest.display(),
        if cfg.recursive { " (recursive)" } else { "" },
        pipe::chain_words(&chain),
        format!("{:?}", cfg.sparse).to_lowercase(),
        if cfg.resume { ", resume" } else { "" },
        crate::engine::meter::plan_words(opts.limit),
    ));
    if opts.explain {
        return Ok(ExitCode::Success);
    }

    let started = Instant::now();
    copier.start_progress(&sources);
    // Two operands with one name into a directory: the second would overwrite what this run
    // just made. Refused, as cp does ("will not overwrite just-created").
    let mut made: HashSet<PathBuf> = HashSet::new();
    for src in &sources {
        if crate::sys::process::interrupted() {
            break;
        }
        let target = if dest_is_dir {
            match src.file_name() {
                Some(name) => dest.join(name),
                None => {
                    copier.fail(src, &dest, "entry", "it has no name to give a copy".into());
                    continue;
                }
            }
        } else {
            dest.clone()
        };
        if !made.insert(target.clone()) {
            copier.fail(
                src,
                &target,
                "entry",
                format!(
                    "will not overwrite just-created '{}' with '{}'",
                    target.display(),
                    src.display()
                ),
            );
            continue;
        }
        copier.copy_top(src, &target);
    }
    let seconds = started.elapsed().as_secs_f64();
    copier.finish(&sources, &dest, seconds)
}

/// What a copy will move, for the progress bar's totals.
#[derive(Debug, Default, Clone, Copy)]
struct Survey {
    files: u64,
    bytes: u64,
}

/// Walks the sources as the copy will (operands followed unless `-r`, trees only with
/// `-r`, symlinks not followed inside them), on a thread of its own, and sets `totals`:
/// the regular files and their bytes (the allocated ones for a sparse file whose holes
/// are kept). What cannot be read counts for nothing; the copy reports it. Returns the
/// flag that stops the walk, or None when no thread could be started.
fn survey_in_background(
    sources: &[PathBuf],
    cfg: &CopyConfig,
    totals: &Arc<OnceLock<Survey>>,
) -> Option<Arc<AtomicBool>> {
    struct Walk {
        sparse: SparseMode,
        stop: Arc<AtomicBool>,
        found: Survey,
    }
    impl Walk {
        fn file(&mut self, meta: &fs::Metadata) {
            let data = match self.sparse {
                SparseMode::Never => meta.len(),
                _ => meta.len().min(meta.blocks() * 512),
            };
            self.found.files += 1;
            self.found.bytes += data;
        }
        fn dir(&mut self, dir: &FsPath) {
            let Ok(listing) = fs::read_dir(dir) else {
                return;
            };
            for item in listing.flatten() {
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
                match item.file_type() {
                    Ok(ft) if ft.is_dir() => self.dir(&item.path()),
                    Ok(ft) if ft.is_file() => {
                        if let Ok(meta) = item.metadata() {
                            self.file(&meta);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut walk = Walk {
        sparse: cfg.sparse,
        stop: Arc::clone(&stop),
        found: Survey::default(),
    };
    let (sources, recursive, totals) = (sources.to_vec(), cfg.recursive, Arc::clone(totals));
    std::thread::Builder::new()
        .name("zerocat-survey".into())
        .spawn(move || {
            for src in &sources {
                let meta = if recursive {
                    fs::symlink_metadata(src)
                } else {
                    fs::metadata(src)
                };
                match meta {
                    Ok(m) if m.is_file() => walk.file(&m),
                    Ok(m) if m.is_dir() && recursive => walk.dir(src),
                    _ => {}
                }
            }
            if !walk.stop.load(Ordering::Relaxed) {
                let _ = totals.set(walk.found);
            }
        })
        .ok()?;
    Some(stop)
}

/// What happened to one entry of the copy.
#[derive(Debug, Default)]
struct Entry {
    src: PathBuf,
    dst: PathBuf,
    kind: &'static str,
    record: Record,
    holes: u64,
    resumed: u64,
    /// `--resume`: how long comparing the destination with the source took, when it ran.
    resume_check_seconds: Option<f64>,
    /// `-n` and the destination existed.
    skipped: bool,
    error: Option<String>,
}

#[derive(Debug, Default)]
struct Totals {
    record: Record,
    holes: u64,
    resumed: u64,
    resume_check_seconds: f64,
    files: u64,
    dirs: u64,
    symlinks: u64,
    specials: u64,
    skipped: u64,
    failed: u64,
}

struct Copier<'a> {
    opts: &'a Options,
    cfg: &'a CopyConfig,
    totals: Totals,
    entries: Vec<Entry>,
    /// (source st_dev, destination st_dev, path) the kernel refused with an errno that is
    /// about the filesystems, not the file: not tried again this run (std probes once too).
    refused: HashSet<(u64, u64, DataPath)>,
    middle: Option<OwnPipe>,
    /// One for the whole run: `--limit` paces the copy, not each file.
    meter: Arc<Meter>,
    /// Regular files done (copied, skipped or failed), for the progress line.
    files_done: Arc<AtomicU64>,
    progress: Option<ProgressGuard>,
    /// Set to stop the walk for the totals when the copy ends first.
    survey: Option<Arc<AtomicBool>>,
    interrupted: bool,
    /// The directories `-r` is listing, innermost last, each with its open fd: an entry is
    /// opened relative to its directory (openat), so a path component swapped for a
    /// symlink meanwhile cannot redirect the copy.
    walk: Vec<(PathBuf, OwnedFd)>,
}

impl<'a> Copier<'a> {
    fn new(opts: &'a Options, cfg: &'a CopyConfig) -> Copier<'a> {
        Copier {
            opts,
            cfg,
            totals: Totals::default(),
            entries: Vec::new(),
            refused: HashSet::new(),
            middle: None,
            meter: progress::meter(opts),
            files_done: Arc::new(AtomicU64::new(0)),
            progress: None,
            survey: None,
            interrupted: false,
            walk: Vec::new(),
        }
    }

    /// Starts the progress thread: "bytes / total, 12/40 files" with a bar, "12 files
    /// done" on SIGUSR1 without one. The totals come from a walk of the sources on a
    /// thread of its own (xcp's way), made only for the bar: it costs a stat per file
    /// (~12 ms for 10,000 files, warm), which the copy does not wait for.
    fn start_progress(&mut self, sources: &[PathBuf]) {
        let done = Arc::clone(&self.files_done);
        let files_done = move || {
            let n = done.load(Ordering::Relaxed);
            format!("{n} file{} done", if n == 1 { "" } else { "s" })
        };
        let mut watch = Watch::new(&self.meter);
        if self.opts.progress {
            let totals = Arc::new(OnceLock::new());
            self.survey = survey_in_background(sources, self.cfg, &totals);
            let known = Arc::clone(&totals);
            let done = Arc::clone(&self.files_done);
            watch = watch
                .total_from(move || known.get().map(|s: &Survey| s.bytes))
                .status(move || match totals.get() {
                    Some(s) => format!("{}/{} files", done.load(Ordering::Relaxed), s.files),
                    None => files_done(),
                });
        } else {
            watch = watch.status(files_done);
        }
        self.progress = Some(watch.start(self.opts));
    }

    /// Prints a line on stderr, above the bar when one is drawn.
    fn say(&self, line: String) {
        match &self.progress {
            Some(progress) => progress.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// One operand: follows a symlink unless copying recursively (cp's -r implies -P).
    fn copy_top(&mut self, src: &FsPath, dst: &FsPath) {
        let meta = if self.cfg.recursive {
            fs::symlink_metadata(src)
        } else {
            fs::metadata(src)
        };
        let meta = match meta {
            Ok(m) => m,
            Err(e) => return self.fail(src, dst, "entry", format!("cannot stat: {e}")),
        };
        if meta.is_dir() {
            if !self.cfg.recursive {
                return self.fail(src, dst, "dir", "is a directory (use -r)".into());
            }
            if let Some(why) = inside_itself(src, dst) {
                return self.fail(src, dst, "dir", why);
            }
        }
        self.copy_entry(src, dst, Kind::of(meta.file_type()));
    }

    fn copy_entry(&mut self, src: &FsPath, dst: &FsPath, kind: Kind) {
        if crate::sys::process::interrupted() {
            self.interrupted = true;
            return;
        }
        match kind {
            Kind::Dir => self.copy_dir(src, dst),
            Kind::Symlink => self.copy_symlink(src, dst),
            Kind::File => self.copy_file(src, dst),
            Kind::Fifo | Kind::Socket | Kind::Device => self.copy_special(src, dst, kind),
        }
    }

    /// Directories are created before their entries (owner rwx while filling) and get their
    /// mode after them. The source is opened with O_NOFOLLOW (see [`Copier::open_source`]),
    /// listed from that fd, and its entries are opened at it.
    fn copy_dir(&mut self, src: &FsPath, dst: &FsPath) {
        let opened = self
            .open_source(src, OFlag::O_DIRECTORY)
            .and_then(|dir| Ok((dir.metadata()?, dir)));
        let (meta, dir) = match opened {
            Ok(m) => m,
            Err(e) => return self.fail(src, dst, "dir", format!("cannot open directory: {e}")),
        };
        let existing = match fs::symlink_metadata(dst) {
            Ok(m) if m.is_dir() => Some(m.mode() & 0o7777),
            Ok(_) => {
                return self.fail(
                    src,
                    dst,
                    "dir",
                    "cannot overwrite a non-directory with a directory".into(),
                )
            }
            Err(_) => {
                if let Err(e) = fs::DirBuilder::new()
                    .mode(meta.mode() & 0o777 | 0o700)
                    .create(dst)
                {
                    return self.fail(src, dst, "dir", format!("cannot create directory: {e}"));
                }
                None
            }
        };
        // The listing reads its own duplicate; `walk` keeps the fd the entries are opened at.
        let listing = nix::unistd::dup(dir.as_raw_fd()).and_then(nix::dir::Dir::from_fd);
        let mut listing = match listing {
            Ok(l) => l,
            Err(e) => return self.fail(src, dst, "dir", format!("cannot read directory: {e}")),
        };
        self.walk.push((src.to_path_buf(), OwnedFd::from(dir)));
        self.copy_listing(&mut listing, src, dst);
        self.walk.pop();
        if self.interrupted {
            return;
        }
        let mut entry = entry(src, dst, "dir");
        if let Err(e) = self.dir_metadata(dst, &meta, existing) {
            entry.error = Some(format!("{e:#}"));
        }
        self.totals.dirs += 1;
        self.done(entry);
    }

    fn copy_listing(&mut self, listing: &mut nix::dir::Dir, src: &FsPath, dst: &FsPath) {
        for item in listing.iter() {
            if self.interrupted {
                return;
            }
            let item = match item {
                Ok(i) => i,
                Err(e) => {
                    self.fail(src, dst, "dir", format!("cannot read directory: {e}"));
                    break;
                }
            };
            let name = std::ffi::OsStr::from_bytes(item.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let (from, to) = (src.join(name), dst.join(name));
            // d_type where the filesystem gives it, lstat where it says DT_UNKNOWN.
            let kind = match item.file_type() {
                Some(t) => Kind::of_dirent(t),
                None => match fs::symlink_metadata(&from) {
                    Ok(m) => Kind::of(m.file_type()),
                    Err(e) => {
                        self.fail(&from, &to, "entry", format!("cannot stat: {e}"));
                        continue;
                    }
                },
            };
            self.copy_entry(&from, &to, kind);
        }
    }

    /// Opens a source to read. Without `-r` an operand is followed (cp's rule). Under `-r`
    /// what was found as a file or directory is opened with O_NOFOLLOW, and an entry of a
    /// directory being listed relative to that directory's fd: a symlink swapped in since,
    /// at the entry or at a component of its path, is not followed.
    fn open_source(&self, src: &FsPath, flags: OFlag) -> io::Result<fs::File> {
        let mut flags = flags | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        if self.cfg.recursive {
            flags |= OFlag::O_NOFOLLOW;
        }
        let at = match (self.walk.last(), src.parent(), src.file_name()) {
            (Some((dir, fd)), Some(parent), Some(name)) if parent == dir => {
                Some((fd.as_raw_fd(), name))
            }
            _ => None,
        };
        let (dir, path) = match at {
            Some((dirfd, name)) => (Some(dirfd), FsPath::new(name)),
            None => (None, src),
        };
        crate::sys::open_interruptible(dir, path, flags, Mode::empty())
            .map(fs::File::from)
            .map_err(io::Error::from)
    }

    /// A directory's mode, once its entries are in. Like cp: without `--preserve` only a
    /// directory the copy created gets one (the source's, through the umask); an existing
    /// one keeps its own. `--preserve` sets the source's exact mode on an existing one too
    /// (cp -p), and prints a warning naming both modes when that opens it to anyone.
    fn dir_metadata(
        &mut self,
        dst: &FsPath,
        meta: &fs::Metadata,
        existing: Option<u32>,
    ) -> anyhow::Result<()> {
        if !self.cfg.preserve {
            return match existing {
                Some(_) => Ok(()),
                None => chmod_path(dst, meta.mode() & 0o777 & !umask()),
            };
        }
        let owner_kept = chown_path(dst, meta)?;
        let mode = preserved_mode(meta.mode(), owner_kept);
        if let Some(old) = existing.filter(|old| mode & !old != 0) {
            self.say(format!(
                "zerocat: warning: '{}': mode {old:04o} -> {mode:04o} (--preserve: the source's mode opens an existing directory)",
                dst.display()
            ));
        }
        chmod_path(dst, mode)?;
        times_path(dst, meta)
    }

    fn copy_symlink(&mut self, src: &FsPath, dst: &FsPath) {
        let target = match fs::read_link(src) {
            Ok(t) => t,
            Err(e) => return self.fail(src, dst, "symlink", format!("cannot read link: {e}")),
        };
        if fs::symlink_metadata(dst).is_ok() {
            if self.cfg.no_clobber {
                return self.skip(src, dst, "symlink");
            }
            if let Err(e) = fs::remove_file(dst) {
                return self.fail(src, dst, "symlink", format!("cannot replace: {e}"));
            }
        }
        if let Err(e) = std::os::unix::fs::symlink(&target, dst) {
            return self.fail(src, dst, "symlink", format!("cannot create symlink: {e}"));
        }
        let mut entry = entry(src, dst, "symlink");
        if self.cfg.preserve {
            if let Ok(meta) = fs::symlink_metadata(src) {
                if let Err(e) = preserve_path(dst, &meta, false) {
                    entry.error = Some(format!("{e:#}"));
                }
            }
        }
        self.totals.symlinks += 1;
        self.done(entry);
    }

    fn copy_special(&mut self, src: &FsPath, dst: &FsPath, kind: Kind) {
        let what = match kind {
            Kind::Fifo => "fifo",
            Kind::Socket => "socket",
            _ => "device",
        };
        if !self.cfg.special || kind == Kind::Socket {
            return self.fail(
                src,
                dst,
                what,
                format!("is a {what}: not copied (--special recreates FIFOs and device nodes)"),
            );
        }
        if fs::symlink_metadata(dst).is_ok() {
            if self.cfg.no_clobber {
                return self.skip(src, dst, what);
            }
            let _ = fs::remove_file(dst);
        }
        let made = fs::symlink_metadata(src)
            .map_err(anyhow::Error::from)
            .and_then(|m| {
                nix::sys::stat::mknod(
                    dst,
                    SFlag::from_bits_truncate(m.mode() & SFlag::S_IFMT.bits()),
                    Mode::from_bits_truncate(m.mode() & 0o777),
                    m.rdev(),
                )?;
                // The umask applied (cp's rule without -p). --preserve then sets the exact mode
                // by path, not following a symlink: a FIFO cannot be opened for an fchmod
                // without blocking, and setting the umask to 0 around mknod would change it
                // for the whole process (the progress threads included).
                if self.cfg.preserve {
                    preserve_path(dst, &m, true)?;
                }
                Ok(())
            });
        match made {
            Ok(()) => {
                self.totals.specials += 1;
                self.done(entry(src, dst, what));
            }
            Err(e) => self.fail(src, dst, what, format!("cannot create: {e:#}")),
        }
    }

    fn copy_file(&mut self, src: &FsPath, dst: &FsPath) {
        let mut e = entry(src, dst, "file");
        match self.copy_file_data(src, dst, &mut e) {
            Ok(true) => {
                self.totals.files += 1;
                self.done(e);
            }
            Ok(false) => self.skip(src, dst, "file"),
            Err(message) => {
                e.error = Some(message);
                self.done(e);
            }
        }
    }

    /// Ok(false): skipped under `-n`. Err: the message for this entry.
    fn copy_file_data(
        &mut self,
        src: &FsPath,
        dst: &FsPath,
        e: &mut Entry,
    ) -> Result<bool, String> {
        let source = self
            .open_source(src, OFlag::empty())
            .map_err(|err| format!("cannot open for reading: {err}"))?;
        let sst = fstat(source.as_fd()).map_err(|err| format!("cannot stat: {err}"))?;
        // The common case in a tree: the destination does not exist yet. O_EXCL creates it
        // in one call (and refuses any symlink at that name); only when something is there
        // do the checks run.
        let sink = match create_new(dst, sst.st_mode, self.cfg.resume) {
            Ok(fd) => fd,
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                let m = fs::symlink_metadata(dst)
                    .map_err(|err| format!("cannot stat the destination: {err}"))?;
                if self.cfg.no_clobber {
                    return Ok(false);
                }
                if m.is_dir() {
                    return Err("cannot overwrite a directory with a file".into());
                }
                if m.file_type().is_symlink() && fs::metadata(dst).is_err() {
                    // O_CREAT would create the link's target elsewhere (GNU cp refuses too).
                    return Err("not writing through a dangling symlink".into());
                }
                open_existing(dst, self.cfg.force, sst.st_mode, self.cfg.resume)
                    .map_err(|err| format!("cannot open for writing: {err}"))?
            }
            Err(err) => return Err(format!("cannot open for writing: {err}")),
        };
        // From the fstat already made: a file zerocat opened itself needs no fcntl.
        let src_info = FdInfo::from_stat(&sst);
        let dst_st =
            fstat(sink.as_fd()).map_err(|err| format!("cannot stat the destination: {err}"))?;
        let dst_info = FdInfo::from_stat(&dst_st);
        if src_info.identity == dst_info.identity {
            return Err(format!(
                "'{}' and '{}' are the same file: refusing (destination untouched)",
                src.display(),
                dst.display()
            ));
        }
        let src_size = sst.st_size as u64;
        let pseudo = is_pseudo_file(source.as_fd());
        // Only a regular file can keep holes, be truncated or be resumed (cp's rule): a block
        // device (FdKind::File too) keeps its old bytes where a hole is skipped.
        let dst_is_file = dst_st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFREG;
        let dst_size = dst_info.size.unwrap_or(0);

        let mut start = 0;
        if self.cfg.resume && dst_is_file && !pseudo && self.cfg.reflink != ReflinkMode::Always {
            let checking = Instant::now();
            start = resume_point(source.as_fd(), sink.as_fd(), src_size, dst_size);
            e.resume_check_seconds = Some(checking.elapsed().as_secs_f64());
        }
        if start == 0 && dst_is_file && dst_size > 0 {
            nix::unistd::ftruncate(sink.as_fd(), 0)
                .map_err(|err| format!("cannot truncate: {err}"))?;
        }
        if start > 0 {
            for fd in [source.as_fd(), sink.as_fd()] {
                nix::unistd::lseek(fd.as_raw_fd(), start as i64, Whence::SeekSet)
                    .map_err(|err| format!("cannot seek to {start}: {err}"))?;
            }
        }
        e.resumed = start;

        let mut chain =
            engine::chain_for_copy(&src_info, &dst_info, self.opts.via, self.cfg.reflink)
                .map_err(|err| format!("--via: {err}"))?;
        let forced = chain.len() == 1;
        if !forced {
            // A clone replaces the whole file: not for the rest of a resumed one. A source
            // whose size says 0 may be procfs/sysfs, where copy_file_range says 0 too.
            let sizeless = src_size == 0 || pseudo;
            chain.retain(|&p| {
                let unfit = match p {
                    DataPath::Reflink => start > 0 || sizeless,
                    DataPath::CopyFileRange => sizeless,
                    _ => false,
                };
                !unfit && !self.refused.contains(&(sst.st_dev, dst_info.identity.0, p))
            });
        }
        if chain.contains(&DataPath::Splice) && self.middle.is_none() {
            self.middle = OwnPipe::new().ok();
        }
        let ends = Ends {
            src: source.as_fd(),
            src_info,
            dst: sink.as_fd(),
            dst_info,
        };

        // A pseudo file's st_size is not its length (sysfs says 4096, procfs 0 or a guess)
        // and it has no extents: it is read to its end, never walked or extended.
        let walk = dst_is_file
            && !pseudo
            && match self.cfg.sparse {
                SparseMode::Never => false,
                SparseMode::Auto => (sst.st_blocks as u64) * 512 < src_size,
                SparseMode::Always => true,
            };
        let failure = if start == src_size && start > 0 {
            None
        } else if walk {
            self.copy_extents(&ends, chain, start, e)
        } else {
            let (record, failure) =
                engine::transfer(&ends, &chain, self.middle.as_ref(), &self.meter);
            e.record = record;
            failure
        };
        self.remember_refusals(sst.st_dev, dst_info.identity.0, &e.record);
        if let Some(failure) = failure {
            return Err(self.failure_text(failure, &e.record));
        }
        if walk {
            // The holes at the end: the file is as long as its source.
            let size = fstat(source.as_fd())
                .map(|s| s.st_size)
                .unwrap_or(sst.st_size);
            nix::unistd::ftruncate(sink.as_fd(), size)
                .map_err(|err| format!("cannot set the size: {err}"))?;
        }
        if self.cfg.preserve {
            preserve_fd(sink.as_fd(), &sst).map_err(|err| format!("{err:#}"))?;
        }
        // close(2) may report what the writes did not (NFS, quotas).
        nix::unistd::close(sink.into_raw_fd()).map_err(|err| format!("cannot close: {err}"))?;
        Ok(true)
    }

    /// The data extents of the source from `start`, each through the engine; holes between
    /// them are skipped (and counted), the caller sets the final size.
    fn copy_extents(
        &mut self,
        ends: &Ends<'_>,
        mut chain: Vec<DataPath>,
        start: u64,
        e: &mut Entry,
    ) -> Option<Failure> {
        let (src, dst) = (ends.src.as_raw_fd(), ends.dst.as_raw_fd());
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
                Err(err) => return Some(Failure::Io(err.into(), engine::Side::Source)),
            };
            let hole = match nix::unistd::lseek(src, data as i64, Whence::SeekHole) {
                Ok(h) => h as u64,
                Err(err) => return Some(Failure::Io(err.into(), engine::Side::Source)),
            };
            e.holes += data - offset;
            if let Err(err) = nix::unistd::lseek(src, data as i64, Whence::SeekSet)
                .and_then(|_| nix::unistd::lseek(dst, data as i64, Whence::SeekSet))
            {
                return Some(Failure::Io(err.into(), engine::Side::Either));
            }
            let len = hole - data;
            let mut zeros = 0;
            let (record, failure) = if self.cfg.sparse == SparseMode::Always && chain.len() > 1 {
                engine::transfer_skipping_zeros(ends, &self.meter, len, &mut zeros)
            } else {
                engine::transfer_upto(ends, &chain, self.middle.as_ref(), &self.meter, len)
            };
            e.holes += zeros;
            // The zeros seeked over left the source too: not a sign the file shrank.
            let moved = record.bytes() + zeros;
            let cloned = record
                .paths
                .iter()
                .any(|&(p, n)| p == DataPath::Reflink && n > 0);
            merge(&mut e.record, &record);
            if failure.is_some() || cloned || moved < len {
                // A clone took the whole file; fewer bytes than the extent: it shrank.
                if cloned {
                    e.holes = 0;
                }
                return failure;
            }
            // Paths refused on one extent are not asked again on the next.
            if chain.len() > 1 {
                chain.retain(|p| !record.fallbacks.iter().any(|f| f.from == *p));
            }
            offset = hole;
        }
        None
    }

    fn remember_refusals(&mut self, src_dev: u64, dst_dev: u64, record: &Record) {
        for f in &record.fallbacks {
            let about_filesystems = match f.reason {
                Reason::Errno(errno) => matches!(
                    errno,
                    Errno::EXDEV | Errno::EOPNOTSUPP | Errno::ENOSYS | Errno::ENOTTY
                ),
                Reason::FirstCallReturnedZero | Reason::ReturnedZeroBeforeEnd => false,
            };
            if about_filesystems && f.to.is_some() {
                self.refused.insert((src_dev, dst_dev, f.from));
            }
        }
    }

    fn failure_text(&mut self, failure: Failure, record: &Record) -> String {
        match failure {
            Failure::Interrupted => {
                self.interrupted = true;
                "interrupted".to_string()
            }
            Failure::Io(err, side) => {
                if let Some(f) = record.fallbacks.iter().find(|f| f.to.is_none()) {
                    return format!("the kernel refused {}: {err}", f.from);
                }
                match side {
                    engine::Side::Source => format!("cannot read: {err}"),
                    engine::Side::Sink => format!("cannot write: {err}"),
                    engine::Side::Either => format!("cannot copy: {err}"),
                }
            }
        }
    }

    fn skip(&mut self, src: &FsPath, dst: &FsPath, kind: &'static str) {
        let mut e = entry(src, dst, kind);
        e.skipped = true;
        self.totals.skipped += 1;
        self.done(e);
    }

    fn fail(&mut self, src: &FsPath, dst: &FsPath, kind: &'static str, message: String) {
        let mut e = entry(src, dst, kind);
        e.error = Some(message);
        self.done(e);
    }

    /// Adds one entry to the totals; errors are printed at once (also under -q, as cp does).
    fn done(&mut self, e: Entry) {
        merge(&mut self.totals.record, &e.record);
        self.totals.holes += e.holes;
        self.totals.resumed += e.resumed;
        self.totals.resume_check_seconds += e.resume_check_seconds.unwrap_or(0.0);
        if e.kind == "file" {
            self.files_done.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(error) = &e.error {
            self.totals.failed += 1;
            if error != "interrupted" {
                self.say(format!(
                    "zerocat: cannot copy '{}' to '{}': {error}",
                    e.src.display(),
                    e.dst.display()
                ));
            }
        } else if self.opts.verbose && !self.opts.quiet {
            self.say(format!("zerocat: {}", entry_line(&e)));
        }
        self.entries.push(e);
    }

    fn finish(
        mut self,
        sources: &[PathBuf],
        dest: &FsPath,
        seconds: f64,
    ) -> anyhow::Result<ExitCode> {
        if let Some(stop) = &self.survey {
            stop.store(true, Ordering::Relaxed);
        }
        if let Some(progress) = self.progress.take() {
            progress.finish();
        }
        let t = &self.totals;
        let interrupted = self.interrupted || crate::sys::process::interrupted();
        if !self.opts.quiet {
            let text = match self.opts.stats {
                StatsFormat::Text => total_line(t, seconds, interrupted),
                StatsFormat::Json => self.json(sources, dest, seconds, interrupted),
            };
            eprintln!("{text}");
        }
        if interrupted {
            return Ok(ExitCode::Interrupted);
        }
        if t.failed > 0 {
            if self.entries.len() > 1 {
                eprintln!(
                    "zerocat: {} of {} entries could not be copied",
                    t.failed,
                    self.entries.len()
                );
            }
            return Ok(ExitCode::Failure);
        }
        Ok(ExitCode::Success)
    }

    fn json(&self, sources: &[PathBuf], dest: &FsPath, seconds: f64, interrupted: bool) -> String {
        let t = &self.totals;
        let named = |p: &FsPath| {
            let mut o = JsonObject::new();
            let kind = match fs::symlink_metadata(p) {
                Ok(m) if m.is_dir() => "dir",
                Ok(m) if m.file_type().is_symlink() => "symlink",
                _ => "file",
            };
            o.str("uri", &p.to_string_lossy()).str("kind", kind);
            o.finish()
        };
        let srcs: Vec<String> = sources.iter().map(|s| named(s)).collect();
        let entries: Vec<String> = self.entries.iter().map(entry_json).collect();
        let mut o = JsonObject::new();
        o.str("command", "copy")
            .num("bytes", t.record.bytes())
            .float("seconds", seconds)
            .num("files", t.files)
            .num("dirs", t.dirs)
            .num("symlinks", t.symlinks)
            .num("specials", t.specials)
            .num("skipped", t.skipped)
            .num("failed", t.failed)
            .num("holes", t.holes)
            .num("resumed", t.resumed)
            .float("resume_check_seconds", t.resume_check_seconds)
            .raw("src", &json_array(&srcs))
            .raw("dst", &named(dest));
        report::record_json(&mut o, &t.record);
        let ending = if interrupted {
            report::Ending::Signal
        } else if t.failed > 0 {
            report::Ending::Error(format!("{} entries could not be copied", t.failed))
        } else {
            report::Ending::Eof
        };
        report::ending_json(&mut o, &ending);
        o.raw("entries", &json_array(&entries));
        o.finish()
    }
}

fn entry(src: &FsPath, dst: &FsPath, kind: &'static str) -> Entry {
    Entry {
        src: src.to_path_buf(),
        dst: dst.to_path_buf(),
        kind,
        ..Entry::default()
    }
}

/// Adds `from` to `into`: bytes per path, and each distinct fallback once.
fn merge(into: &mut Record, from: &Record) {
    for &(path, bytes) in &from.paths {
        into.add(path, bytes);
    }
    for f in &from.fallbacks {
        if !into.fallbacks.contains(f) {
            into.fallbacks.push(f.clone());
        }
    }
}

/// "copied 3 files, 1.00 GiB in 0.41 s (2.44 GiB/s) via copy_file_range; 1.00 GiB of holes
/// skipped; 1 failed"
fn total_line(t: &Totals, seconds: f64, interrupted: bool) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut line = format!(
        "zerocat: copied {}, {}",
        plural(t.files, "file", "files"),
        crate::units::amount(t.record.bytes(), seconds)
    );
    if !t.record.paths.is_empty() {
        line.push_str(&format!(" via {}", report::route(&t.record)));
    }
    let mut extras = Vec::new();
    if t.dirs > 0 {
        extras.push(plural(t.dirs, "directory", "directories"));
    }
    if t.symlinks > 0 {
        extras.push(plural(t.symlinks, "symlink", "symlinks"));
    }
    if t.specials > 0 {
        extras.push(plural(t.specials, "special file", "special files"));
    }
    if t.holes > 0 {
        extras.push(format!("{} of holes skipped", human_bytes(t.holes)));
    }
    if t.resumed > 0 {
        extras.push(format!("{} resumed", human_bytes(t.resumed)));
    }
    if t.skipped > 0 {
        extras.push(format!("{} skipped (-n)", t.skipped));
    }
    if t.failed > 0 {
        extras.push(format!("{} failed", t.failed));
    }
    if interrupted {
        extras.push("interrupted".to_string());
    }
    if !extras.is_empty() {
        line.push_str("; ");
        line.push_str(&extras.join("; "));
    }
    line
}

/// The `-v` line of one entry.
fn entry_line(e: &Entry) -> String {
    let what = if e.skipped {
        "skipped: exists (-n)".to_string()
    } else if e.kind == "file" {
        let mut s = format!(
            "{} via {}",
            human_bytes(e.record.bytes()),
            report::route(&e.record)
        );
        if e.record.paths.is_empty() {
            s = "already complete".to_string();
        }
        if e.holes > 0 {
            s.push_str(&format!(", {} of holes skipped", human_bytes(e.holes)));
        }
        match e.resume_check_seconds {
            Some(t) if e.resumed > 0 => s.push_str(&format!(
                ", {} resumed (prefix checked in {})",
                human_bytes(e.resumed),
                human_duration(t)
            )),
            Some(t) => s.push_str(&format!(
                ", copied from the start (destination checked in {}: not a prefix)",
                human_duration(t)
            )),
            None => {}
        }
        s
    } else {
        e.kind.to_string()
    };
    format!("'{}' -> '{}': {what}", e.src.display(), e.dst.display())
}

fn entry_json(e: &Entry) -> String {
    let mut o = JsonObject::new();
    o.str("src", &e.src.to_string_lossy())
        .str("dst", &e.dst.to_string_lossy())
        .str("kind", e.kind)
        .num("bytes", e.record.bytes())
        .num("holes", e.holes)
        .num("resumed", e.resumed)
        .bool("skipped", e.skipped);
    match e.resume_check_seconds {
        Some(seconds) => o.float("resume_check_seconds", seconds),
        None => o.raw("resume_check_seconds", "null"),
    };
    report::record_json(&mut o, &e.record);
    match &e.error {
        Some(text) => o.raw("error", &json_string(text)),
        None => o.raw("error", "null"),
    };
    o.finish()
}

fn fstat(fd: BorrowedFd<'_>) -> nix::Result<FileStat> {
    nix::sys::stat::fstat(fd.as_raw_fd())
}

fn umask() -> u32 {
    // Read it by setting it back: there is no getter before Linux 4.7's /proc status field.
    let old = nix::sys::stat::umask(Mode::from_bits_truncate(0o022));
    nix::sys::stat::umask(old);
    old.bits()
}

/// Creates the destination (O_EXCL) with the source's permission bits, as cp does (the
/// umask applies). `--resume` reads the destination's prefix back, hence O_RDWR.
fn create_new(dst: &FsPath, src_mode: u32, resume: bool) -> io::Result<OwnedFd> {
    OpenOptions::new()
        .write(true)
        .read(resume)
        .create_new(true)
        .mode(src_mode & 0o777)
        .open(dst)
        .map(OwnedFd::from)
}

/// Opens an existing destination for writing *without* O_TRUNC: the same-file check comes
/// first. `-f`: one that cannot be opened is removed and created anew.
fn open_existing(dst: &FsPath, force: bool, src_mode: u32, resume: bool) -> io::Result<OwnedFd> {
    let access = if resume {
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
            create_new(dst, src_mode, resume)
        }
        other => other,
    }
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
        if !(read_exact_at(src, a, offset) && read_exact_at(dst, b, offset) && a == b) {
            return 0;
        }
        offset += len as u64;
    }
    dst_size
}

/// A file of procfs or sysfs, whose st_size and st_blocks say nothing of its bytes.
fn is_pseudo_file(fd: BorrowedFd<'_>) -> bool {
    use nix::sys::statfs::{fstatfs, PROC_SUPER_MAGIC, SYSFS_MAGIC};
    fstatfs(fd).is_ok_and(|fs| {
        let t = fs.filesystem_type();
        t == PROC_SUPER_MAGIC || t == SYSFS_MAGIC
    })
}

fn read_exact_at(fd: BorrowedFd<'_>, mut buf: &mut [u8], mut offset: u64) -> bool {
    while !buf.is_empty() {
        match nix::sys::uio::pread(fd, buf, offset as i64) {
            Ok(0) => return false,
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(Errno::EINTR) => {}
            Err(_) => return false,
        }
    }
    true
}

/// Is `dst` inside the directory `src` (cp: "cannot copy a directory into itself")?
fn inside_itself(src: &FsPath, dst: &FsPath) -> Option<String> {
    let src = fs::canonicalize(src).ok()?;
    let parent = dst
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(FsPath::new("."));
    let dst = fs::canonicalize(parent).ok()?.join(dst.file_name()?);
    dst.starts_with(&src)
        .then(|| "cannot copy a directory into itself".to_string())
}

/// `-p` on an open file: mode (with setuid/setgid/sticky, see [`preserved_mode`]), owner
/// where permitted, access and modification times. The owner first: a chown clears setuid.
fn preserve_fd(fd: BorrowedFd<'_>, st: &FileStat) -> anyhow::Result<()> {
    let raw = fd.as_raw_fd();
    let owner_kept = match nix::unistd::fchown(raw, Some(st.st_uid.into()), Some(st.st_gid.into()))
    {
        Ok(()) => true,
        Err(Errno::EPERM) => false,
        Err(e) => return Err(e).context("cannot set the owner"),
    };
    nix::sys::stat::fchmod(
        raw,
        Mode::from_bits_truncate(preserved_mode(st.st_mode, owner_kept)),
    )
    .context("cannot set the mode")?;
    let atime = nix::sys::time::TimeSpec::new(st.st_atime, st.st_atime_nsec);
    let mtime = nix::sys::time::TimeSpec::new(st.st_mtime, st.st_mtime_nsec);
    nix::sys::stat::futimens(raw, &atime, &mtime).context("cannot set the times")
}

/// The mode `-p` gives a copy: the source's, without setuid/setgid when the copy did not get
/// the source's owner (cp's rule: another user's setuid program must not become one that
/// runs as the copier).
fn preserved_mode(src_mode: u32, owner_kept: bool) -> u32 {
    let mode = src_mode & 0o7777;
    if owner_kept {
        mode
    } else {
        mode & !(nix::libc::S_ISUID | nix::libc::S_ISGID)
    }
}

/// `-p` by path, not following a symlink: owner, then the mode (`with_mode`: a symlink has
/// none), then times.
fn preserve_path(dst: &FsPath, meta: &fs::Metadata, with_mode: bool) -> anyhow::Result<()> {
    let owner_kept = chown_path(dst, meta)?;
    if with_mode {
        chmod_path(dst, preserved_mode(meta.mode(), owner_kept))?;
    }
    times_path(dst, meta)
}

/// The source's owner, not following a symlink. Ok(false): not permitted (not root).
fn chown_path(dst: &FsPath, meta: &fs::Metadata) -> anyhow::Result<bool> {
    match nix::unistd::fchownat(
        None,
        dst,
        Some(meta.uid().into()),
        Some(meta.gid().into()),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    ) {
        Ok(()) => Ok(true),
        Err(Errno::EPERM) => Ok(false),
        Err(e) => Err(e).context("cannot set the owner"),
    }
}

/// chmod by path without following a symlink there (glibc goes through an O_PATH fd and
/// refuses a symlink), for what zerocat cannot open: a FIFO would block, a directory it
/// did not open.
fn chmod_path(dst: &FsPath, mode: u32) -> anyhow::Result<()> {
    nix::sys::stat::fchmodat(
        None,
        dst,
        Mode::from_bits_truncate(mode),
        nix::sys::stat::FchmodatFlags::NoFollowSymlink,
    )
    .context("cannot set the mode")
}

fn times_path(dst: &FsPath, meta: &fs::Metadata) -> anyhow::Result<()> {
    let atime = nix::sys::time::TimeSpec::new(meta.atime(), meta.atime_nsec());
    let mtime = nix::sys::time::TimeSpec::new(meta.mtime(), meta.mtime_nsec());
    nix::sys::stat::utimensat(
        None,
        dst,
        &atime,
        &mtime,
        nix::sys::stat::UtimensatFlags::NoFollowSymlink,
    )
    .context("cannot set the times")
}

/// What the walk found at a name: from lstat, or from the directory entry's d_type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    Symlink,
    File,
    Fifo,
    Socket,
    Device,
}

impl Kind {
    fn of(ft: fs::FileType) -> Kind {
        if ft.is_dir() {
            Kind::Dir
        } else if ft.is_symlink() {
            Kind::Symlink
        } else if ft.is_file() {
            Kind::File
        } else if ft.is_fifo() {
            Kind::Fifo
        } else if ft.is_socket() {
            Kind::Socket
        } else {
            Kind::Device
        }
    }

    fn of_dirent(t: nix::dir::Type) -> Kind {
        use nix::dir::Type;
        match t {
            Type::Directory => Kind::Dir,
            Type::Symlink => Kind::Symlink,
            Type::File => Kind::File,
            Type::Fifo => Kind::Fifo,
            Type::Socket => Kind::Socket,
            Type::CharacterDevice | Type::BlockDevice => Kind::Device,
        }
    }
}
