//! `--atomic`: a file is written to a temporary in its destination's directory and renamed
//! over the destination only when complete (synced with `--sync`, compared with
//! `--verify`). Until then the old destination is untouched: a signal, a full disk, a file
//! size limit or a failed verify leave it byte for byte, and no temporary behind.
//!
//! The temporary is an O_TMPFILE where the filesystem has them (ext4, XFS, btrfs, tmpfs): it
//! has no name, so even SIGKILL leaves nothing. When complete it is linked in under a hidden
//! name (`linkat` of `/proc/self/fd/N`) and renamed over the destination; elsewhere it is a
//! hidden `.NAME.zerocat-XXXXXX` created with O_EXCL, removed on failure.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode};

use super::entry::Status;
use super::Copier;
use crate::exit::UsageError;

/// Where a file's bytes go: its destination, opened in place, or a temporary renamed over
/// it at the end (`--atomic`).
pub(super) enum Sink {
    InPlace(OwnedFd),
    Atomic(Temp),
}

impl Sink {
    pub(super) fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Sink::InPlace(fd) => fd.as_fd(),
            Sink::Atomic(temp) => temp.fd.as_ref().expect("open until commit").as_fd(),
        }
    }

    /// Closes the destination (close(2) may report what the writes did not: NFS, quotas);
    /// a temporary is then renamed over its destination (and, with `sync`, the directory
    /// synced so the rename is on disk too).
    pub(super) fn finish(self, sync: bool) -> Result<(), String> {
        match self {
            Sink::InPlace(fd) => {
                nix::unistd::close(fd.into_raw_fd()).map_err(|err| format!("cannot close: {err}"))
            }
            Sink::Atomic(temp) => temp.commit(sync),
        }
    }
}

/// A temporary in the destination's directory. Dropped before [`Temp::commit`], it leaves
/// nothing: an O_TMPFILE goes with its fd, a named one is unlinked.
pub(super) struct Temp {
    /// Open until [`Temp::commit`] closes it.
    fd: Option<OwnedFd>,
    dir: PathBuf,
    /// The name the temporary has in `dir`, once it has one.
    name: Option<PathBuf>,
    target: PathBuf,
}

impl Copier<'_> {
    /// `--atomic`: checks what is at `dst` (`-n`, `--update`, a directory, the same file as
    /// the source, a symlink followed to its target) and creates the temporary. The mode is
    /// the source's through the umask for a new file, the old destination's for one
    /// replaced (as an overwrite in place keeps it), and its owner where permitted.
    pub(super) fn open_temporary(
        &self,
        src: &Path,
        dst: &Path,
        sst: &FileStat,
    ) -> Result<Sink, Status> {
        let mut target = dst.to_path_buf();
        let mut old = None;
        if let Ok(m) = fs::symlink_metadata(dst) {
            if let Some(why) = self.keeps_existing(dst, &m, (sst.st_mtime, sst.st_mtime_nsec)) {
                return Err(Status::Skipped(why));
            }
            let m = if m.file_type().is_symlink() {
                target = written_through(dst)?;
                fs::metadata(&target)
                    .map_err(|err| format!("cannot stat the destination: {err}"))?
            } else {
                m
            };
            if m.is_dir() {
                return Err("cannot overwrite a directory with a file"
                    .to_string()
                    .into());
            }
            if (m.dev(), m.ino()) == (sst.st_dev, sst.st_ino) {
                return Err(format!(
                    "'{}' and '{}' are the same file: refusing (destination untouched)",
                    src.display(),
                    dst.display()
                )
                .into());
            }
            if !m.is_file() {
                return Err(
                    "--atomic replaces regular files only (the destination is not one)"
                        .to_string()
                        .into(),
                );
            }
            old = Some(m);
        }
        let temp = Temp::create(&target, sst.st_mode & 0o777).map_err(|err| {
            format!(
                "--atomic: cannot create a temporary in '{}': {err}",
                parent_of(&target).display()
            )
        })?;
        if let Some(m) = old {
            let raw = temp.raw_fd();
            let _ = nix::unistd::fchown(raw, Some(m.uid().into()), Some(m.gid().into()));
            nix::sys::stat::fchmod(raw, Mode::from_bits_truncate(m.mode() & 0o7777))
                .map_err(|err| format!("--atomic: cannot set the temporary's mode: {err}"))?;
        }
        Ok(Sink::Atomic(temp))
    }
}

/// Where a temporary renamed over `dst` must go: `dst`, or the file a symlink at `dst`
/// names (followed as `cp` writes through it), so the rename replaces that file and the
/// link stays.
pub(super) fn written_through(dst: &Path) -> Result<PathBuf, String> {
    match fs::symlink_metadata(dst) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::canonicalize(dst).map_err(|err| match err.kind() {
                io::ErrorKind::NotFound => "not writing through a dangling symlink".to_string(),
                _ => format!("cannot follow the destination symlink: {err}"),
            })
        }
        _ => Ok(dst.to_path_buf()),
    }
}

/// Refuses `--atomic` when the directory the temporaries go in cannot take a file (no
/// permission, read-only, immutable), before anything is written: a temporary is made
/// there and dropped, which leaves nothing. A directory that does not exist yet is left to
/// the copy to report.
pub(super) fn check_directory(dest: &Path, dest_is_dir: bool) -> Result<(), UsageError> {
    let probe = if dest_is_dir {
        dest.join("probe")
    } else {
        dest.to_path_buf()
    };
    match Temp::create(&probe, 0o600) {
        Ok(temp) => {
            drop(temp);
            Ok(())
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(UsageError(format!(
            "--atomic: cannot create files in '{}': {err}",
            parent_of(&probe).display()
        ))),
    }
}

impl Temp {
    pub(super) fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_ref().expect("open until commit").as_fd()
    }

    pub(super) fn raw_fd(&self) -> i32 {
        self.fd.as_ref().map_or(-1, |fd| fd.as_raw_fd())
    }

    /// An O_TMPFILE in `target`'s directory, or where the filesystem has none, a named one.
    pub(super) fn create(target: &Path, mode: u32) -> io::Result<Temp> {
        let dir = parent_of(target).to_path_buf();
        let flags = OFlag::O_TMPFILE | OFlag::O_RDWR | OFlag::O_CLOEXEC;
        match crate::sys::open_interruptible(None, &dir, flags, Mode::from_bits_truncate(mode)) {
            Ok(fd) => Ok(Temp {
                fd: Some(fd),
                dir,
                name: None,
                target: target.to_path_buf(),
            }),
            // No O_TMPFILE here: the kernel says EOPNOTSUPP, or (before 3.11) EISDIR.
            Err(Errno::EOPNOTSUPP | Errno::EISDIR | Errno::EINVAL) => {
                Temp::create_named(target, mode)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// A hidden `.NAME.zerocat-XXXXXX` next to `target`, created with O_EXCL.
    fn create_named(target: &Path, mode: u32) -> io::Result<Temp> {
        let dir = parent_of(target).to_path_buf();
        loop {
            let name = hidden_name(target);
            let flags = OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR | OFlag::O_CLOEXEC;
            let path = dir.join(&name);
            match crate::sys::open_interruptible(None, &path, flags, Mode::from_bits_truncate(mode))
            {
                Ok(fd) => {
                    return Ok(Temp {
                        fd: Some(fd),
                        dir,
                        name: Some(path),
                        target: target.to_path_buf(),
                    })
                }
                Err(Errno::EEXIST) => continue,
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Gives the temporary its hidden name (an O_TMPFILE is linked in), closes it, renames
    /// it over the target; `sync`: then syncs the directory.
    pub(super) fn commit(mut self, sync: bool) -> Result<(), String> {
        if self.name.is_none() {
            let proc_path = PathBuf::from(format!("/proc/self/fd/{}", self.raw_fd()));
            loop {
                let path = self.dir.join(hidden_name(&self.target));
                match nix::unistd::linkat(None, &proc_path, None, &path, AtFlags::AT_SYMLINK_FOLLOW)
                {
                    Ok(()) => {
                        self.name = Some(path);
                        break;
                    }
                    Err(Errno::EEXIST) => continue,
                    Err(err) => return Err(format!("--atomic: cannot link the temporary: {err}")),
                }
            }
        }
        if let Some(fd) = self.fd.take() {
            nix::unistd::close(fd.into_raw_fd()).map_err(|err| format!("cannot close: {err}"))?;
        }
        let name = self.name.clone().expect("named above");
        fs::rename(&name, &self.target).map_err(|err| {
            format!(
                "--atomic: cannot rename the temporary over '{}': {err}",
                self.target.display()
            )
        })?;
        self.name = None;
        if sync {
            let dir = fs::File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .map_err(|err| format!("cannot sync the directory: {err}"));
            dir?;
        }
        Ok(())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Some(name) = &self.name {
            let _ = fs::remove_file(name);
        }
    }
}

/// The directory a path is in ("." for a bare name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The longest file name Linux filesystems take.
const NAME_MAX: usize = 255;

/// `.NAME.zerocat-XXXXXX`, six letters and digits that differ from call to call (NAME cut
/// to keep the whole within [`NAME_MAX`]).
fn hidden_name(target: &Path) -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    let mut x = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut suffix = String::with_capacity(6);
    for _ in 0..6 {
        suffix.push(LETTERS[(x % LETTERS.len() as u64) as usize] as char);
        x /= LETTERS.len() as u64;
        x ^= x << 13;
    }
    let base = target
        .file_name()
        .map_or(b"file".as_slice(), |n| n.as_bytes());
    // A name may be 255 bytes (NAME_MAX): the temporary's adds 16 (".", ".zerocat-" and
    // six), so a long name is cut to fit (the suffix keeps it unique).
    let base = &base[..base.len().min(NAME_MAX - 16)];
    let mut name = OsString::from(".");
    name.push(std::ffi::OsStr::from_bytes(base));
    name.push(format!(".zerocat-{suffix}"));
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_named_temporary_is_removed_unless_committed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("dst");
        fs::write(&target, b"old").unwrap();
        let temp = Temp::create_named(&target, 0o644).unwrap();
        let name = names_in(dir.path())
            .into_iter()
            .find(|n| n != "dst")
            .unwrap();
        assert!(
            name.starts_with(".dst.zerocat-") && name.len() == 19,
            "{name}"
        );
        nix::unistd::write(temp.fd.as_ref().unwrap(), b"new").unwrap();
        drop(temp);
        assert_eq!(names_in(dir.path()), ["dst"]);
        assert_eq!(fs::read(&target).unwrap(), b"old");

        let temp = Temp::create_named(&target, 0o644).unwrap();
        nix::unistd::write(temp.fd.as_ref().unwrap(), b"new").unwrap();
        temp.commit(true).unwrap();
        assert_eq!(names_in(dir.path()), ["dst"]);
        assert_eq!(fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn an_unnamed_temporary_gets_its_name_at_commit() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("new");
        let temp = Temp::create(&target, 0o600).unwrap();
        nix::unistd::write(temp.fd.as_ref().unwrap(), b"bytes").unwrap();
        assert!(names_in(dir.path()).is_empty() || temp.name.is_some());
        temp.commit(false).unwrap();
        assert_eq!(names_in(dir.path()), ["new"]);
        assert_eq!(fs::read(&target).unwrap(), b"bytes");
    }
}
