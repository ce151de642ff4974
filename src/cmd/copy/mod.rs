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
//! entry in `entries` (always: scripts get what failed and why without -v). Only JSON keeps
//! the entries: the text report holds totals, so memory stays flat over any tree.
//!
//! Here: the options and the run (check the operands, print the plan, copy, report). The
//! jobs: `walk` (operands, the tree, the survey for the bar), `file` (one regular file
//! through the engine), `pool` (`-j`: files copied by worker threads, entries reported in
//! the walk's order), `resume`, `meta` (modes, `--preserve`, symlinks and special files),
//! `report` (each entry's kind and status, the totals, text and JSON). Which paths a file
//! may take is the engine's: [`engine::FileChain`].
//!
//! For scripts (issue 17), each in a file of its own: `update` (`-n`, `--update`: which
//! destinations are kept), `sync` (`--sync`), `verify` (`--verify`: read back and
//! compared), `atomic` (`--atomic`: a temporary renamed over the destination), `debug`
//! (`--debug`: cp's words for what ran).

mod atomic;
mod debug;
mod entry;
mod file;
mod meta;
mod path;
mod pool;
mod ranged;
mod report;
mod resume;
mod s3tree;
mod sync;
mod update;
mod verify;
mod walk;

pub use update::Update;

use std::collections::HashMap;
use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Instant;

use crate::endpoint::Endpoint;
use crate::engine::meter::Meter;
use crate::engine::{self, DataPath, ReflinkMode};
use crate::exit::{ExitCode, UsageError};
use crate::options::Options;
use crate::progress::{self, ProgressGuard, Watch};
use crate::report::StatsFormat;
use crate::sys::fdkind::{FdInfo, FdKind};
use crate::sys::pipe::OwnPipe;

use entry::Entry;
use pool::{DirDone, Node, Tree};
use report::{total_line, Totals};
use walk::{survey_in_background, Survey};

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
    pub update: Update,
    pub force: bool,
    pub preserve: bool,
    pub reflink: ReflinkMode,
    pub sparse: SparseMode,
    pub resume: bool,
    /// Recreate FIFOs and device nodes (mknod) instead of refusing them.
    pub special: bool,
    /// fdatasync each file before it counts as done; the bar shows bytes on disk.
    pub sync: bool,
    /// Read each copied file and its source back and compare them.
    pub verify: bool,
    /// Write each file to a temporary renamed over the destination when complete.
    pub atomic: bool,
    /// After each file, cp's `--debug` lines on stdout.
    pub debug: bool,
    /// `-j N`: a tree copied by N threads, each owning whole directories (pool.rs). None:
    /// twice the CPUs available, at most [`pool::MAX_DEFAULT_JOBS`].
    pub jobs: Option<usize>,
    /// `-T`: DEST is the copy itself, never a directory to copy into.
    pub no_target_directory: bool,
    /// `--parents`: each source's path is kept under the directory DEST.
    pub parents: bool,
    /// `-i`: ask on stderr before replacing an existing destination (stdin answers).
    pub interactive: bool,
    /// `-L`, `-H`, `-P`: which symlinks among the sources are followed.
    pub dereference: Dereference,
    /// `--remove-destination`: an existing destination is removed before the copy is made.
    pub remove_destination: bool,
}

/// Which symlinks a copy follows (cp's `-L`, `-H`, `-P`). cp's default, and ours: `Always`
/// without `-r` (an operand is all there is), `Never` with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dereference {
    /// `-L`: every symlink, operands and entries of a tree.
    Always,
    /// `-H`: the operands only.
    CommandLine,
    /// `-P`: none; a symlink is copied as a symlink.
    Never,
}

impl Dereference {
    /// Whether a symlink met as an operand (`top`) or inside a tree is followed.
    pub fn follows(self, top: bool) -> bool {
        match self {
            Dereference::Always => true,
            Dereference::CommandLine => top,
            Dereference::Never => false,
        }
    }
}

pub fn run(opts: &Options, cfg: &CopyConfig) -> anyhow::Result<ExitCode> {
    // `copy --resume|-j N URL FILE` (cli sends no other http source here).
    if let [Endpoint::Http {
        url, opts: http, ..
    }] = &cfg.sources[..]
    {
        let dest = cfg
            .dest
            .plain_file()
            .expect("cli routes an object into a file only");
        let jobs = cfg.jobs.unwrap_or(1);
        return ranged::run(opts, url, http, dest, cfg.resume, jobs, &http.resume);
    }
    if s3tree::applies(cfg) {
        return s3tree::run(opts, cfg);
    }
    // `copy --resume|-j N s3://BUCKET/KEY FILE`: the same ranged GETs, signed, If-Match.
    if let [Endpoint::S3 {
        bucket,
        key,
        opts: s3,
    }] = &cfg.sources[..]
    {
        let dest = cfg
            .dest
            .plain_file()
            .expect("cli routes an object into a file only");
        let s3_client = crate::endpoint::s3::client::Client::from_opts(s3)?;
        let (client, get) = s3_client.http_request(&crate::endpoint::s3::client::Call {
            kind: crate::endpoint::s3::client::Kind::Get,
            method: "GET",
            bucket,
            key,
            query: &[],
            headers: &[],
            body: crate::endpoint::s3::client::Body::Empty,
        })?;
        let jobs = cfg.jobs.unwrap_or(1);
        return ranged::download(
            opts,
            &client,
            &get,
            dest,
            cfg.resume,
            jobs,
            &s3.resume,
            Some(&s3_client.counts),
        );
    }
    let operands: Vec<&Endpoint> = cfg.sources.iter().chain([&cfg.dest]).collect();
    // cli turned a one-source copy with a stream or a file with options into `pipe`.
    let plain = |e: &Endpoint| e.plain_file().map(Path::to_path_buf);
    if operands.iter().any(|e| plain(e).is_none()) {
        return Err(UsageError(
            "copy with several sources takes plain file paths only".to_string(),
        )
        .into());
    }
    let sources: Vec<PathBuf> = cfg.sources.iter().filter_map(plain).collect();
    let dest = plain(&cfg.dest).expect("checked above");
    if let engine::Via::Forced(path @ (DataPath::Tee | DataPath::Sendfile)) = opts.via {
        return Err(UsageError(format!(
            "--via {path}: copy moves files with reflink, copy_file_range, splice or userspace"
        ))
        .into());
    }
    if cfg.no_target_directory && sources.len() > 1 {
        return Err(UsageError(format!(
            "-T: '{}' is the copy itself, so there is one source, not {}",
            dest.display(),
            sources.len()
        ))
        .into());
    }
    let dest_is_dir =
        !cfg.no_target_directory && fs::metadata(&dest).map(|m| m.is_dir()).unwrap_or(false);
    if cfg.parents && !dest_is_dir {
        return Err(UsageError(format!(
            "--parents: the destination '{}' must be a directory",
            dest.display()
        ))
        .into());
    }
    if sources.len() > 1 && !dest_is_dir {
        return Err(UsageError(format!(
            "target '{}' is not a directory (copying several sources needs one)",
            dest.display()
        ))
        .into());
    }

    if cfg.verify {
        verify::check_destination(&dest)?;
    }
    if cfg.atomic && !opts.explain {
        atomic::check_directory(&dest, dest_is_dir)?;
    }
    let mut copier = Copier::new(opts, cfg);
    let chain = engine::chain_for_copy(
        &FdInfo::assumed(FdKind::File),
        &FdInfo::assumed(FdKind::File),
        opts.via,
        cfg.reflink,
    )
    .map_err(|e| UsageError(format!("--via: {e}")))?;
    // Threads pay off only where there are several files: a tree, or several operands.
    let jobs = cfg.jobs.unwrap_or_else(pool::default_jobs);
    // -i asks one question at a time, in the walk's order.
    let jobs = if (cfg.recursive || sources.len() > 1) && !cfg.interactive {
        jobs
    } else {
        1
    };
    opts.print_plan(&format!(
        "plan: copy {} -> '{}'{}: per file via {}; sparse {}{}; {}{}",
        sources
            .iter()
            .map(|s| format!("'{}'", s.display()))
            .collect::<Vec<_>>()
            .join(" "),
        dest.display(),
        if cfg.recursive { " (recursive)" } else { "" },
        crate::cmd::common::chain_words(&chain),
        format!("{:?}", cfg.sparse).to_lowercase(),
        if cfg.resume { ", resume" } else { "" },
        match jobs {
            1 => "1 job".to_string(),
            n => format!("{n} jobs"),
        },
        crate::engine::meter::plan_words(opts.limit),
    ));
    if opts.explain {
        return Ok(ExitCode::Success);
    }

    meta::read_umask_before_threads();
    let started = Instant::now();
    copier.start_progress(&sources);
    if jobs > 1 {
        copier.copy_in_parallel(jobs, &sources, &dest, dest_is_dir);
    } else {
        copier.copy_operands(&sources, &dest, dest_is_dir);
    }
    let seconds = started.elapsed().as_secs_f64();
    copier.finish(&sources, &dest, seconds)
}

/// `--preserve` in a tree (cp -a): (st_dev, st_ino) of each source file with more than one
/// link -> the first copy made of it, which the others become hard links to. Shared by the
/// threads of `-j`: the thread that claims a file copies it while the others wait for it.
#[derive(Default)]
struct Links {
    /// None: being copied by the thread that claimed it.
    first: Mutex<HashMap<(u64, u64), Option<PathBuf>>>,
    copied: Condvar,
}

/// What [`Links::claim`] found.
enum Claim {
    /// The first of its links met: copy it, then [`Links::settle`].
    First,
    /// Link to this copy.
    LinkTo(PathBuf),
}

impl Links {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, u64), Option<PathBuf>>> {
        self.first.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn claim(&self, key: (u64, u64)) -> Claim {
        let mut first = self.lock();
        loop {
            match first.get(&key) {
                None => {
                    first.insert(key, None);
                    return Claim::First;
                }
                Some(Some(copy)) => return Claim::LinkTo(copy.clone()),
                Some(None) => {
                    first = self.copied.wait(first).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }

    /// The claimed copy is made (Some) or failed (None: the next link met is copied).
    fn settle(&self, key: (u64, u64), copy: Option<PathBuf>) {
        let mut first = self.lock();
        match copy {
            Some(copy) => first.insert(key, Some(copy)),
            None => first.remove(&key),
        };
        self.copied.notify_all();
    }
}

/// One run of the copy: what it was asked, what it has done so far, and what it keeps from
/// one entry to the next (refusals, the middle pipe, the meter, the directories open).
struct Copier<'a> {
    opts: &'a Options,
    cfg: &'a CopyConfig,
    totals: Totals,
    /// Every entry, for `--stats json` only.
    entries: Vec<Entry>,
    /// Entries accounted, whatever the report.
    entry_count: u64,
    /// ((source st_dev, destination st_dev), path) the kernel refused for a reason about the
    /// filesystems, not the file: not tried again this run (std probes once too).
    /// A few entries at most (a path or two per pair of filesystems), looked up for every
    /// file: a list, not a hashed set (SipHash was a fifth of a small file's user time).
    refused: Vec<((u64, u64), DataPath)>,
    middle: Option<OwnPipe>,
    /// Source st_dev -> whether it is procfs or sysfs: one fstatfs per filesystem, not per
    /// file (a tenth of a small file's syscalls).
    /// Per filesystem (st_dev): a few entries, a list.
    pseudo: Vec<(u64, bool)>,
    /// The last destination directory a file was created in, and its st_dev.
    /// The destination directory the last file was created in: its fd (files are
    /// created relative to it, no path walked per file) and its st_dev.
    dst_dir: Option<file::DstDir>,
    /// One for the whole run: `--limit` paces the copy, not each file.
    meter: Arc<Meter>,
    /// `--sync`: the bytes on disk, which the bar shows instead of `meter`'s.
    on_disk: Option<Arc<Meter>>,
    /// Regular files done (copied, skipped or failed), for the progress line.
    files_done: Arc<AtomicU64>,
    progress: Option<ProgressGuard>,
    /// Set to stop the walk for the totals when the copy ends first.
    survey: Option<Arc<AtomicBool>>,
    interrupted: bool,
    /// The directories this thread is listing, innermost last, each with its open fd: an
    /// entry is opened relative to its directory (openat), so a path component swapped for
    /// a symlink meanwhile cannot redirect the copy.
    walk: Vec<(PathBuf, OwnedFd)>,
    /// `-j`: the directories every thread takes from (pool.rs).
    tree: Option<Arc<Tree>>,
    /// `-j`: the node of the directory this thread is listing, where the entries to show go
    /// in the walk's order. None: each entry is accounted as it is done.
    node: Option<Arc<Node>>,
    /// `-j`, the reporting thread: the nodes from the top to where the report has come,
    /// each with its directory's metadata, due when it is passed.
    cursor: Vec<(Arc<Node>, Option<DirDone>)>,
    /// `--preserve` in a tree: the first copy of each source file with several links.
    links: Arc<Links>,
    /// getdents64's buffers, kept from one directory to the next (one a level listed at
    /// once).
    listing_buffers: Vec<Vec<u8>>,
    /// The last file copied was empty: the next is stat'ed by name first (file.rs,
    /// copy_empty_by_name).
    last_was_empty: bool,
    /// The last file's chain, for the next file of the same kinds (file.rs).
    last_chain: Option<((FdKind, FdKind, bool, bool), engine::FileChain)>,
    /// `--debug`'s lines could not be written to stdout (a full disk, /dev/full): the run
    /// fails, as cp's does. A reader that went away is not this (cp: quiet).
    debug_error: Option<std::io::Error>,
}

impl<'a> Copier<'a> {
    fn new(opts: &'a Options, cfg: &'a CopyConfig) -> Copier<'a> {
        Copier {
            opts,
            cfg,
            totals: Totals::default(),
            entries: Vec::new(),
            entry_count: 0,
            refused: Vec::new(),
            middle: None,
            pseudo: Vec::new(),
            dst_dir: None,
            meter: progress::meter(opts),
            on_disk: sync::on_disk_meter(cfg.sync),
            files_done: Arc::new(AtomicU64::new(0)),
            progress: None,
            survey: None,
            interrupted: false,
            debug_error: None,
            links: Arc::default(),
            listing_buffers: Vec::new(),
            last_was_empty: false,
            last_chain: None,
            walk: Vec::new(),
            tree: None,
            node: None,
            cursor: Vec::new(),
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
        let mut watch = Watch::new(self.on_disk.as_ref().unwrap_or(&self.meter));
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
        let line = crate::report::errno_names(&line);
        match &self.progress {
            Some(progress) => progress.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Ends the run: stops the survey and the bar, prints the report, says the exit code.
    fn finish(
        mut self,
        sources: &[PathBuf],
        dest: &Path,
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
        let text = match self.opts.stats {
            StatsFormat::Text => total_line(t, seconds, interrupted),
            StatsFormat::Json => self.json(sources, dest, seconds, interrupted),
        };
        self.opts.print_report(&text);
        if interrupted {
            return Ok(ExitCode::Interrupted);
        }
        if let Some(e) = &self.debug_error {
            eprintln!(
                "{}",
                crate::report::errno_names(&format!("zerocat: --debug: writing stdout: {e}"))
            );
            return Ok(ExitCode::Failure);
        }
        if t.failed > 0 {
            if self.entry_count > 1 {
                eprintln!(
                    "zerocat: {} of {} entries could not be copied",
                    t.failed, self.entry_count
                );
            }
            return Ok(ExitCode::Failure);
        }
        Ok(ExitCode::Success)
    }
}
