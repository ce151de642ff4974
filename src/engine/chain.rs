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

