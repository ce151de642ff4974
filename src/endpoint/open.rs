//! Opening an endpoint: an owned, CLOEXEC fd for a file, a stdio or inherited fd, a connected
//! socket (with `retry=N`), or the first connection a listener accepts.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::socket::{
    self, sockopt, AddressFamily, Backlog, SockFlag, SockType, SockaddrLike, SockaddrStorage,
    UnixAddr as NixUnixAddr,
};
use nix::sys::stat::{umask, Mode};

use super::{ConnectOpts, Endpoint, FileOpts, UnixAddr};
use crate::exit::Interrupted;
use crate::sys::fdkind::{FdInfo, FdKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Source,
    Sink,
}

/// The host a listener binds when the URI names none: never expose a port by default.
const DEFAULT_LISTEN_HOST: &str = "127.0.0.1";
/// The listen(2) backlog when the URI gives no `backlog=`.
const DEFAULT_BACKLOG: i32 = 128;

#[derive(Debug)]
pub struct Opened {
    pub fd: OwnedFd,
    /// A plain regular-file sink opened without O_TRUNC: the caller compares (st_dev, st_ino)
    /// with the source, then truncates (HAZARDS §2, copying a file onto itself).
    pub truncate_pending: bool,
}

/// A bound, listening socket. A unix listener removes its socket file when dropped.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
    local: String,
    /// The socket file we bound, with its (st_dev, st_ino), so Drop removes only that file.
    socket_file: Option<(PathBuf, u64, u64)>,
}

impl Endpoint {
    /// Open for the role. Listeners bind, announce, accept one connection and close the
    /// listening socket. Blocking opens (a FIFO without a peer, accept) block.
    pub fn open(&self, role: Role) -> anyhow::Result<Opened> {
        let plain = |fd| Opened {
            fd,
            truncate_pending: false,
        };
        match self {
            Endpoint::Stdio => {
                let (fd, name) = match role {
                    Role::Source => (0, "stdin"),
                    Role::Sink => (1, "stdout"),
                };
                let fd = dup_cloexec(fd).with_context(|| format!("cannot use {name}"))?;
                Ok(plain(fd))
            }
            Endpoint::Fd(n) => {
                let fd = dup_cloexec(*n).with_context(|| format!("cannot use fd:{n}"))?;
                Ok(plain(fd))
            }
            Endpoint::File { path, opts } => open_file(path, opts, role),
            Endpoint::Tcp { .. } | Endpoint::Unix { .. } => self.connect().map(plain),
            Endpoint::TcpListen { .. } | Endpoint::UnixListen { .. } => {
                let listener = self.listen()?;
                loop {
                    match listener.accept() {
                        Ok((fd, _peer)) => return Ok(plain(fd)),
                        Err(e) if e.raw_os_error() == Some(Errno::EINTR as i32) => {
                            if crate::sys::process::interrupted() {
                                return Err(Interrupted(format!(
                                    "interrupted while waiting for a connection on {}",
                                    listener.local_addr()
                                ))
                                .into());
                            }
                        }
                        Err(e) => {
                            return Err(anyhow::Error::from(e)).with_context(|| {
                                format!("cannot accept a connection on {}", listener.local_addr())
                            })
                        }
                    }
                }
            }
        }
    }

    /// Connectors only (Tcp, Unix): connect and return the (blocking, CLOEXEC) fd. The
    /// host is resolved once; `retry=N` makes N further attempts `interval` apart while the
    /// peer is not up yet (refused, no socket file, unreachable).
    pub fn connect(&self) -> anyhow::Result<OwnedFd> {
        let (addrs, opts) = self.connect_addrs()?;
        let mut attempt = 0;
        loop {
            match connect_once(&addrs) {
                Ok(fd) => return Ok(fd),
                Err(errno) if attempt < opts.retry && is_retryable_connect(errno) => {
                    attempt += 1;
                    std::thread::sleep(opts.pause());
                }
                Err(errno) => {
                    return Err(io::Error::from(errno))
                        .with_context(|| format!("cannot connect to {self}"))
                }
            }
        }
    }

    /// Connectors only (Tcp, Unix): the addresses to try, in order (a host is resolved
    /// now, once), and the connector's options. For callers that connect on their own
    /// terms (the relay connects non-blocking from its event loop).
    pub fn connect_addrs(&self) -> anyhow::Result<(Vec<SockaddrStorage>, ConnectOpts)> {
        match self {
            Endpoint::Tcp {
                host,
                port,
                connect,
            } => {
                let addrs: Vec<SockaddrStorage> = (host.as_str(), *port)
                    .to_socket_addrs()
                    .with_context(|| format!("cannot resolve {self}"))?
                    .map(SockaddrStorage::from)
                    .collect();
                if addrs.is_empty() {
                    bail!("cannot resolve {self}: no addresses");
                }
                Ok((addrs, *connect))
            }
            Endpoint::Unix { addr, connect } => {
                let sockaddr = match addr {
                    UnixAddr::Path(path) => NixUnixAddr::new(path.as_path()),
                    UnixAddr::Abstract(name) => NixUnixAddr::new_abstract(name),
                }
                .map_err(io::Error::from)
                .with_context(|| format!("cannot connect to {self}"))?;
                // SAFETY: a sockaddr_un of the length nix computed.
                let storage = unsafe {
                    SockaddrStorage::from_raw(sockaddr.as_ptr().cast(), Some(sockaddr.len()))
                }
                .ok_or_else(|| anyhow!("cannot connect to {self}: bad socket address"))?;
                Ok((vec![storage], *connect))
            }
            _ => Err(anyhow!(
                "cannot connect to {self}: only tcp: and unix: endpoints connect"
            )),
        }
    }

    /// Listeners only: bind and listen, then announce `zerocat: listening on ADDR` on stderr
    /// (always, even under -q: scripts read the port from it).
    pub fn listen(&self) -> anyhow::Result<Listener> {
        let listener = match self {
            Endpoint::TcpListen {
                host,
                port,
                backlog,
            } => {
                let host = host.as_deref().unwrap_or(DEFAULT_LISTEN_HOST);
                listen_tcp(host, *port, backlog.unwrap_or(DEFAULT_BACKLOG))
            }
            Endpoint::UnixListen {
                addr,
                mode,
                backlog,
            } => listen_unix(addr, *mode, backlog.unwrap_or(DEFAULT_BACKLOG)),
            _ => Err(anyhow!(
                "only tcp-listen: and unix-listen: endpoints listen"
            )),
        }
        .with_context(|| format!("cannot listen on {self}"))?;
        eprintln!("zerocat: listening on {}", listener.local);
        Ok(listener)
    }
}

/// Duplicate `fd` to a new CLOEXEC descriptor numbered 3 or above, so that it never takes
/// the place of a closed stdin/stdout/stderr.
fn dup_cloexec(fd: RawFd) -> anyhow::Result<OwnedFd> {
    use nix::fcntl::{fcntl, FcntlArg};
    let new = fcntl(fd, FcntlArg::F_DUPFD_CLOEXEC(3)).map_err(|errno| match errno {
        Errno::EBADF => anyhow!("fd {fd} is not open"),
        other => anyhow::Error::from(io::Error::from(other)),
    })?;
    // SAFETY: fcntl just returned this descriptor; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

fn open_file(path: &Path, opts: &FileOpts, role: Role) -> anyhow::Result<Opened> {
    let shown = path.display();
    let direction = match role {
        Role::Source => "reading",
        Role::Sink => "writing",
    };
    let mut flags = OFlag::O_CLOEXEC;
    let mut mode = Mode::empty();
    match role {
        Role::Source => flags |= OFlag::O_RDONLY,
        Role::Sink => {
            // No O_TRUNC: the caller truncates after checking the sink is not the source.
            flags |= OFlag::O_WRONLY | OFlag::O_CREAT;
            if opts.append {
                flags |= OFlag::O_APPEND;
            }
            if opts.excl {
                flags |= OFlag::O_EXCL;
            }
            mode = Mode::from_bits_truncate(opts.mode.unwrap_or(0o666));
        }
    }
    let is_a_directory = || anyhow!("cannot open '{shown}' for {direction}: is a directory");
    // sys::open_interruptible: a FIFO without a peer, whose open blocks, ends on SIGINT.
    let open = |flags: OFlag| match crate::sys::open_interruptible(None, path, flags, mode) {
        Ok(fd) => Ok(Ok(std::fs::File::from(fd))),
        Err(Errno::EINTR) => Err(anyhow::Error::from(Interrupted(format!(
            "interrupted while opening '{shown}' for {direction} \
             (a FIFO's open waits for its other end)"
        )))),
        Err(e) => Ok(Err(e)),
    };
    // mode= is exact for a file this open creates (fchmod, past the umask), and leaves an
    // existing file's mode alone (as `>` and cp do): O_EXCL first tells the two apart.
    let wants_mode = role == Role::Sink && opts.mode.is_some();
    let (opened, created) = if wants_mode && !opts.excl {
        match open(flags | OFlag::O_EXCL)? {
            Err(Errno::EEXIST) => (open(flags)?, false),
            other => (other, true),
        }
    } else {
        (open(flags)?, opts.excl)
    };
    let file = match opened {
        Ok(file) => file,
        Err(Errno::EISDIR) => return Err(is_a_directory()),
        Err(e) => {
            return Err(anyhow::Error::from(io::Error::from(e)))
                .with_context(|| format!("cannot open '{shown}' for {direction}"))
        }
    };
    if let (true, Some(bits)) = (wants_mode && created, opts.mode) {
        nix::sys::stat::fchmod(file.as_raw_fd(), Mode::from_bits_truncate(bits))
            .map_err(io::Error::from)
            .with_context(|| format!("cannot chmod '{shown}' to {bits:04o}"))?;
    }
    let file_type = file
        .metadata()
        .with_context(|| format!("cannot stat '{shown}'"))?
        .file_type();
    // open(O_RDONLY) of a directory succeeds; reading it would fail later with EISDIR.
    if file_type.is_dir() {
        return Err(is_a_directory());
    }
    let truncate_pending = role == Role::Sink && file_type.is_file() && !opts.append && !opts.excl;
    Ok(Opened {
        fd: OwnedFd::from(file),
        truncate_pending,
    })
}

fn listen_tcp(host: &str, port: u16, backlog: i32) -> anyhow::Result<Listener> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve '{host}'"))?
        .collect();
    let mut last_error = None;
    for addr in addrs {
        match bind_tcp(addr, backlog) {
            Ok(listener) => return Ok(listener),
            Err(e) => last_error = Some(e),
        }
    }
    Err(last_error.unwrap_or_else(|| anyhow!("'{host}' resolved to no address")))
}

fn bind_tcp(addr: SocketAddr, backlog: i32) -> anyhow::Result<Listener> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = socket::socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)
        .map_err(io::Error::from)?;
    // A restarted listener must not wait out TIME_WAIT of its previous connections.
    socket::setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(io::Error::from)?;
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr))
        .map_err(io::Error::from)
        .with_context(|| format!("cannot bind {addr}"))?;
    socket::listen(&fd, to_backlog(backlog)).map_err(io::Error::from)?;
    // Port 0 picked a port: report the one the kernel chose.
    let bound: SockaddrStorage = socket::getsockname(fd.as_raw_fd()).map_err(io::Error::from)?;
    let local = format_sockaddr(&bound).unwrap_or_else(|| addr.to_string());
    Ok(Listener {
        fd,
        local,
        socket_file: None,
    })
}

/// nix refuses a backlog of SOMAXCONN or more; the kernel caps it anyway.
fn to_backlog(backlog: i32) -> Backlog {
    Backlog::new(backlog).unwrap_or(Backlog::MAXCONN)
}

fn listen_unix(addr: &UnixAddr, mode: Option<u32>, backlog: i32) -> anyhow::Result<Listener> {
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(io::Error::from)?;
    let socket_file = match addr {
        UnixAddr::Abstract(name) => {
            let sockaddr = NixUnixAddr::new_abstract(name).map_err(io::Error::from)?;
            socket::bind(fd.as_raw_fd(), &sockaddr).map_err(io::Error::from)?;
            None
        }
        UnixAddr::Path(path) => {
            // bind() creates the socket file through the umask, and fchmod on a socket fd
            // does not reach that file: so the umask is set to give exactly `mode` for the
            // bind, never a chmod by a path someone could swap. The umask is process-wide;
            // endpoints are opened before any thread that creates files starts.
            let saved = mode.map(|m| umask(Mode::from_bits_truncate(!m & 0o777)));
            let bound = bind_unix_path(&fd, path);
            if let Some(saved) = saved {
                umask(saved);
            }
            bound?;
            let meta = std::fs::symlink_metadata(path)
                .with_context(|| format!("cannot stat '{}'", path.display()))?;
            Some((path.clone(), meta.dev(), meta.ino()))
        }
    };
    // From here, an error drops `listener`, which removes the socket file we created.
    let listener = Listener {
        fd,
        local: addr.to_string(),
        socket_file,
    };
    socket::listen(&listener.fd, to_backlog(backlog)).map_err(io::Error::from)?;
    Ok(listener)
}

/// Bind to a socket path, replacing a stale socket (one nobody accepts on) but never
/// anything that is not a socket.
fn bind_unix_path(fd: &OwnedFd, path: &Path) -> anyhow::Result<()> {
    let sockaddr = NixUnixAddr::new(path).map_err(io::Error::from)?;
    match socket::bind(fd.as_raw_fd(), &sockaddr) {
        Ok(()) => return Ok(()),
        Err(Errno::EADDRINUSE) => {}
        Err(errno) => return Err(io::Error::from(errno).into()),
    }
    let shown = path.display();
    // lstat: a symlink is not a socket, so we never unlink through one.
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("'{shown}' is in use and cannot be inspected"))?;
    if !meta.file_type().is_socket() {
        bail!("'{shown}' exists and is not a socket; refusing to replace it");
    }
    match UnixStream::connect(path) {
        Ok(_) => bail!("another process is listening on '{shown}'"),
        Err(e) if e.raw_os_error() == Some(Errno::ECONNREFUSED as i32) => {}
        Err(e) => {
            return Err(anyhow::Error::from(e))
                .with_context(|| format!("'{shown}' is in use and cannot be probed"))
        }
    }
    std::fs::remove_file(path).with_context(|| format!("cannot remove stale socket '{shown}'"))?;
    socket::bind(fd.as_raw_fd(), &sockaddr).map_err(io::Error::from)?;
    Ok(())
}

/// Connects a blocking socket to each address in turn; the last error if none answers.
fn connect_once(addrs: &[SockaddrStorage]) -> Result<OwnedFd, Errno> {
    let mut last = Errno::EADDRNOTAVAIL;
    for addr in addrs {
        let family = addr.family().unwrap_or(AddressFamily::Unix);
        let fd = socket::socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)?;
        match socket::connect(fd.as_raw_fd(), addr) {
            Ok(()) => return Ok(fd),
            Err(errno) => last = errno,
        }
    }
    Err(last)
}

/// Errors that mean "the peer is not up yet": worth another attempt under `retry=N`.
pub fn is_retryable_connect(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::ECONNREFUSED
            | Errno::ENOENT
            | Errno::ETIMEDOUT
            | Errno::ECONNRESET
            | Errno::EHOSTUNREACH
            | Errno::ENETUNREACH
            | Errno::EAGAIN
            | Errno::ECONNABORTED
    )
}

/// `127.0.0.1:80`, `[::1]:80`, a socket path, `@name`; None for an unnamed unix peer.
fn format_sockaddr(addr: &SockaddrStorage) -> Option<String> {
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(std::net::SocketAddrV4::from(*v4).to_string());
    }
    if let Some(v6) = addr.as_sockaddr_in6() {
        return Some(std::net::SocketAddrV6::from(*v6).to_string());
    }
    let unix = addr.as_unix_addr()?;
    if let Some(path) = unix.path() {
        return Some(path.display().to_string());
    }
    unix.as_abstract()
        .map(|name| format!("@{}", String::from_utf8_lossy(name)))
}

impl Listener {
    /// Accept one connection (CLOEXEC, blocking even if the listener is O_NONBLOCK).
    /// Returns the fd and a printable peer address ("127.0.0.1:5555", or "unix" for an
    /// unnamed unix peer). Errors come back raw, EINTR and EAGAIN included, for the relay's
    /// accept loop to judge.
    pub fn accept(&self) -> io::Result<(OwnedFd, String)> {
        let raw = socket::accept4(self.fd.as_raw_fd(), SockFlag::SOCK_CLOEXEC)?;
        // SAFETY: accept4 just returned this descriptor; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let peer = socket::getpeername::<SockaddrStorage>(fd.as_raw_fd())
            .ok()
            .and_then(|addr| format_sockaddr(&addr))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "unix".to_string());
        Ok((fd, peer))
    }

    /// The bound address as announced: `127.0.0.1:43211`, `[::1]:8080`, a path or `@name`.
    pub fn local_addr(&self) -> &str {
        &self.local
    }

    /// The listener fd, for callers that put it in epoll or set O_NONBLOCK.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Remove only the socket we bound: not a file someone put there since.
        if let Some((path, dev, ino)) = &self.socket_file {
            if let Ok(meta) = std::fs::symlink_metadata(path) {
                if meta.file_type().is_socket() && meta.dev() == *dev && meta.ino() == *ino {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }
}

/// What an endpoint's fd will be, found without opening it (no file created, no
/// connection made, no connection accepted): for `--explain`.
pub fn predict(endpoint: &Endpoint, role: Role) -> std::io::Result<FdInfo> {
    match endpoint {
        Endpoint::Stdio => {
            let fd = if role == Role::Source { 0 } else { 1 };
            // SAFETY: fds 0 and 1 are open for the whole run (reserved at start-up).
            Ok(FdInfo::of(unsafe { BorrowedFd::borrow_raw(fd) })?)
        }
        Endpoint::Fd(fd) => {
            nix::fcntl::fcntl(*fd, nix::fcntl::FcntlArg::F_GETFD)?;
            // SAFETY: just checked that the fd is open; it is only fstat'ed.
            Ok(FdInfo::of(unsafe { BorrowedFd::borrow_raw(*fd) })?)
        }
        Endpoint::File { path, opts } => match nix::sys::stat::stat(path.as_path()) {
            Ok(st) => Ok(FdInfo {
                append: opts.append,
                ..FdInfo::from_stat(&st)
            }),
            // A sink that does not exist yet: the empty file it would be created as.
            Err(nix::errno::Errno::ENOENT) if role == Role::Sink => Ok(FdInfo {
                append: opts.append,
                size: Some(0),
                ..FdInfo::assumed(FdKind::File)
            }),
            Err(e) => Err(e.into()),
        },
        _ => Ok(FdInfo::assumed(FdKind::Socket)),
    }
}

#[cfg(test)]
mod tests;
