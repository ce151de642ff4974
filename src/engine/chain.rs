//! Which paths to try, in order, for a pair of fds (DESIGN §3): a pure table.

use super::{DataPath, Via};
use crate::sys::fdkind::{FdInfo, FdKind};

/// Can `path` serve this pair of fds at all? Used to build the chain and to reject a
/// forced `--via` before any byte moves. The kernel still has the last word.
pub fn can_take(path: DataPath, src: &FdInfo, dst: &FdInfo) -> Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "{path} cannot move {} -> {}: {why}",
            src.kind, dst.kind
        ))
    };
    if src.kind == FdKind::Directory || dst.kind == FdKind::Directory {
        return bad("a directory holds no byte stream");
    }
    match path {
        DataPath::CopyFileRange | DataPath::Reflink
            if src.kind != FdKind::File || dst.kind != FdKind::File =>
        {
            bad("it needs regular files on both sides")
        }
        DataPath::Reflink => bad("reflink is only for `zerocat copy`"),
        DataPath::Sendfile if src.kind != FdKind::File => bad("it needs a regular file as source"),
        DataPath::Tee => bad("tee(2) is for one-to-many: `zerocat tee`"),
        _ => Ok(()),
    }
}

/// `--reflink` of `zerocat copy`: whether FICLONE goes first in the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReflinkMode {
    /// Clone where the filesystem can, else copy.
    #[default]
    Auto,
    /// Clone or fail.
    Always,
    /// Never clone.
    Never,
}

/// The chain of `zerocat copy` for one file: [`chain`], with `DataPath::Reflink` in front when
/// both ends are regular files and `reflink` allows it (`Always`: reflink alone, so a
/// filesystem that cannot clone is an error). `--via reflink` is `--reflink=always`.
pub fn chain_for_copy(
    src: &FdInfo,
    dst: &FdInfo,
    via: Via,
    reflink: ReflinkMode,
) -> Result<Vec<DataPath>, String> {
    let files = src.kind == FdKind::File && dst.kind == FdKind::File;
    match (via, reflink) {
        (Via::Forced(DataPath::Reflink), ReflinkMode::Never) => {
            Err("--via reflink contradicts --reflink=never".to_string())
        }
        (Via::Forced(DataPath::Reflink), _) | (Via::Auto, ReflinkMode::Always) => {
            if !files {
                return Err(format!(
                    "reflink cannot move {} -> {}: it needs regular files on both sides",
                    src.kind, dst.kind
                ));
            }
            Ok(vec![DataPath::Reflink])
        }
        (Via::Forced(path), ReflinkMode::Always) => {
            Err(format!("--via {path} contradicts --reflink=always"))
        }
        (Via::Auto, ReflinkMode::Auto) if files => {
            let mut paths = vec![DataPath::Reflink];
            paths.extend(chain(src, dst, via)?);
            Ok(paths)
        }
        _ => chain(src, dst, via),
    }
}

/// The paths to try, in order (DESIGN §3).
pub fn chain(src: &FdInfo, dst: &FdInfo, via: Via) -> Result<Vec<DataPath>, String> {
    use FdKind::*;
    if let Via::Forced(path) = via {
        can_take(path, src, dst)?;
        return Ok(vec![path]);
    }
    can_take(DataPath::Userspace, src, dst)?;
    let fast: &[DataPath] = match (src.kind, dst.kind) {
        (File, File) => &[DataPath::CopyFileRange, DataPath::Splice],
        (Pipe, _) | (_, Pipe) => &[DataPath::Splice],
        (File, Socket | CharDevice) => &[DataPath::Sendfile, DataPath::Splice],
        (Socket, Socket | File | CharDevice) => &[DataPath::Splice],
        _ => &[],
    };
    Ok(fast.iter().copied().chain([DataPath::Userspace]).collect())
}

/// Is this refusal about the pair of filesystems (or the kernel), not about the one file?
/// Then every file between the same two filesystems meets it again, and a tree copy need
/// not ask that path again. EINVAL, EBADF, EPERM… can be about one file (its flags, its
/// offset, an immutable file), so they are asked again; a 0 from copy_file_range too.
pub fn refuses_the_filesystems(reason: super::Reason) -> bool {
    use nix::errno::Errno;
    match reason {
        super::Reason::Errno(errno) => matches!(
            errno,
            Errno::EXDEV | Errno::EOPNOTSUPP | Errno::ENOSYS | Errno::ENOTTY
        ),
        super::Reason::FirstCallReturnedZero | super::Reason::ReturnedZeroBeforeEnd => false,
    }
}

/// The chain of one regular file of `zerocat copy`, from its first data extent to its last:
/// [`chain_for_copy`] without the paths that cannot serve this file, narrowed as the
/// extents show what the kernel refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChain {
    paths: Vec<DataPath>,
    /// `--via` or `--reflink=always` named the one path: it runs whatever, and its refusal
    /// is an error, never a reason to leave it out.
    forced: bool,
}

impl FileChain {
    /// [`chain_for_copy`] for one file. Unless a path is forced, reflink is left out when the
    /// copy does not start at the file's beginning (`from_start`: a clone replaces the whole
    /// destination, never the rest of a resumed one), and reflink and copy_file_range when
    /// the source is `sizeless` (its size says 0, or procfs/sysfs: copy_file_range says 0
    /// there too).
    pub fn new(
        src: &FdInfo,
        dst: &FdInfo,
        via: Via,
        reflink: ReflinkMode,
        from_start: bool,
        sizeless: bool,
    ) -> Result<FileChain, String> {
        let mut chain = FileChain {
            paths: chain_for_copy(src, dst, via, reflink)?,
            forced: matches!(via, Via::Forced(_)) || reflink == ReflinkMode::Always,
        };
        chain.leave_out(|path| match path {
            DataPath::Reflink => !from_start || sizeless,
            DataPath::CopyFileRange => sizeless,
            _ => false,
        });
        Ok(chain)
    }

    /// Leaves out the paths `unfit` names (such as those [`refuses_the_filesystems`] said of
    /// an earlier file between the same filesystems), unless the path is forced.
    pub fn leave_out(&mut self, unfit: impl Fn(DataPath) -> bool) {
        if !self.forced {
            self.paths.retain(|&path| !unfit(path));
        }
    }

    pub fn paths(&self) -> &[DataPath] {
        &self.paths
    }

    /// Whether `--sparse=always` may read this file in userspace to find runs of zeros
    /// ([`super::transfer_skipping_zeros`]) instead of walking the chain: not when a path is
    /// forced, which runs as asked.
    pub fn may_skip_zeros(&self) -> bool {
        !self.forced
    }

    /// The chain for the next data extent of the same file, after `record` of this one: a
    /// path that refused this extent is not asked again, and reflink, which clones the whole
    /// file whatever the extent ([`super::transfer_upto`]), ran on the first or not at all.
    pub fn next_extent(&mut self, record: &super::Record) {
        self.leave_out(|path| {
            path == DataPath::Reflink || record.fallbacks.iter().any(|f| f.from == path)
        });
    }
}

#[cfg(test)]
mod file_chain_tests {
    use nix::errno::Errno;

    use super::*;
    use crate::engine::{Fallback, Reason, Record};
    use DataPath::{CopyFileRange, Reflink, Splice, Userspace};

    fn file_chain(via: Via, reflink: ReflinkMode, from_start: bool, sizeless: bool) -> FileChain {
        let file = FdInfo::assumed(FdKind::File);
        FileChain::new(&file, &file, via, reflink, from_start, sizeless).unwrap()
    }

    fn refused(from: DataPath, errno: Errno) -> Fallback {
        Fallback {
            from,
            to: Some(Userspace),
            reason: Reason::Errno(errno),
        }
    }

    #[test]
    fn a_whole_file_starts_with_reflink() {
        let chain = file_chain(Via::Auto, ReflinkMode::Auto, true, false);
        assert_eq!(chain.paths(), [Reflink, CopyFileRange, Splice, Userspace]);
        assert!(chain.may_skip_zeros());
    }

    #[test]
    fn the_rest_of_a_resumed_file_is_not_cloned() {
        let chain = file_chain(Via::Auto, ReflinkMode::Auto, false, false);
        assert_eq!(chain.paths(), [CopyFileRange, Splice, Userspace]);
    }

    #[test]
    fn a_sizeless_source_is_neither_cloned_nor_copy_file_ranged() {
        let chain = file_chain(Via::Auto, ReflinkMode::Auto, true, true);
        assert_eq!(chain.paths(), [Splice, Userspace]);
    }

    #[test]
    fn a_forced_path_stays_whatever_the_file() {
        for (via, reflink, path) in [
            (Via::Forced(CopyFileRange), ReflinkMode::Auto, CopyFileRange),
            (Via::Forced(Reflink), ReflinkMode::Auto, Reflink),
            (Via::Auto, ReflinkMode::Always, Reflink),
        ] {
            let mut chain = file_chain(via, reflink, false, true);
            chain.leave_out(|_| true);
            chain.next_extent(&Record {
                paths: vec![(path, 0)],
                fallbacks: vec![refused(path, Errno::EXDEV)],
            });
            assert_eq!(chain.paths(), [path]);
            assert!(!chain.may_skip_zeros());
        }
    }

    #[test]
    fn the_next_extent_asks_neither_reflink_nor_what_refused_this_one() {
        let mut chain = file_chain(Via::Auto, ReflinkMode::Auto, true, false);
        chain.next_extent(&Record {
            paths: vec![(CopyFileRange, 0), (Splice, 4096)],
            fallbacks: vec![refused(CopyFileRange, Errno::EINVAL)],
        });
        assert_eq!(chain.paths(), [Splice, Userspace]);
    }

    #[test]
    fn only_refusals_about_the_filesystems_are_remembered() {
        for errno in [
            Errno::EXDEV,
            Errno::EOPNOTSUPP,
            Errno::ENOSYS,
            Errno::ENOTTY,
        ] {
            assert!(refuses_the_filesystems(Reason::Errno(errno)), "{errno}");
        }
        for errno in [Errno::EINVAL, Errno::EBADF, Errno::EPERM, Errno::ETXTBSY] {
            assert!(!refuses_the_filesystems(Reason::Errno(errno)), "{errno}");
        }
        assert!(!refuses_the_filesystems(Reason::FirstCallReturnedZero));
    }
}
