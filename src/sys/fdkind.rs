//! Classify a file descriptor: what it is decides which kernel paths can move its bytes.

use std::fmt;
use std::os::fd::{AsRawFd, BorrowedFd};

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::sys::stat::{fstat, FileStat, SFlag};

use super::socket::Mptcp;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdKind {
    /// A regular file (or a block device: both have a page cache and a size).
    File,
    /// A pipe or a FIFO.
    Pipe,
    Socket,
    /// A datagram socket (UDP): each write is one datagram, each read one datagram's
    /// payload. Only userspace moves it: splice would cut datagrams where it pleases.
    Datagram,
    /// A terminal.
    Tty,
    /// Any other character device: /dev/null, /dev/full, /dev/zero…
    CharDevice,
    Directory,
    Other,
}

impl FdKind {
    pub fn name(self) -> &'static str {
        match self {
            FdKind::File => "file",
            FdKind::Pipe => "pipe",
            FdKind::Socket => "socket",
            FdKind::Datagram => "datagram",
            FdKind::Tty => "tty",
            FdKind::CharDevice => "chardev",
            FdKind::Directory => "dir",
            FdKind::Other => "other",
        }
    }

    /// Kind of a file from its mode bits alone (terminals need an fd to tell apart).
    pub fn from_mode(mode: u32) -> FdKind {
        match SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits()) {
            SFlag::S_IFREG | SFlag::S_IFBLK => FdKind::File,
            SFlag::S_IFIFO => FdKind::Pipe,
            SFlag::S_IFSOCK => FdKind::Socket,
            SFlag::S_IFCHR => FdKind::CharDevice,
            SFlag::S_IFDIR => FdKind::Directory,
            _ => FdKind::Other,
        }
    }
}

impl fmt::Display for FdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What zerocat knows about one open fd.
#[derive(Debug, Clone, Copy)]
pub struct FdInfo {
    pub kind: FdKind,
    /// Opened with O_APPEND: copy_file_range, splice and sendfile refuse such sinks.
    pub append: bool,
    pub nonblocking: bool,
    /// Size of a regular file, where the kernel knows it.
    pub size: Option<u64>,
    /// (st_dev, st_ino): tells whether two fds name the same file.
    pub identity: (u64, u64),
    /// The largest datagram to send into a datagram socket, when its endpoint says
    /// (`udp:...,size=N`); None: the largest UDP payload.
    pub datagram_size: Option<usize>,
    /// A datagram source ends after this long without a datagram (`--idle-timeout`: UDP
    /// has no EOF but an empty datagram, which nc never sends).
    pub quiet_end: Option<std::time::Duration>,
    /// What became of `,mptcp` on this connection; None when its endpoint did not ask.
    pub mptcp: Option<Mptcp>,
}

impl FdInfo {
    pub fn of(fd: BorrowedFd<'_>) -> nix::Result<FdInfo> {
        let mut info = FdInfo::from_stat(&fstat(fd.as_raw_fd())?);
        let flags = OFlag::from_bits_truncate(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)?);
        if info.kind == FdKind::CharDevice && nix::unistd::isatty(fd.as_raw_fd()).unwrap_or(false) {
            info.kind = FdKind::Tty;
        }
        if info.kind == FdKind::Socket
            && nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::SockType)
                == Ok(nix::sys::socket::SockType::Datagram)
        {
            info.kind = FdKind::Datagram;
        }
        info.append = flags.contains(OFlag::O_APPEND);
        info.nonblocking = flags.contains(OFlag::O_NONBLOCK);
        Ok(info)
    }

    /// What a stat already says (kind, size, identity), with the flags of an fd zerocat
    /// opened itself: no O_APPEND, blocking. [`FdInfo::of`] adds a real fd's flags.
    pub fn from_stat(st: &FileStat) -> FdInfo {
        let kind = FdKind::from_mode(st.st_mode);
        FdInfo {
            kind,
            append: false,
            nonblocking: false,
            size: regular_size(st, kind),
            identity: (st.st_dev, st.st_ino),
            datagram_size: None,
            quiet_end: None,
            mptcp: None,
        }
    }

    /// A regular file on device `dev` that this process has just created (O_EXCL) and
    /// opened: empty, blocking, no O_APPEND. Its inode number is left 0: nothing can be
    /// the same file as one that did not exist a moment ago.
    pub fn created_file(dev: u64) -> FdInfo {
        FdInfo {
            kind: FdKind::File,
            append: false,
            nonblocking: false,
            size: Some(0),
            identity: (dev, 0),
            datagram_size: None,
            quiet_end: None,
            mptcp: None,
        }
    }

    /// An fd of `kind` that is not open yet (a plan, `--explain`): nothing else is known.
    pub fn assumed(kind: FdKind) -> FdInfo {
        FdInfo {
            kind,
            append: false,
            nonblocking: false,
            size: None,
            identity: (0, 0),
            datagram_size: None,
            quiet_end: None,
            mptcp: None,
        }
    }

    /// True when both are the same regular file: reading and writing it at once
    /// would eat its own output (cat: "input file is output file").
    pub fn same_file(&self, other: &FdInfo) -> bool {
        self.kind == FdKind::File && other.kind == FdKind::File && self.identity == other.identity
    }
}

fn regular_size(st: &FileStat, kind: FdKind) -> Option<u64> {
    (kind == FdKind::File && (st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFREG.bits())
        .then_some(st.st_size as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn classifies_pipe_file_socket_and_null() {
        let (r, _w) = nix::unistd::pipe().unwrap();
        assert_eq!(FdInfo::of(r.as_fd()).unwrap().kind, FdKind::Pipe);

        let file = tempfile::tempfile().unwrap();
        let info = FdInfo::of(file.as_fd()).unwrap();
        assert_eq!(info.kind, FdKind::File);
        assert_eq!(info.size, Some(0));

        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(FdInfo::of(a.as_fd()).unwrap().kind, FdKind::Socket);

        let null = std::fs::OpenOptions::new()
            .append(true)
            .open("/dev/null")
            .unwrap();
        let info = FdInfo::of(null.as_fd()).unwrap();
        assert_eq!(info.kind, FdKind::CharDevice);
        assert!(info.append);
    }
}
