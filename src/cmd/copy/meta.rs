//! Entries that are only metadata (symlinks, FIFOs, device nodes) and the metadata every
//! entry gets: modes through the umask, `--preserve`'s owner, mode and times, and
//! setuid/setgid cleared when the copy does not keep the source's owner.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::Context;
use nix::errno::Errno;
use nix::sys::stat::{FileStat, Mode, SFlag};

use super::entry::{Entry, Kind, Status};
use super::update::mtime_of;
use super::Copier;

impl Copier<'_> {
    /// A directory's mode, once its entries are in. Like cp: without `--preserve` only a
    /// directory the copy created gets one (the source's, through the umask); an existing
    /// one keeps its own. `--preserve` sets the source's exact mode on an existing one too
    /// (cp -p), and prints a warning naming both modes when that opens it to anyone.
    pub(super) fn dir_metadata(
        &mut self,
        dst: &Path,
        meta: &fs::Metadata,
        existing: Option<u32>,
    ) -> anyhow::Result<()> {
        if !self.cfg.preserve {
            let mode = meta.mode() & 0o777;
            return match existing {
                Some(_) => Ok(()),
                // Made with the owner's rwx added while it fills: already right when the
                // source has them (cp does not chmod then either).
                None if mode & 0o700 == 0o700 => Ok(()),
                None => chmod_path(dst, mode & !umask()),
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

    pub(super) fn copy_symlink(&mut self, src: &Path, dst: &Path) {
        let target = match fs::read_link(src) {
            Ok(t) => t,
            Err(e) => return self.fail(src, dst, Kind::Symlink, format!("cannot read link: {e}")),
        };
        if let Ok(dst_meta) = fs::symlink_metadata(dst) {
            // cp's rule: replacing what the link names (or the link itself) would leave a
            // link to itself and lose the bytes it pointed at.
            let identity = |m: &fs::Metadata| (m.dev(), m.ino());
            let is_dst =
                |m: io::Result<fs::Metadata>| m.is_ok_and(|m| identity(&m) == identity(&dst_meta));
            if is_dst(fs::metadata(src)) || is_dst(fs::symlink_metadata(src)) {
                return self.fail(
                    src,
                    dst,
                    Kind::Symlink,
                    format!(
                        "'{}' and '{}' are the same file: refusing (destination untouched)",
                        src.display(),
                        dst.display()
                    ),
                );
            }
            let src_mtime = fs::symlink_metadata(src)
                .map(|m| mtime_of(&m))
                .unwrap_or_default();
            if let Some(why) = self.keeps_existing(dst, &dst_meta, src_mtime) {
                return self.skip(src, dst, Kind::Symlink, why);
            }
            if let Err(e) = fs::remove_file(dst) {
                return self.fail(src, dst, Kind::Symlink, format!("cannot replace: {e}"));
            }
        }
        if let Err(e) = std::os::unix::fs::symlink(&target, dst) {
            return self.fail(
                src,
                dst,
                Kind::Symlink,
                format!("cannot create symlink: {e}"),
            );
        }
        let mut entry = Entry::new(src, dst, Some(Kind::Symlink));
        if self.cfg.preserve {
            if let Ok(meta) = fs::symlink_metadata(src) {
                if let Err(e) = preserve_path(dst, &meta, false) {
                    entry.status = Status::Failed(format!("{e:#}"));
                }
            }
        }
        self.totals.symlinks += 1;
        self.done(entry);
    }

    pub(super) fn copy_special(&mut self, src: &Path, dst: &Path, kind: Kind) {
        if !self.cfg.special || kind == Kind::Socket {
            return self.fail(
                src,
                dst,
                kind,
                format!(
                    "is a {}: not copied (--special recreates FIFOs and device nodes)",
                    kind.word()
                ),
            );
        }
        if let Ok(dst_meta) = fs::symlink_metadata(dst) {
            let src_mtime = fs::symlink_metadata(src)
                .map(|m| mtime_of(&m))
                .unwrap_or_default();
            if let Some(why) = self.keeps_existing(dst, &dst_meta, src_mtime) {
                return self.skip(src, dst, kind, why);
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
                self.done(Entry::new(src, dst, Some(kind)));
            }
            Err(e) => self.fail(src, dst, kind, format!("cannot create: {e:#}")),
        }
    }
}

/// The process's umask, read once. Never by setting it and back while the workers of
/// `-j` create files (that window gave their files 0644 under `umask 077`): from
/// `/proc/self/status` (Linux 4.7+), and only without it by set-and-restore, which
/// [`read_umask_before_threads`] makes happen before any worker starts.
fn umask() -> u32 {
    static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        let from_proc = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Umask:"))
                    .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
            });
        from_proc.unwrap_or_else(|| {
            let old = nix::sys::stat::umask(Mode::from_bits_truncate(0o022));
            nix::sys::stat::umask(old);
            old.bits()
        })
    })
}

/// Called by `copy` before its workers start, so that no later read can touch the umask.
pub(super) fn read_umask_before_threads() {
    umask();
}

/// `-p` on an open file: mode (with setuid/setgid/sticky, see [`preserved_mode`]), owner
/// where permitted, access and modification times. The owner first: a chown clears setuid.
pub(super) fn preserve_fd(fd: BorrowedFd<'_>, st: &FileStat) -> anyhow::Result<()> {
    let raw = fd.as_raw_fd();
    let owner_kept = set_owner(st.st_uid, st.st_gid, |uid, gid| {
        nix::unistd::fchown(raw, uid, gid)
    })?;
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
fn preserve_path(dst: &Path, meta: &fs::Metadata, with_mode: bool) -> anyhow::Result<()> {
    let owner_kept = chown_path(dst, meta)?;
    if with_mode {
        chmod_path(dst, preserved_mode(meta.mode(), owner_kept))?;
    }
    times_path(dst, meta)
}

/// The source's owner, not following a symlink. Ok(false): not permitted (not root).
fn chown_path(dst: &Path, meta: &fs::Metadata) -> anyhow::Result<bool> {
    set_owner(meta.uid(), meta.gid(), |uid, gid| {
        nix::unistd::fchownat(
            None,
            dst,
            uid,
            gid,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
    })
}

/// The owner and group through `chown`; where the owner is not permitted (not root), the
/// group alone, which a member of it may set (cp's rule: a failure there is no error).
/// True when the owner was kept.
fn set_owner(
    uid: u32,
    gid: u32,
    chown: impl Fn(Option<nix::unistd::Uid>, Option<nix::unistd::Gid>) -> nix::Result<()>,
) -> anyhow::Result<bool> {
    match chown(Some(uid.into()), Some(gid.into())) {
        Ok(()) => Ok(true),
        Err(Errno::EPERM) => {
            let _ = chown(None, Some(gid.into()));
            Ok(false)
        }
        Err(e) => Err(e).context("cannot set the owner"),
    }
}

/// chmod by path without following a symlink there (glibc goes through an O_PATH fd and
/// refuses a symlink), for what zerocat cannot open: a FIFO would block, a directory it
/// did not open.
fn chmod_path(dst: &Path, mode: u32) -> anyhow::Result<()> {
    nix::sys::stat::fchmodat(
        None,
        dst,
        Mode::from_bits_truncate(mode),
        nix::sys::stat::FchmodatFlags::NoFollowSymlink,
    )
    .context("cannot set the mode")
}

fn times_path(dst: &Path, meta: &fs::Metadata) -> anyhow::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::preserved_mode;

    #[test]
    fn preserve_keeps_setuid_setgid_and_sticky_only_with_the_owner() {
        assert_eq!(preserved_mode(0o100_6755, true), 0o6755);
        assert_eq!(preserved_mode(0o100_6755, false), 0o0755);
        assert_eq!(preserved_mode(0o040_1777, false), 0o1777);
    }
}
