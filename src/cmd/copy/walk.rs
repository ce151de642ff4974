//! The tree walk: an operand, a directory listed from its own fd (its entries opened at
//! it), each entry handed to the copy of its kind; and the survey thread that walks the
//! same sources ahead of the copy for the progress bar's totals.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use super::entry::{Entry, Kind, Status};
use super::path::{split_name, Joiner};
use super::pool::{DirDone, DirJob, Node};
use super::{Claim, Copier, CopyConfig, Dereference, SparseMode};
use crate::sys::dirent;

/// What a copy will move, for the progress bar's totals.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Survey {
    pub(super) files: u64,
    pub(super) bytes: u64,
}

/// Walks the sources as the copy will (operands and tree entries followed as `-L`, `-H`
/// or `-P` says, trees only with `-r`), on a thread of its own, and sets `totals`:
/// the regular files and their bytes (the allocated ones for a sparse file whose holes
/// are kept). What cannot be read counts for nothing; the copy reports it. Returns the
/// flag that stops the walk, or None when no thread could be started.
pub(super) fn survey_in_background(
    sources: &[PathBuf],
    cfg: &CopyConfig,
    totals: &Arc<OnceLock<Survey>>,
) -> Option<Arc<AtomicBool>> {
    struct Walk {
        sparse: SparseMode,
        deref: Dereference,
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
        fn dir(&mut self, dir: &Path) {
            let Ok(listing) = fs::read_dir(dir) else {
                return;
            };
            for item in listing.flatten() {
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
                let path = item.path();
                let meta = match item.file_type() {
                    Ok(ft) if ft.is_symlink() && self.deref.follows(false) => {
                        if is_cyclic_link(&path) {
                            continue;
                        }
                        fs::metadata(&path)
                    }
                    Ok(_) => item.metadata(),
                    Err(e) => Err(e),
                };
                match meta {
                    Ok(m) if m.is_dir() => self.dir(&path),
                    Ok(m) if m.is_file() => self.file(&m),
                    _ => {}
                }
            }
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut walk = Walk {
        sparse: cfg.sparse,
        deref: cfg.dereference,
        stop: Arc::clone(&stop),
        found: Survey::default(),
    };
    let (sources, recursive, totals) = (sources.to_vec(), cfg.recursive, Arc::clone(totals));
    std::thread::Builder::new()
        .name("zerocat-survey".into())
        .spawn(move || {
            for src in &sources {
                let meta = if walk.deref.follows(true) {
                    fs::metadata(src)
                } else {
                    fs::symlink_metadata(src)
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

impl Copier<'_> {
    /// Each operand to `dest`, or into it when it is a directory.
    pub(super) fn copy_operands(&mut self, sources: &[PathBuf], dest: &Path, dest_is_dir: bool) {
        // Two operands with one name into a directory: the second would overwrite what this
        // run just made. Refused, as cp does ("will not overwrite just-created").
        let mut made: HashSet<PathBuf> = HashSet::new();
        for src in sources {
            if crate::sys::process::interrupted() {
                break;
            }
            // --parents: the directories made for this operand, deepest first.
            let mut made_dirs = Vec::new();
            let target = if self.cfg.parents {
                // cp --parents: the source's path, less its root, under DEST; the
                // directories on the way are made as needed.
                let kept: PathBuf = src
                    .components()
                    .filter(|c| matches!(c, std::path::Component::Normal(_)))
                    .collect();
                let target = dest.join(kept);
                if let Some(parent) = target.parent() {
                    made_dirs = parent
                        .ancestors()
                        .take_while(|d| *d != dest && fs::symlink_metadata(d).is_err())
                        .map(Path::to_path_buf)
                        .collect();
                    if let Err(e) = fs::create_dir_all(parent) {
                        let why = format!("cannot make '{}': {e}", parent.display());
                        remove_empty(&made_dirs);
                        self.fail_entry(src, &target, None, why);
                        continue;
                    }
                }
                target
            } else if dest_is_dir && names_its_contents(src) {
                // cp: `site/.` (or `..`) into a directory copies what the directory holds
                // into it, not a directory named after it (`cp -r site/. www/`).
                dest.to_path_buf()
            } else if dest_is_dir {
                match src.file_name() {
                    Some(name) => dest.join(name),
                    None => {
                        self.fail_entry(src, dest, None, "it has no name to give a copy".into());
                        continue;
                    }
                }
            } else {
                dest.to_path_buf()
            };
            if !made.insert(target.clone()) {
                let why = format!(
                    "will not overwrite just-created '{}' with '{}'",
                    target.display(),
                    src.display()
                );
                self.fail_entry(src, &target, None, why);
                continue;
            }
            self.copy_top(src, &target);
            // What --parents made and the copy did not fill is left as it was found (a
            // failed operand leaves no stray directories, as with cp, which checks first).
            remove_empty(&made_dirs);
        }
    }

    /// One operand: a symlink is followed under -L and -H, and by default without -r (cp's
    /// -r implies -P).
    fn copy_top(&mut self, src: &Path, dst: &Path) {
        let meta = if self.cfg.dereference.follows(true) {
            fs::metadata(src)
        } else {
            fs::symlink_metadata(src)
        };
        let meta = match meta {
            Ok(m) => m,
            Err(e) => return self.fail_entry(src, dst, None, format!("cannot stat: {e}")),
        };
        if meta.is_dir() {
            if !self.cfg.recursive {
                return self.fail(src, dst, Kind::Dir, "is a directory (use -r)".into());
            }
            if let Some(why) = inside_itself(src, dst) {
                return self.fail(src, dst, Kind::Dir, why);
            }
        }
        self.copy_entry(src, dst, Kind::of(meta.file_type()));
    }

    fn copy_entry(&mut self, src: &Path, dst: &Path, kind: Kind) {
        if crate::sys::process::interrupted() {
            self.interrupted = true;
            return;
        }
        match kind {
            Kind::Dir => self.copy_dir(src, dst),
            Kind::Symlink => self.copy_symlink(src, dst),
            Kind::File if self.cfg.preserve && self.cfg.recursive => self.copy_or_link(src, dst),
            Kind::File => self.copy_file(src, dst),
            // cp's rule: without -r, a FIFO or a device operand (`copy /dev/stdin f`,
            // `copy <(cmd) f`) is read to its end into a regular file, through the engine
            // (splice or userspace); in a tree, --special recreates the node instead.
            Kind::Fifo | Kind::Device if !self.cfg.recursive => self.copy_file(src, dst),
            Kind::Fifo | Kind::Socket | Kind::Device => self.copy_special(src, dst, kind),
        }
    }

    /// `--preserve` in a tree (cp -a): a file with several links becomes a hard link to the
    /// copy of the first of them met; under `-j`, a thread meeting another link while that
    /// first one is being copied waits for it.
    fn copy_or_link(&mut self, src: &Path, dst: &Path) {
        let Ok(meta) = fs::symlink_metadata(src) else {
            return self.copy_file(src, dst);
        };
        if meta.nlink() < 2 {
            return self.copy_file(src, dst);
        }
        let key = (meta.dev(), meta.ino());
        let first = match self.links.claim(key) {
            Claim::LinkTo(first) => first,
            Claim::First => {
                self.copy_file(src, dst);
                let made = fs::symlink_metadata(dst).is_ok();
                self.links.settle(key, made.then(|| dst.to_path_buf()));
                return;
            }
        };
        if let Ok(existing) = fs::symlink_metadata(dst) {
            let src_mtime = super::update::mtime_of(&meta);
            if let Some(why) = self.keeps_existing(dst, &existing, src_mtime) {
                return self.skip(src, dst, Kind::File, why);
            }
            let _ = fs::remove_file(dst);
        }
        match fs::hard_link(&first, dst) {
            Ok(()) => {
                let mut e = Entry::new(src, dst, Some(Kind::File));
                e.linked_to = Some(first);
                self.done(e);
            }
            Err(e) => self.fail(
                src,
                dst,
                Kind::File,
                format!("cannot link to '{}': {e}", first.display()),
            ),
        }
    }

    /// Directories are created before their entries (owner rwx while filling) and get their
    /// mode after them. The source is opened with O_NOFOLLOW (see [`Copier::open_source`]),
    /// listed from that fd, and its entries are opened at it; the destination is made and
    /// opened at its parent's fd, and its files are created at its own.
    fn copy_dir(&mut self, src: &Path, dst: &Path) {
        let opened = self
            .open_source(src, OFlag::O_DIRECTORY)
            .and_then(|dir| Ok((dir.metadata()?, dir)));
        let (meta, dir) = match opened {
            Ok(m) => m,
            Err(e) => return self.fail(src, dst, Kind::Dir, format!("cannot open directory: {e}")),
        };
        // The common case first: it is not there yet (no stat to learn that).
        let (created, existing) = match self.make_dir(dst, meta.mode() & 0o777 | 0o700) {
            Ok(()) => (true, None),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match fs::symlink_metadata(dst) {
                Ok(m) if m.is_dir() => (false, Some(m.mode() & 0o7777)),
                _ => {
                    return self.fail(
                        src,
                        dst,
                        Kind::Dir,
                        "cannot overwrite a non-directory with a directory".into(),
                    )
                }
            },
            Err(e) => {
                return self.fail(src, dst, Kind::Dir, format!("cannot create directory: {e}"))
            }
        };
        let dst_dir = match self.open_made_dir(dst, created) {
            Ok(d) => d,
            Err(e) => return self.fail(src, dst, Kind::Dir, format!("cannot open directory: {e}")),
        };
        let job = DirJob {
            src: src.to_path_buf(),
            fd: OwnedFd::from(dir),
            dst_dir,
            node: Arc::new(Node::default()),
        };
        let done = DirDone {
            src: src.to_path_buf(),
            dst: dst.to_path_buf(),
            meta,
            existing,
        };
        self.copy_subtree(job, done);
    }

    /// A directory's mode (and `--preserve`'s owner and times) once its entries are in, and
    /// its entry.
    pub(super) fn finish_dir(&mut self, dir: DirDone) {
        let mut entry = Entry::new(&dir.src, &dir.dst, Some(Kind::Dir));
        if let Err(e) = self.dir_metadata(&dir.dst, &dir.meta, dir.existing) {
            entry.status = Status::Failed(format!("{e:#}"));
        }
        self.totals.dirs += 1;
        self.account(entry);
    }

    /// Copies each entry of the directory `dir` (the fd the walk keeps for `src`) to
    /// `dst`, in the order getdents gives them.
    pub(super) fn copy_listing(&mut self, dir: RawFd, src: &Path, dst: &Path) {
        let mut buf = self
            .listing_buffers
            .pop()
            .unwrap_or_else(|| vec![0; dirent::LISTING_BUFFER]);
        let (mut from, mut to) = (Joiner::new(src), Joiner::new(dst));
        let mut n = 0usize;
        'listing: loop {
            let filled = match dirent::getdents(dir, &mut buf) {
                Ok(0) => break,
                Ok(filled) => filled,
                Err(e) => {
                    self.fail(src, dst, Kind::Dir, format!("cannot read directory: {e}"));
                    break;
                }
            };
            for (name, d_type) in dirent::entries(&buf[..filled]) {
                if self.interrupted {
                    break 'listing;
                }
                n += 1;
                // -j's reporting thread reports what the others did while it lists a big one.
                if n.is_multiple_of(super::pool::REPORT_EVERY) && !self.cursor.is_empty() {
                    self.report_ready(false);
                }
                let (from, to) = (from.with(name), to.with(name));
                // d_type where the filesystem gives it, lstat where it says DT_UNKNOWN.
                let kind = match Kind::of_d_type(d_type) {
                    Some(kind) => kind,
                    None => match fs::symlink_metadata(from) {
                        Ok(m) => Kind::of(m.file_type()),
                        Err(e) => {
                            self.fail_entry(from, to, None, format!("cannot stat: {e}"));
                            continue;
                        }
                    },
                };
                // -L: a symlink in the tree is copied as what it points to.
                let kind = match kind {
                    Kind::Symlink if self.cfg.dereference.follows(false) => {
                        match fs::metadata(from) {
                            Ok(m) if m.is_dir() && is_cyclic_link(from) => {
                                self.fail(
                                    from,
                                    to,
                                    Kind::Symlink,
                                    "cannot copy cyclic symbolic link".into(),
                                );
                                continue;
                            }
                            Ok(m) => Kind::of(m.file_type()),
                            Err(e) => {
                                self.fail(from, to, Kind::Symlink, format!("cannot follow: {e}"));
                                continue;
                            }
                        }
                    }
                    kind => kind,
                };
                self.copy_entry(from, to, kind);
            }
        }
        self.listing_buffers.push(buf);
    }

    /// Opens a source to read. A symlink is followed where `-L`, `-H` or `-P` follows it
    /// (an operand without -r: cp's rule). Elsewhere what was found as a file or directory
    /// is opened with O_NOFOLLOW, and an entry of a directory being listed relative to that
    /// directory's fd: a symlink swapped in since, at the entry or at a component of its
    /// path, is not followed.
    pub(super) fn open_source(&self, src: &Path, flags: OFlag) -> io::Result<fs::File> {
        let mut flags = flags | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        let at = self.source_at(src);
        if !self.cfg.dereference.follows(at.is_none()) {
            flags |= OFlag::O_NOFOLLOW;
        }
        let (dir, path) = match at {
            Some((dirfd, name)) => (Some(dirfd), Path::new(name)),
            None => (None, src),
        };
        crate::sys::open_interruptible(dir, path, flags, Mode::empty())
            .map(fs::File::from)
            .map_err(io::Error::from)
    }

    /// A source in the directory being listed: that directory's fd and the source's name
    /// in it. None: a top-level operand (opened by its path).
    pub(super) fn source_at<'p>(&self, src: &'p Path) -> Option<(RawFd, &'p OsStr)> {
        match (self.walk.last(), split_name(src)) {
            // Bytes, not components: src was made by joining a name to this very path.
            (Some((dir, fd)), Some((parent, name))) if parent.as_os_str() == dir.as_os_str() => {
                Some((fd.as_raw_fd(), name))
            }
            _ => None,
        }
    }
}

/// A source whose last component, as written, is `.` or `..` (`site/.`, `.`, `a/..`):
/// cp copies the contents of the directory it names, into the destination directory.
fn names_its_contents(src: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes = src.as_os_str().as_bytes();
    while bytes.len() > 1 && bytes.ends_with(b"/") {
        bytes = &bytes[..bytes.len() - 1];
    }
    let last = bytes.rsplit(|&b| b == b'/').next().unwrap_or_default();
    last == b"." || last == b".."
}

/// Removes each of `dirs` (deepest first) that is empty; one that holds anything stays.
fn remove_empty(dirs: &[PathBuf]) {
    for dir in dirs {
        if fs::remove_dir(dir).is_err() {
            return;
        }
    }
}

/// Is `link` a symlink to a directory that holds it (or is the one it is in)? Followed
/// under -L, it would be copied inside its own copy without end.
fn is_cyclic_link(link: &Path) -> bool {
    let parent = link
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match (fs::canonicalize(link), fs::canonicalize(parent)) {
        (Ok(target), Ok(parent)) => parent.starts_with(target),
        _ => false,
    }
}

/// Is `dst` inside the directory `src` (cp: "cannot copy a directory into itself")?
fn inside_itself(src: &Path, dst: &Path) -> Option<String> {
    let src = fs::canonicalize(src).ok()?;
    let parent = dst
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dst = fs::canonicalize(parent).ok()?.join(dst.file_name()?);
    dst.starts_with(&src)
        .then(|| "cannot copy a directory into itself".to_string())
}
