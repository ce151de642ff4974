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
        DataPath::Splice | DataPath::Sendfile
            if src.kind == FdKind::Datagram || dst.kind == FdKind::Datagram =>
        {
            bad("a datagram socket keeps its datagrams' bounds only through userspace")
        }
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
        // A datagram is one read and one write: only userspace keeps its bounds.
        (Datagram, _) | (_, Datagram) => &[],
        (File, File) => &[DataPath::CopyFileRange, DataPath::Splice],
        (Pipe, _) | (_, Pipe) => &[DataPath::Splice],
        (File, Socket | CharDevice) => &[DataPath::Sendfile, DataPath::Splice],
        (Socket, Socket | File | CharDevice) => &[DataPath::Splice],
        _ => &[],
    };
    Ok(fast.iter().copied().chain([DataPath::Userspace]).collect())
}

#[cfg(test)]
mod tests {
    //! The table of DESIGN §3, row by row, on fds classified from real ones.

    use std::fs::File;
    use std::os::fd::{AsFd, OwnedFd};
    use std::os::unix::net::UnixStream;

    use super::*;
    use DataPath::{CopyFileRange, Reflink, Sendfile, Splice, Tee, Userspace};
    use FdKind::{CharDevice, Directory, Other, Pipe, Socket, Tty};

    /// Real fds of each kind zerocat meets, kept open while their info is used. A tty and
    /// "other" (an eventfd, a block of /proc…) are not always at hand: assumed.
    struct Fds {
        _keep: Vec<OwnedFd>,
        infos: Vec<FdInfo>,
    }

    fn fds() -> Fds {
        let file: OwnedFd = tempfile::tempfile().unwrap().into();
        let (pipe, pipe_w) = nix::unistd::pipe().unwrap();
        let (socket, peer) = UnixStream::pair().unwrap();
        let null: OwnedFd = File::open("/dev/null").unwrap().into();
        let dir: OwnedFd = File::open(std::env::temp_dir()).unwrap().into();
        let keep = vec![file, pipe, pipe_w, socket.into(), peer.into(), null, dir];
        let mut infos: Vec<FdInfo> = [0, 1, 3, 5, 6]
            .iter()
            .map(|&i| FdInfo::of(keep[i].as_fd()).unwrap())
            .collect();
        infos.extend([FdInfo::assumed(Tty), FdInfo::assumed(Other)]);
        let kinds: Vec<FdKind> = infos.iter().map(|i| i.kind).collect();
        assert_eq!(
            kinds,
            [
                FdKind::File,
                Pipe,
                Socket,
                CharDevice,
                Directory,
                Tty,
                Other
            ]
        );
        Fds { _keep: keep, infos }
    }

    impl Fds {
        fn of(&self, kind: FdKind) -> &FdInfo {
            self.infos.iter().find(|i| i.kind == kind).unwrap()
        }
    }

    const STREAMS: [FdKind; 6] = [FdKind::File, Pipe, Socket, Tty, CharDevice, Other];

    #[test]
    fn auto_follows_the_table_of_design_section_3() {
        let fds = fds();
        let auto = |src, dst| chain(fds.of(src), fds.of(dst), Via::Auto).unwrap();
        // file -> file: copy_file_range, then splice through our pipe, then userspace.
        assert_eq!(
            auto(FdKind::File, FdKind::File),
            [CopyFileRange, Splice, Userspace]
        );
        // file -> socket or char device: sendfile first.
        for dst in [Socket, CharDevice] {
            assert_eq!(
                auto(FdKind::File, dst),
                [Sendfile, Splice, Userspace],
                "{dst}"
            );
        }
        // pipe -> anything, anything -> pipe: splice.
        for other in STREAMS {
            assert_eq!(auto(Pipe, other), [Splice, Userspace], "pipe -> {other}");
            assert_eq!(auto(other, Pipe), [Splice, Userspace], "{other} -> pipe");
        }
        // socket -> socket / file / char device: splice through our pipe.
        for dst in [Socket, FdKind::File, CharDevice] {
            assert_eq!(auto(Socket, dst), [Splice, Userspace], "socket -> {dst}");
        }
        // tty, other, and what no fast path serves: userspace alone.
        for (src, dst) in [
            (FdKind::File, Tty),
            (FdKind::File, Other),
            (Tty, FdKind::File),
            (CharDevice, FdKind::File),
            (CharDevice, Socket),
            (Socket, Tty),
            (Other, Socket),
            (Tty, Tty),
        ] {
            assert_eq!(auto(src, dst), [Userspace], "{src} -> {dst}");
        }
    }

    #[test]
    fn every_auto_chain_ends_in_userspace_and_holds_only_paths_that_can_take_the_pair() {
        let fds = fds();
        for src in STREAMS {
            for dst in STREAMS {
                let (s, d) = (fds.of(src), fds.of(dst));
                let paths = chain(s, d, Via::Auto).unwrap();
                assert_eq!(paths.last(), Some(&Userspace), "{src} -> {dst}");
                for path in paths {
                    assert_eq!(can_take(path, s, d), Ok(()), "{path}: {src} -> {dst}");
                }
            }
        }
    }

    #[test]
    fn a_directory_on_either_side_is_refused_whatever_the_path() {
        let fds = fds();
        let (dir, file) = (fds.of(Directory), fds.of(FdKind::File));
        for via in [Via::Auto, Via::Forced(Userspace), Via::Forced(Splice)] {
            for (s, d) in [(dir, file), (file, dir)] {
                let err = chain(s, d, via).unwrap_err();
                assert!(err.contains("a directory holds no byte stream"), "{err}");
            }
        }
    }

    #[test]
    fn a_forced_path_is_the_whole_chain_or_refused_before_any_byte() {
        let fds = fds();
        let forced = |path, src, dst| chain(fds.of(src), fds.of(dst), Via::Forced(path));
        assert_eq!(
            forced(CopyFileRange, FdKind::File, FdKind::File),
            Ok(vec![CopyFileRange])
        );
        assert_eq!(forced(Sendfile, FdKind::File, Pipe), Ok(vec![Sendfile]));
        assert_eq!(forced(Splice, Socket, Socket), Ok(vec![Splice]));
        assert_eq!(forced(Userspace, Tty, Other), Ok(vec![Userspace]));
        // What can_take refuses: the message names the path, the kinds and why.
        let refusals = [
            (
                CopyFileRange,
                FdKind::File,
                Pipe,
                "regular files on both sides",
            ),
            (
                CopyFileRange,
                Socket,
                FdKind::File,
                "regular files on both sides",
            ),
            (
                Reflink,
                FdKind::File,
                FdKind::File,
                "only for `zerocat copy`",
            ),
            (Reflink, Pipe, FdKind::File, "regular files on both sides"),
            (Sendfile, Pipe, Socket, "a regular file as source"),
            (Sendfile, Socket, FdKind::File, "a regular file as source"),
            (Tee, Pipe, Pipe, "one-to-many"),
        ];
        for (path, src, dst, why) in refusals {
            let err = forced(path, src, dst).unwrap_err();
            assert!(
                err.starts_with(&format!("{path} cannot move {src} -> {dst}")),
                "{err}"
            );
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn copy_puts_reflink_first_between_files_as_its_mode_says() {
        use ReflinkMode::{Always, Auto, Never};
        let fds = fds();
        let (file, pipe) = (fds.of(FdKind::File), fds.of(Pipe));
        let copy = |src, dst, via, mode| chain_for_copy(src, dst, via, mode);
        assert_eq!(
            copy(file, file, Via::Auto, Auto),
            Ok(vec![Reflink, CopyFileRange, Splice, Userspace])
        );
        assert_eq!(
            copy(file, file, Via::Auto, Never),
            Ok(vec![CopyFileRange, Splice, Userspace])
        );
        assert_eq!(copy(file, file, Via::Auto, Always), Ok(vec![Reflink]));
        assert_eq!(
            copy(file, file, Via::Forced(Reflink), Auto),
            Ok(vec![Reflink])
        );
        assert_eq!(
            copy(file, file, Via::Forced(CopyFileRange), Auto),
            Ok(vec![CopyFileRange])
        );
        assert_eq!(
            copy(file, file, Via::Forced(Userspace), Never),
            Ok(vec![Userspace])
        );
        // Not between files: no reflink in an automatic chain…
        assert_eq!(
            copy(file, pipe, Via::Auto, Auto),
            Ok(vec![Splice, Userspace])
        );
        assert_eq!(
            copy(pipe, file, Via::Auto, Never),
            Ok(vec![Splice, Userspace])
        );
        // …and a refusal where reflink is demanded; contradictions are refused too.
        let refused = [
            (file, pipe, Via::Auto, Always, "regular files on both sides"),
            (
                pipe,
                file,
                Via::Forced(Reflink),
                Auto,
                "regular files on both sides",
            ),
            (
                file,
                file,
                Via::Forced(Reflink),
                Never,
                "contradicts --reflink=never",
            ),
            (
                file,
                file,
                Via::Forced(Splice),
                Always,
                "contradicts --reflink=always",
            ),
        ];
        for (src, dst, via, mode, why) in refused {
            let err = copy(src, dst, via, mode).unwrap_err();
            assert!(err.contains(why), "{via:?} {mode:?}: {err}");
        }
    }
}

/// The chain of one regular file of `zerocat copy`, from its first data extent to its last:
/// [`chain_for_copy`] without the paths that cannot serve this file, narrowed as the
/// extents show what the kernel refuses.
/// Held inline (each path at most once): a tree's copy makes one a file, and copies the
/// last one made when nothing it depends on changed (no allocation a file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileChain {
    paths: [DataPath; DataPath::ALL.len()],
    len: usize,
    /// `--via` or `--reflink=always` named the one path: it runs whatever, and its refusal
    /// is an error, never a reason to leave it out.
    forced: bool,
}

impl FileChain {
    /// [`chain_for_copy`] for one file. Unless a path is forced, reflink is left out when the
    /// copy does not start at the file's beginning (`from_start`: a clone replaces the whole
    /// destination, never the rest of a resumed one), and reflink and copy_file_range when
    /// the source is `sizeless` (its size says 0, or procfs/sysfs: copy_file_range says 0
    /// there too) or when every byte must be written (`fills_holes`, `--sparse=never`: a
    /// clone, and copy_file_range, which may clone, keep the source's holes; cp avoids copy
    /// offload there too).
    pub fn new(
        src: &FdInfo,
        dst: &FdInfo,
        via: Via,
        reflink: ReflinkMode,
        from_start: bool,
        sizeless: bool,
        fills_holes: bool,
    ) -> Result<FileChain, String> {
        let listed = chain_for_copy(src, dst, via, reflink)?;
        let mut chain = FileChain {
            paths: [DataPath::Userspace; DataPath::ALL.len()],
            len: 0,
            forced: matches!(via, Via::Forced(_)) || reflink == ReflinkMode::Always,
        };
        for path in listed {
            if !chain.paths().contains(&path) {
                chain.paths[chain.len] = path;
                chain.len += 1;
            }
        }
        chain.leave_out(|path| match path {
            DataPath::Reflink => !from_start || sizeless || fills_holes,
            DataPath::CopyFileRange => sizeless || fills_holes,
            _ => false,
        });
        Ok(chain)
    }

    /// Leaves out the paths `unfit` names (such as those [`super::refuses_the_filesystems`] said of
    /// an earlier file between the same filesystems), unless the path is forced.
    pub fn leave_out(&mut self, unfit: impl Fn(DataPath) -> bool) {
        if !self.forced {
            let mut kept = 0;
            for i in 0..self.len {
                let path = self.paths[i];
                if !unfit(path) {
                    self.paths[kept] = path;
                    kept += 1;
                }
            }
            self.len = kept;
        }
    }

    pub fn paths(&self) -> &[DataPath] {
        &self.paths[..self.len]
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
        FileChain::new(&file, &file, via, reflink, from_start, sizeless, false).unwrap()
    }

    #[test]
    fn filling_holes_leaves_out_the_paths_that_may_keep_them() {
        let file = FdInfo::assumed(FdKind::File);
        let chain = FileChain::new(
            &file,
            &file,
            Via::Auto,
            ReflinkMode::Auto,
            true,
            false,
            true,
        )
        .unwrap();
        assert_eq!(chain.paths(), [Splice, Userspace]);
        let forced = Via::Forced(CopyFileRange);
        let chain = FileChain::new(&file, &file, forced, ReflinkMode::Auto, true, false, true);
        assert_eq!(
            chain.unwrap().paths(),
            [CopyFileRange],
            "a forced path runs"
        );
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
}
