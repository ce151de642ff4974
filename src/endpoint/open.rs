//! Opening an endpoint: an owned, CLOEXEC fd for a file, a stdio or inherited fd, a connected
//! socket (with `retry=N`), or the first connection a listener accepts.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use nix::sys::time::TimeVal;

use anyhow::{anyhow, bail, Context};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::socket::{
    self, sockopt, AddressFamily, Backlog, SockFlag, SockType, SockaddrLike, SockaddrStorage,
    UnixAddr as NixUnixAddr,
};
use nix::sys::stat::{umask, Mode};

use super::listener::{format_sockaddr, is_listening, Greet, Listener, Socket, GREETING_DEADLINE};
use super::outbound;
use super::peer_env::PeerEnv;
use super::proxy::{self, Addresses};
use super::sockopt::SockOpts;
use super::tls::{self, Handshake, Session};
use super::{ConnectOpts, Endpoint, FileOpts, ListenOpts, UnixAddr, DEFAULT_IPV6ONLY};
use crate::exit::{Interrupted, UsageError};
use crate::sys::fdkind::{FdInfo, FdKind};
use crate::sys::socket::stream_socket;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Source,
    Sink,
}

/// The host a listener binds when the URI names none: never expose a port by default.
const DEFAULT_LISTEN_HOST: &str = "127.0.0.1";
/// The listen(2) backlog when the URI gives no `backlog=`: 4096 (glibc's SOMAXCONN), which the
/// kernel caps at net.core.somaxconn (HAProxy and Go size theirs the same way). With 128, a
/// burst of 1,000 clients overflowed the accept queue: SYN cookies, then resets of clients
/// that had already sent data (bench/NOTEBOOK.md#relay-listen-backlog-4096).
const DEFAULT_BACKLOG: i32 = 4096;

#[derive(Debug)]
pub struct Opened {
    pub fd: OwnedFd,
    /// A plain regular-file sink opened without O_TRUNC: the caller compares (st_dev, st_ino)
    /// with the source, then truncates (HAZARDS §2, copying a file onto itself).
    pub truncate_pending: bool,
    /// `exec:`/`sh:`: the child behind `fd`, for the caller to reap
    /// ([`super::command::reap`]) once `fd` is closed.
    pub child: Option<std::process::Child>,
    /// `tls:`/`tls-listen:`: the TLS stream behind `fd`, for the caller to finish
    /// ([`Session::finish`]) once `fd` is closed, and to report.
    pub tls: Option<Session>,
    /// `s3://`: the GET's length to check, or the upload to complete or abort
    /// ([`super::s3::Transfer::finish`]) once `fd` is closed.
    pub s3: Option<super::s3::Transfer>,
    /// `http(s)://`: the exchange behind `fd` (a body's pump, an upload's connection), for
    /// the caller to finish ([`super::http::HttpEnd::finish`]) once `fd` is closed, and to
    /// report.
    pub http: Option<super::http::HttpEnd>,
    /// A listener's: the clients its allow/deny list refused before this one was accepted
    /// ([`Opened::accept`]), for the report's `refused`.
    pub refused: u64,
}

impl Opened {
    /// A bare fd: nothing behind it to finish once it is closed.
    pub fn plain(fd: OwnedFd) -> Opened {
        Opened {
            fd,
            truncate_pending: false,
            child: None,
            tls: None,
            s3: None,
            http: None,
            refused: 0,
        }
    }

    /// The first client `listener` accepts ([`accept_one`]), with the addresses a PROXY
    /// header to a backend would carry.
    pub fn accept(listener: &Listener) -> anyhow::Result<(Opened, Addresses)> {
        let (accepted, refused) = accept_one(listener)?;
        let opened = Opened {
            tls: accepted.tls.map(|s| *s),
            refused,
            ..Opened::plain(accepted.fd)
        };
        Ok((opened, accepted.origin))
    }

    /// A sink's TLS stream is only written: the peer's FIN after zerocat's close_notify
    /// ends it cleanly ([`Session::writes_only`]).
    pub fn for_role(self, role: Role) -> Opened {
        if let (Role::Sink, Some(session)) = (role, &self.tls) {
            session.writes_only();
        }
        self
    }
}

impl Endpoint {
    /// Open for the role. Listeners bind, announce, accept one connection and close the
    /// listening socket. Blocking opens (a FIFO without a peer, accept) block.
    pub fn open(&self, role: Role) -> anyhow::Result<Opened> {
        self.open_carrying(role, &Addresses::Unknown)
            .map(|(opened, _)| opened)
    }

    /// [`Endpoint::open`], for a stream that carries another's bytes: a connector with
    /// `proxy=v1|v2` sends `origin` in its header; a listener says, beside the fd, the
    /// addresses of the connection it accepted (those its PROXY header carried, with
    /// `proxy`), for the other end to carry.
    pub fn open_carrying(
        &self,
        role: Role,
        origin: &Addresses,
    ) -> anyhow::Result<(Opened, Addresses)> {
        self.open_carrying_for(role, origin, None)
    }

    /// [`Endpoint::open_carrying`]; an `exec:`/`sh:` child gets `peer` in its environment
    /// (the socket at the other end of pipe or tee).
    pub fn open_carrying_for(
        &self,
        role: Role,
        origin: &Addresses,
        peer: Option<&PeerEnv>,
    ) -> anyhow::Result<(Opened, Addresses)> {
        let (opened, addresses) = if self.listens() {
            Opened::accept(&self.listen()?)?
        } else {
            (self.open_stream(role, origin, peer)?, Addresses::Unknown)
        };
        Ok((opened.for_role(role), addresses))
    }

    fn open_stream(
        &self,
        role: Role,
        origin: &Addresses,
        peer: Option<&PeerEnv>,
    ) -> anyhow::Result<Opened> {
        let plain = Opened::plain;
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
                let fd = take_fd(*n).with_context(|| format!("cannot use fd:{n}"))?;
                Ok(plain(fd))
            }
            Endpoint::File { path, opts } => open_file(path, opts, role),
            Endpoint::Command(spec) => {
                let spawned = spec.spawn_for(role, peer)?;
                Ok(Opened {
                    child: Some(spawned.child),
                    ..Opened::plain(spawned.fd)
                })
            }
            Endpoint::Tcp {
                host,
                connect:
                    ConnectOpts {
                        tls: Some(opts),
                        timeout,
                        ..
                    },
                ..
            } => {
                let config = tls::client_config(opts).with_context(|| format!("{self}"))?;
                if opts.insecure {
                    tls::warn_insecure_once(&self.to_string());
                }
                let fd = self.connect_carrying(origin)?;
                let name = opts.sni.as_deref().unwrap_or(host);
                let (fd, session) = Handshake::client(&config, name)
                    .and_then(|mut shake| {
                        shake.complete(fd.as_fd(), timeout.unwrap_or(tls::HANDSHAKE_DEADLINE))?;
                        shake.establish(fd, false)
                    })
                    .map_err(|reason| tls_failure(self, reason))?;
                let fd = self.websocket(fd, false, session.inner_end())?;
                Ok(Opened {
                    tls: Some(session),
                    ..plain(fd)
                })
            }
            Endpoint::Tcp { .. } | Endpoint::Unix { .. } => {
                let fd = self.connect_carrying(origin)?;
                Ok(plain(self.websocket(fd, false, None)?))
            }
            Endpoint::Http {
                url,
                opts,
                upload_len,
            } => super::http::open(url, opts, role, *upload_len),
            Endpoint::Udp {
                host, port, sock, ..
            } => super::udp::connect(host, *port, sock)
                .with_context(|| format!("cannot connect to {self}"))
                .map(plain),
            Endpoint::UdpListen { host, port, access } => {
                let fd = super::udp::bind(host.as_deref(), *port)
                    .with_context(|| format!("cannot listen on {self}"))?;
                if role == Role::Sink {
                    bail!("{self}: {}", self.source_only().unwrap_or("not a sink"));
                }
                let refused = super::udp::await_first_peer(&fd, access)
                    .with_context(|| format!("cannot receive on {self}"))?;
                Ok(Opened {
                    refused,
                    ..plain(fd)
                })
            }
            Endpoint::S3 { bucket, key, opts } => {
                let (fd, transfer) = match role {
                    Role::Source => super::s3::transfer::open_source(opts, bucket, key)?,
                    Role::Sink => super::s3::transfer::open_sink(opts, bucket, key)?,
                };
                Ok(Opened {
                    s3: Some(transfer),
                    ..plain(fd)
                })
            }
            Endpoint::Pty { link } => super::pty::open(link.as_deref()).map(plain),
            Endpoint::Terminal { on, .. } => on.open_stream(role, origin, peer),
            Endpoint::TcpListen { .. }
            | Endpoint::UnixListen { .. }
            | Endpoint::Systemd { .. }
            | Endpoint::FdTls { .. } => {
                unreachable!("listeners accept in open_carrying")
            }
        }
    }

    /// `ws://`/`wss://`: the WebSocket client's threads on the connected (and TLS) `fd`;
    /// the fd returned is their socketpair's end. Anything else: `fd` as it is. `tls_end`:
    /// the TLS session's mark for the server's close frame ([`tls::bridge::InnerEnd`]).
    pub fn websocket(
        &self,
        fd: OwnedFd,
        nonblocking: bool,
        tls_end: Option<super::tls::bridge::InnerEnd>,
    ) -> anyhow::Result<OwnedFd> {
        let Endpoint::Tcp {
            host,
            port,
            connect: ConnectOpts { ws: Some(ws), .. },
        } = self
        else {
            return Ok(fd);
        };
        let role = super::websocket::bridge::Role::Client {
            host: host.clone(),
            port: *port,
            path: ws.path.clone().unwrap_or_else(|| "/".into()),
        };
        let on_close = tls_end.map(|end| Box::new(move || end.ended()) as _);
        super::websocket::bridge::start(fd, role, nonblocking, self.to_string(), on_close)
            .with_context(|| format!("cannot start the WebSocket of {self}"))
    }

    /// [`Endpoint::connect`], then the PROXY header of `proxy=v1|v2` carrying `origin`.
    pub fn connect_carrying(&self, origin: &Addresses) -> anyhow::Result<OwnedFd> {
        let fd = self.connect()?;
        if let Endpoint::Tcp {
            connect:
                ConnectOpts {
                    proxy: Some(version),
                    ..
                },
            ..
        } = self
        {
            let header = proxy::encode(*version, origin);
            crate::sys::write_all(fd.as_fd(), &header)
                .map_err(|(_, errno)| io::Error::from(errno))
                .with_context(|| format!("cannot send the PROXY header to {self}"))?;
        }
        Ok(fd)
    }

    /// Connectors only (Tcp, Unix): connect and return the (blocking, CLOEXEC) fd. The
    /// host is resolved once; `retry=N` makes N further attempts `interval` apart while the
    /// peer is not up yet (refused, no socket file, unreachable).
    pub fn connect(&self) -> anyhow::Result<OwnedFd> {
        if let Endpoint::Tcp {
            host,
            port,
            connect,
        } = self
        {
            if let Some(via) = &connect.via {
                return self.connect_via(via, host, *port, connect);
            }
        }
        let (addrs, opts) = self.connect_addrs()?;
        self.connect_with_retry(&addrs, &opts)
            .with_context(|| format!("cannot connect to {self}"))
    }

    /// `socks5=`/`connect=`: connect to the proxy (under `retry=N`), then its handshake
    /// asks it for `host:port`, which the proxy resolves.
    fn connect_via(
        &self,
        via: &outbound::Via,
        host: &str,
        port: u16,
        opts: &ConnectOpts,
    ) -> anyhow::Result<OwnedFd> {
        // The target is not resolved here: the proxy resolves it.
        let addrs = via_addrs(via, &opts.sock)?;
        let fd = self
            .connect_with_retry(&addrs, opts)
            .with_context(|| format!("cannot connect to the {} for {self}", via.name()))?;
        outbound::handshake(fd.as_fd(), via, host, port, outbound::HANDSHAKE_DEADLINE)
            .with_context(|| format!("cannot connect to {self}"))?;
        Ok(fd)
    }

    fn connect_with_retry(
        &self,
        addrs: &[SockaddrStorage],
        opts: &ConnectOpts,
    ) -> anyhow::Result<OwnedFd> {
        let mut attempt = 0;
        loop {
            // A socket option the kernel refuses (mark= without CAP_NET_ADMIN) is no
            // peer that is not up yet: never retried.
            match connect_once(addrs, opts)? {
                Ok(fd) => return Ok(fd),
                Err(errno) if attempt < opts.retry && is_retryable_connect(errno) => {
                    attempt += 1;
                    std::thread::sleep(opts.pause());
                }
                Err(errno) => return Err(io::Error::from(errno).into()),
            }
        }
    }

    /// Connectors only (Tcp, Unix): the addresses to try, in order (a host is resolved
    /// now, once), and the connector's options. For callers that connect on their own
    /// terms (the relay connects non-blocking from its event loop). With `socks5=` or
    /// `connect=`: the proxy's addresses, the target being the proxy's to resolve.
    pub fn connect_addrs(&self) -> anyhow::Result<(Vec<SockaddrStorage>, ConnectOpts)> {
        match self {
            Endpoint::Tcp {
                host,
                port,
                connect,
            } => {
                if let Some(via) = &connect.via {
                    return Ok((via_addrs(via, &connect.sock)?, connect.clone()));
                }
                let resolved: Vec<SocketAddr> = (host.as_str(), *port)
                    .to_socket_addrs()
                    .with_context(|| format!("cannot resolve {self}"))?
                    .collect();
                let addrs: Vec<SockaddrStorage> = resolved
                    .iter()
                    .filter(|a| connect.sock.admits(a))
                    .map(|a| SockaddrStorage::from(*a))
                    .collect();
                if addrs.is_empty() {
                    match connect.sock.wanted_family() {
                        Some(family) if !resolved.is_empty() => {
                            bail!("cannot resolve {self}: no {} address", family.name())
                        }
                        _ => bail!("cannot resolve {self}: no addresses"),
                    }
                }
                Ok((addrs, connect.clone()))
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
                Ok((vec![storage], connect.clone()))
            }
            _ => Err(anyhow!(
                "cannot connect to {self}: only tcp: and unix: endpoints connect"
            )),
        }
    }

    /// Listeners only: bind and listen (or take the listening sockets of `fd:N`,
    /// `systemd:`), then announce `zerocat: listening on ADDR` on stderr (always, even
    /// under -q: scripts read the port from it). A `proxy` listener waits
    /// [`GREETING_DEADLINE`] for a connection's header.
    pub fn listen(&self) -> anyhow::Result<Listener> {
        self.listen_within(None)
    }

    /// [`Endpoint::listen`], with the deadline of a PROXY header and TLS handshake (None: [`GREETING_DEADLINE`]).
    pub fn listen_within(&self, header_deadline: Option<Duration>) -> anyhow::Result<Listener> {
        let (sockets, proxy) = match self {
            Endpoint::TcpListen {
                host,
                port,
                backlog,
                listen,
            } => {
                // `-6` (or `tcp6:`'s family) with no HOST: IPv6's loopback, still never exposed.
                let default = match listen.sock.family {
                    Some(super::sockopt::Family::V6) => "::1",
                    _ => DEFAULT_LISTEN_HOST,
                };
                let host = host.as_deref().unwrap_or(default);
                let backlog = backlog.unwrap_or(DEFAULT_BACKLOG);
                let socket = listen_tcp(host, *port, backlog, listen)
                    .with_context(|| format!("cannot listen on {self}"))?;
                (vec![socket], listen.proxy)
            }
            Endpoint::UnixListen {
                addr,
                mode,
                backlog,
            } => {
                let socket = listen_unix(addr, *mode, backlog.unwrap_or(DEFAULT_BACKLOG))
                    .with_context(|| format!("cannot listen on {self}"))?;
                (vec![socket], false)
            }
            Endpoint::Systemd { name, proxy, .. } => {
                let fds = super::systemd::sockets(name.as_deref())
                    .map_err(|e| UsageError(format!("{self}: {e}")))?;
                (fds.into_iter().map(Socket::named).collect(), *proxy)
            }
            Endpoint::Fd(n) | Endpoint::FdTls { fd: n, .. } => match is_listening(*n) {
                Ok(true) => {
                    let fd = take_fd(*n).with_context(|| format!("cannot use fd:{n}"))?;
                    (vec![Socket::named(fd)], false)
                }
                Ok(false) => bail!("fd:{n} is a connected socket, not a listening one"),
                Err(Errno::EBADF) => bail!("cannot use fd:{n}: fd {n} is not open"),
                Err(Errno::ENOTSOCK) => bail!("fd:{n} is not a socket, so it cannot listen"),
                Err(e) => bail!("cannot use fd:{n}: {}", io::Error::from(e)),
            },
            _ => bail!("cannot listen on {self}: only listeners (tcp-listen:, unix-listen:, systemd:, fd:N of a listening socket) listen"),
        };
        let tls = match self.tls() {
            Some(opts) => Some(tls::server_config(opts).with_context(|| format!("{self}"))?),
            None => None,
        };
        let greet = Greet {
            header: proxy,
            tls,
            deadline: header_deadline.unwrap_or(GREETING_DEADLINE),
            tls_in_loop: false,
            access: self.access().cloned().unwrap_or_default(),
        };
        let mut listener =
            Listener::new(sockets, greet).with_context(|| format!("cannot listen on {self}"))?;
        if let Endpoint::TcpListen {
            listen: ListenOpts { ws: Some(ws), .. },
            ..
        } = self
        {
            listener.serve_websocket(ws.path.clone());
        }
        Ok(listener)
    }
}

/// A failed TLS handshake of `endpoint`: an interruption is the signal's, the rest errors.
fn tls_failure(endpoint: &Endpoint, reason: String) -> anyhow::Error {
    if crate::sys::process::interrupted() {
        return Interrupted(format!("{endpoint}: {reason}")).into();
    }
    anyhow!("{endpoint}: {reason}")
}

/// The first connection `listener` accepts (then the listener closes), with the addresses
/// a PROXY header to a backend would carry, and how many clients its allow/deny list
/// refused before it: each said on stderr, and the next one awaited.
fn accept_one(listener: &Listener) -> anyhow::Result<(super::Accepted, u64)> {
    let mut refused = 0;
    loop {
        match listener.accept_from() {
            Ok(accepted) => return Ok((accepted, refused)),
            // Refused by allow=/deny=: said, and the next client awaited (ncat's --allow).
            Err(e) if super::Rejected::of(&e).is_some_and(|r| r.refused) => {
                eprintln!("zerocat: {e}");
                refused += 1;
            }
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

/// `fd:N` taken into zerocat: a CLOEXEC duplicate ([`dup_cloexec`]), and N itself made
/// CLOEXEC too, so that no `exec:`/`sh:` child inherits it (a relay's handler holding the
/// listening socket would accept other clients' connections). 0-2 stay as they are: they
/// are every child's standard fds, as under a shell.
pub fn take_fd(n: RawFd) -> anyhow::Result<OwnedFd> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let fd = dup_cloexec(n)?;
    if n > 2 {
        fcntl(n, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(io::Error::from)?;
    }
    Ok(fd)
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
    // An io::Error of kind IsADirectory: the words stay zerocat's, the kind says EISDIR to
    // a caller that words it otherwise (GNU tee's `tee: DIR: Is a directory`).
    let is_a_directory = || {
        anyhow::Error::from(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!("cannot open '{shown}' for {direction}: is a directory"),
        ))
    };
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
        truncate_pending,
        ..Opened::plain(OwnedFd::from(file))
    })
}

fn listen_tcp(host: &str, port: u16, backlog: i32, opts: &ListenOpts) -> anyhow::Result<Socket> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve '{host}'"))?
        .filter(|a| opts.sock.admits(a))
        .collect();
    let mut last_error = None;
    for addr in addrs {
        match bind_tcp(addr, backlog, opts) {
            Ok(listener) => return Ok(listener),
            Err(e) => last_error = Some(e),
        }
    }
    Err(last_error.unwrap_or_else(|| anyhow!("'{host}' resolved to no address")))
}

fn bind_tcp(addr: SocketAddr, backlog: i32, opts: &ListenOpts) -> anyhow::Result<Socket> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let (fd, _) =
        stream_socket(family, SockFlag::SOCK_CLOEXEC, opts.mptcp).map_err(io::Error::from)?;
    // A restarted listener must not wait out TIME_WAIT of its previous connections.
    socket::setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(io::Error::from)?;
    if opts.reuseport {
        socket::setsockopt(&fd, sockopt::ReusePort, &true)
            .map_err(io::Error::from)
            .context("cannot set SO_REUSEPORT")?;
    }
    let v6only = opts.ipv6only.unwrap_or(DEFAULT_IPV6ONLY);
    if addr.is_ipv6() {
        socket::setsockopt(&fd, sockopt::Ipv6V6Only, &v6only)
            .map_err(io::Error::from)
            .context("cannot set IPV6_V6ONLY")?;
    }
    // Every connection accepted inherits them (keepalive, nodelay, buffers, mark...).
    opts.sock.apply(&fd, addr.is_ipv6(), true)?;
    match socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr)) {
        Ok(()) => {}
        // The realm#124 trap: a dual-stack [::]:P also holds 0.0.0.0:P.
        Err(Errno::EADDRINUSE) if addr.ip().is_unspecified() && (addr.is_ipv4() || !v6only) => {
            bail!(
                "cannot bind {addr}: address in use (a dual-stack [::]:{0} listener also \
                 takes 0.0.0.0:{0}; to have both, give the [::] one ipv6only=1)",
                addr.port()
            )
        }
        Err(errno) => {
            return Err(io::Error::from(errno)).with_context(|| format!("cannot bind {addr}"))
        }
    }
    socket::listen(&fd, to_backlog(backlog)).map_err(io::Error::from)?;
    // Port 0 picked a port: report the one the kernel chose.
    let bound: SockaddrStorage = socket::getsockname(fd.as_raw_fd()).map_err(io::Error::from)?;
    let local = format_sockaddr(&bound).unwrap_or_else(|| addr.to_string());
    let accepts_on = (!addr.ip().is_unspecified())
        .then(|| SocketAddr::new(addr.ip(), bound_port(&bound, addr.port())));
    Ok(Socket {
        fd,
        local,
        socket_file: None,
        accepts_on,
        bound: true,
    })
}

/// The port a TCP socket is bound to (the kernel's choice for port 0).
fn bound_port(bound: &SockaddrStorage, asked: u16) -> u16 {
    bound
        .as_sockaddr_in()
        .map(|a| a.port())
        .or_else(|| bound.as_sockaddr_in6().map(|a| a.port()))
        .unwrap_or(asked)
}

/// nix refuses a backlog of SOMAXCONN or more; the kernel caps it anyway.
fn to_backlog(backlog: i32) -> Backlog {
    Backlog::new(backlog).unwrap_or(Backlog::MAXCONN)
}

fn listen_unix(addr: &UnixAddr, mode: Option<u32>, backlog: i32) -> anyhow::Result<Socket> {
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
    let listener = Socket {
        fd,
        local: addr.to_string(),
        socket_file,
        accepts_on: None,
        bound: true,
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

/// The addresses of the proxy of `socks5=`/`connect=` (resolved now, once), of the
/// family `sock` wants (`tcp4:`, `bind=`): the socket that leaves is the proxy's.
fn via_addrs(via: &outbound::Via, sock: &SockOpts) -> anyhow::Result<Vec<SockaddrStorage>> {
    let addrs: Vec<SockaddrStorage> = (via.host.as_str(), via.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve the {}", via.name()))?
        .filter(|a| sock.admits(a))
        .map(SockaddrStorage::from)
        .collect();
    if addrs.is_empty() {
        bail!("cannot resolve the {}: no addresses", via.name());
    }
    Ok(addrs)
}

/// One attempt at each address in turn (MPTCP where asked and taken, its socket options
/// set and `bind=` bound first); the last errno if none answers. With `opts.timeout`, each
/// connect gives up after that long (SO_SNDTIMEO bounds a blocking connect; it is cleared
/// once connected), ETIMEDOUT. The outer error: a socket option the kernel refused,
/// naming it.
fn connect_once(
    addrs: &[SockaddrStorage],
    opts: &ConnectOpts,
) -> anyhow::Result<Result<OwnedFd, Errno>> {
    let timeout = opts.timeout;
    let bound = |d: Duration| TimeVal::new(d.as_secs() as _, d.subsec_micros() as _);
    let mut last = Errno::EADDRNOTAVAIL;
    for addr in addrs {
        let family = addr.family().unwrap_or(AddressFamily::Unix);
        let fd = match stream_socket(family, SockFlag::SOCK_CLOEXEC, opts.mptcp) {
            Ok((fd, _)) => fd,
            Err(errno) => return Ok(Err(errno)),
        };
        if family != AddressFamily::Unix {
            opts.sock.apply(&fd, family == AddressFamily::Inet6, true)?;
        }
        if let Some(timeout) = timeout {
            if let Err(errno) =
                socket::setsockopt(&fd, socket::sockopt::SendTimeout, &bound(timeout))
            {
                return Ok(Err(errno));
            }
        }
        match socket::connect(fd.as_raw_fd(), addr) {
            Ok(()) => {
                if timeout.is_some() {
                    let cleared = socket::setsockopt(
                        &fd,
                        socket::sockopt::SendTimeout,
                        &bound(Duration::ZERO),
                    );
                    if let Err(errno) = cleared {
                        return Ok(Err(errno));
                    }
                }
                return Ok(Ok(fd));
            }
            // The blocking connect's SO_SNDTIMEO ran out.
            Err(Errno::EINPROGRESS | Errno::EAGAIN) if timeout.is_some() => last = Errno::ETIMEDOUT,
            Err(errno) => last = errno,
        }
    }
    Ok(Err(last))
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

/// What an endpoint's fd will be, found without opening it (no file created, no
/// connection made, no connection accepted): for `--explain`.
pub fn predict(endpoint: &Endpoint, role: Role) -> std::io::Result<FdInfo> {
    match endpoint {
        Endpoint::Stdio => {
            let fd = if role == Role::Source { 0 } else { 1 };
            // SAFETY: fds 0 and 1 are open for the whole run (reserved at start-up).
            Ok(FdInfo::of(unsafe { BorrowedFd::borrow_raw(fd) })?)
        }
        Endpoint::Fd(fd) | Endpoint::FdTls { fd, .. } => {
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
        Endpoint::Udp { .. } | Endpoint::UdpListen { .. } => Ok(FdInfo {
            datagram_size: endpoint.datagram_size(),
            ..FdInfo::assumed(FdKind::Datagram)
        }),
        Endpoint::Command(_) => Ok(FdInfo::assumed(FdKind::Pipe)),
        // A sink is the pipe the uploader reads; a source the GET's socket.
        Endpoint::S3 { .. } if role == Role::Sink => Ok(FdInfo::assumed(FdKind::Pipe)),
        // A body reaches the engine through the endpoint's pipe (a chunked upload too).
        Endpoint::Http { .. } => Ok(FdInfo::assumed(FdKind::Pipe)),
        Endpoint::Terminal { on, .. } => predict(on, role),
        Endpoint::Pty { .. } => Ok(FdInfo::assumed(FdKind::Tty)),
        _ => Ok(FdInfo::assumed(FdKind::Socket)),
    }
}

#[cfg(test)]
mod tests;
