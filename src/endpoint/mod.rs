//! Endpoints (DESIGN §2): what the user names as a source or a sink.
//!
//! - `grammar.rs`: the URI text <-> [`Endpoint`], pure (no syscall).
//! - `open.rs`: an [`Endpoint`] -> an owned fd: files, sockets, listeners, connect
//!   retries, and [`predict`] (what the fd would be, opening nothing) for `--explain`.
//! - `listener.rs`: listening sockets, bound or inherited, and accepting from them (the
//!   PROXY header of a `proxy` listener read before a connection is handed out).
//! - `systemd.rs`: the sockets of systemd's socket activation (`LISTEN_FDS`).
//! - `command.rs`: `exec:`/`sh:`, a child whose stdin or stdout is the stream.
//! - `proxy.rs`: the PROXY protocol v1/v2, pure (parse a header, make one).
//! - `s3/`: `s3://BUCKET/KEY`: SigV4 signing, credentials and endpoint as the AWS CLI finds
//!   them, S3's XML answers and errors in words.
//! - `sockopt.rs`: `bind=`, the address family (`tcp4:`, `-4`) and the socket options of
//!   `tcp:`/`tcp-listen:`/`udp:` (`keepalive`, `nodelay`, `mark=`...): parsed, then set.
//! - `peer_env.rs`: the `ZEROCAT_PEER_ADDR`... a listener's `exec:`/`sh:` child gets.
//! - `access.rs`: a listener's `allow=`/`deny=`/`allow-file=`, and the check of a client.
//! - `http/`: `http://` and `https://`: the HTTP/1.1 client and its body pumps.
//!
//! This file holds what an endpoint is; each file has its unit tests in `FILE/tests.rs`.

pub mod access;
pub mod command;
mod grammar;
pub mod http;
mod listener;
mod open;
pub mod outbound;
pub mod peer_env;
pub mod proxy;
pub mod pty;
pub mod s3;
pub mod sockopt;
mod systemd;
pub mod tls;
pub mod udp;
pub mod websocket;

use std::path::{Path, PathBuf};
use std::time::Duration;

/// One option word a scheme takes: as written after its comma, and what it does.
#[derive(Debug)]
pub struct OptionWord {
    /// The word, then `=VALUE` when it takes a value: `append`, `mode=OCTAL`.
    pub form: &'static str,
    /// What it does, in one line.
    pub meaning: &'static str,
}

impl OptionWord {
    /// The word alone, as the parser matches it: `mode` of `mode=OCTAL`, `keepalive` of
    /// `keepalive[=IDLE]`.
    pub fn word(&self) -> &'static str {
        self.form.split(['=', '[']).next().unwrap_or(self.form)
    }
}

/// Whether a listener says `zerocat: listening on ADDR` when it binds (tests and scripts
/// read the port from it). The tools zerocat answers as (`nc`) print their own lines.
static ANNOUNCE_LISTENERS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Turns the `listening on` line off (or on) for this process.
pub fn announce_listeners(on: bool) {
    ANNOUNCE_LISTENERS.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// `zerocat: listening on ADDR`, unless turned off.
fn announce_listening(local: &str) {
    if ANNOUNCE_LISTENERS.load(std::sync::atomic::Ordering::Relaxed) {
        eprintln!("zerocat: listening on {local}");
    }
}

pub use grammar::{
    parse, parse_duration, parse_os, parse_range, parse_timeout, redact, redact_url, scheme_names,
    split_header, ParseError, SchemeInfo, SCHEME_TABLE,
};
pub use listener::{Accepted, Listener, Rejected, GREETING_DEADLINE};
pub use open::{is_retryable_connect, predict, take_fd, Opened, Role};

/// Options that may follow a comma (`file:x,append`). Each scheme accepts only its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOpts {
    pub append: bool,
    pub excl: bool,
    pub mode: Option<u32>,
}

/// Options of a connector (`tcp:`, `unix:`): reconnect attempts for a peer that is not up
/// yet (`tcp:db:5432,retry=10,interval=500ms`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectOpts {
    /// Further attempts after the first one fails (0: try once).
    pub retry: u32,
    /// Pause between attempts; [`DEFAULT_RETRY_INTERVAL`] when not given.
    pub interval: Option<Duration>,
    /// `proxy=v1|v2`: send a PROXY protocol header first (tcp: only).
    pub proxy: Option<proxy::Version>,
    /// `socks5=HOST:PORT` / `connect=HOST:PORT`: reach the target through a proxy (tcp: only).
    pub via: Option<outbound::Via>,
    /// `mptcp`: an IPPROTO_MPTCP socket, plain TCP where the kernel refuses one (tcp: only).
    pub mptcp: bool,
    /// `tls:`: a TLS client handshake once connected (inside the tunnel of `socks5=`).
    pub tls: Option<TlsOpts>,
    /// `frame=len16`: the stream carries datagrams (a relay whose other side is UDP).
    pub frame: Option<Frame>,
    /// `--connect-timeout`: each attempt (and a `tls:` handshake) gives up after this
    /// long. Set by the command, not the URI ([`Endpoint::connecting_within`]).
    pub timeout: Option<Duration>,
    /// `ws://`/`wss://`: a WebSocket client on the connection (after its TLS).
    pub ws: Option<WsOpts>,
    /// `bind=`, `tcp4:`/`tcp6:`, `keepalive`, `nodelay`... (tcp: and tls: only).
    pub sock: sockopt::SockOpts,
}

/// Options of a TCP listener beyond `backlog=`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenOpts {
    /// SO_REUSEPORT: several listeners on one port, the kernel spreads connections.
    pub reuseport: bool,
    /// IPV6_V6ONLY for an IPv6 address; None: [`DEFAULT_IPV6ONLY`].
    pub ipv6only: Option<bool>,
    /// Every connection starts with a PROXY protocol header (v1 or v2), read first.
    pub proxy: bool,
    /// `mptcp`: an IPPROTO_MPTCP listener, plain TCP where the kernel refuses one.
    pub mptcp: bool,
    /// `tls-listen:` (or `systemd:…,tls`): a TLS server handshake on every connection,
    /// after its PROXY header when `proxy` asks for one.
    pub tls: Option<TlsOpts>,
    /// `keepalive`, `nodelay`, `mark=`...: set on the listening socket, inherited by every
    /// connection it accepts.
    pub sock: sockopt::SockOpts,
    /// `allow=`, `deny=`, `allow-file=`: who may connect.
    pub access: access::Access,
    /// `frame=len16`: every connection carries datagrams (a relay whose other side is UDP).
    pub frame: Option<Frame>,
    /// `ws-listen:`: a WebSocket server on every connection (after its TLS).
    pub ws: Option<WsOpts>,
}

/// A WebSocket end: the path a client asks for, or the one a listener serves (None: any).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WsOpts {
    pub path: Option<String>,
}

/// How datagrams travel in a stream (`frame=len16` on the stream side of a UDP relay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// A 2-byte big-endian length before each datagram, as DNS over TCP (RFC 1035 4.2.2).
    Len16,
}

/// The options of a TLS endpoint, as the grammar checked them: a listener has `cert` and
/// `key`; `sni` and `insecure` are a client's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOpts {
    /// `sni=NAME`: the name sent and verified (else the HOST of `tls:HOST:PORT`).
    pub sni: Option<String>,
    /// `cafile=PEM`: the roots a client verifies the server with (else the system's), or
    /// the roots a listener requires client certificates from.
    pub cafile: Option<PathBuf>,
    /// `cert=PEM,key=PEM`: the listener's certificate chain and key, or a client's own.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// `pin=sha256:HEX`: the SHA-256 of the DER of the certificate the server must present
    /// (its first, the end-entity; not of its public key alone).
    pub pin: Option<[u8; 32]>,
    /// `verify=0`: the server's certificate is not verified (a warning says so).
    pub insecure: bool,
    /// `alpn=h2,http/1.1`: the protocols offered (client) or accepted (listener).
    pub alpn: Vec<String>,
}

/// Options of `s3://`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Opts {
    /// `endpoint=URL`: the service, before AWS_ENDPOINT_URL and the profile's.
    pub endpoint: Option<String>,
    /// `part-size=SIZE`: a sink's part size ([`s3::DEFAULT_PART_SIZE`] when None).
    pub part_size: Option<u64>,
    /// `cafile=`, `verify=0`, `sni=`, `pin=`: how an https endpoint's certificate is checked.
    pub tls: TlsOpts,
    /// A source's `--retries`, `--retry-wait`, `--idle-timeout` (the command's options).
    pub resume: http::resume::ResumePolicy,
    /// `parts=N`: a sink's parts sent at once ([`s3::PARTS_IN_FLIGHT`] when None; copy's
    /// `-j N` for a one-object copy).
    pub parts: Option<usize>,
}

/// `,header=…` in one of its forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderSpec {
    /// `header=NAME:VALUE`: in the command line, so in `ps` too (shown as `NAME:***`).
    Given { name: String, value: String },
    /// `header=@FILE`: `Name: value` lines read from FILE at open (curl's `-H @FILE`).
    File(PathBuf),
    /// `header-env=NAME:VAR`: the value of header NAME is environment variable VAR's.
    Env { name: String, var: String },
}

/// `,range=START-[END]`: bytes START to END inclusive (to the end without END).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    pub start: u64,
    pub end: Option<u64>,
}

impl ByteRange {
    /// `bytes=START-[END]`, as the Range header says it.
    pub fn header(&self) -> String {
        match self.end {
            Some(end) => format!("bytes={}-{end}", self.start),
            None => format!("bytes={}-", self.start),
        }
    }
}

impl std::fmt::Display for ByteRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.end {
            Some(end) => write!(f, "{}-{end}", self.start),
            None => write!(f, "{}-", self.start),
        }
    }
}

/// Options of an `http(s)://` endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpOpts {
    /// `method=POST` (a sink; PUT when not given).
    pub method: Option<String>,
    pub headers: Vec<HeaderSpec>,
    pub range: Option<ByteRange>,
    /// `retry=`, `interval=`, `socks5=`/`connect=`, `mptcp`; `tls` holds the `tls:` options
    /// of an https URL (Some for https, None for http).
    pub connect: ConnectOpts,
    /// A source's `--retries`, `--retry-wait`, `--idle-timeout` (the command's options):
    /// how a body cut short is resumed (`http/resume.rs`).
    pub resume: http::resume::ResumePolicy,
}

/// `[::]` listeners are dual-stack unless `ipv6only=1` (set explicitly, whatever the
/// `net.ipv6.bindv6only` sysctl says).
pub const DEFAULT_IPV6ONLY: bool = false;

impl Endpoint {
    /// This endpoint with `--connect-timeout` applied, where it connects (`tcp:`, `tls:`,
    /// `unix:`); any other is returned as it is.
    pub fn connecting_within(mut self, timeout: Option<Duration>) -> Endpoint {
        if let Endpoint::Tcp { connect, .. } | Endpoint::Unix { connect, .. } = &mut self {
            connect.timeout = timeout.or(connect.timeout);
        }
        if let Endpoint::Http { opts, .. } = &mut self {
            opts.connect.timeout = timeout.or(opts.connect.timeout);
        }
        self
    }
}

impl ConnectOpts {
    /// The pause between two attempts.
    pub fn pause(&self) -> Duration {
        self.interval.unwrap_or(DEFAULT_RETRY_INTERVAL)
    }
}

/// The pause between connect attempts when `retry=N` comes without `interval=`.
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnixAddr {
    Path(PathBuf),
    /// `unix:@NAME`: the name without the leading `@`.
    Abstract(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `-`: stdin as a source, stdout as a sink.
    Stdio,
    /// `fd:N`: an inherited descriptor.
    Fd(i32),
    /// `fd:N,tls,cert=PEM,key=PEM`: an inherited listening socket whose connections are a
    /// TLS server's.
    FdTls {
        fd: i32,
        tls: TlsOpts,
    },
    File {
        path: PathBuf,
        opts: FileOpts,
    },
    Tcp {
        host: String,
        port: u16,
        connect: ConnectOpts,
    },
    /// `host` is None when the URI named none; it binds 127.0.0.1 then.
    TcpListen {
        host: Option<String>,
        port: u16,
        backlog: Option<i32>,
        listen: ListenOpts,
    },
    Unix {
        addr: UnixAddr,
        connect: ConnectOpts,
    },
    UnixListen {
        addr: UnixAddr,
        mode: Option<u32>,
        backlog: Option<i32>,
    },
    /// `systemd:` / `systemd:NAME`: the listening sockets systemd passed (`LISTEN_FDS`),
    /// all of them or those named NAME (`LISTEN_FDNAMES`).
    Systemd {
        name: Option<String>,
        proxy: bool,
        /// `,tls,cert=PEM,key=PEM`: every connection is a TLS server's.
        tls: Option<TlsOpts>,
    },
    /// `udp:HOST:PORT`: a connected UDP socket; each chunk written is one datagram, of at
    /// most `size` bytes (`,size=N`; None: 65,507).
    Udp {
        host: String,
        port: u16,
        size: Option<u32>,
        /// `bind=`, `udp4:`/`udp6:`, `sndbuf=`, `mark=`...
        sock: sockopt::SockOpts,
    },
    /// `udp-listen:[HOST:]PORT`: a bound UDP socket (127.0.0.1 when no HOST); as a source it
    /// takes the datagrams of the first peer that sends one (nc -u -l).
    UdpListen {
        host: Option<String>,
        port: u16,
        /// `allow=`, `deny=`, `allow-file=`: whose datagrams are taken.
        access: access::Access,
    },
    /// `exec:PROGRAM ARG...` / `sh:COMMAND`: a child's stdout (source) or stdin (sink).
    Command(command::CommandSpec),
    /// `s3://BUCKET/KEY`: an object (`key` raw, unencoded).
    S3 {
        bucket: String,
        key: String,
        opts: S3Opts,
    },
    /// `http://…` / `https://…` (`opts.connect.tls` is Some for https): GET as a source,
    /// PUT (or `method=`) as a sink. `upload_len`: the length of the body a sink will be
    /// given when the command knows it (a regular file's size): Content-Length, else chunked.
    Http {
        url: url::Url,
        opts: HttpOpts,
        upload_len: Option<u64>,
    },
    /// `pty:[LINK]`: a new pseudo-terminal; zerocat reads and writes its master, a program
    /// opens the slave (LINK: a symlink to it).
    Pty {
        link: Option<PathBuf>,
    },
    /// `-,raw,echo=0`, `file:/dev/tty…,raw`: a terminal set to `mode` for the run, then put
    /// back. Taken apart before a command runs ([`pty::set_terminals`]): no command
    /// sees this variant.
    Terminal {
        on: Box<Endpoint>,
        mode: crate::sys::terminal::Mode,
    },
}

impl Endpoint {
    /// A file option that only means something when writing (`append`, `excl`, `mode=`),
    /// named for a usage error when this endpoint is a source.
    pub fn sink_only_option(&self) -> Option<&'static str> {
        match self {
            Endpoint::File { opts, .. } if opts.append => Some("append"),
            Endpoint::File { opts, .. } if opts.excl => Some("excl"),
            Endpoint::File { opts, .. } if opts.mode.is_some() => Some("mode="),
            _ => None,
        }
    }

    /// A file sink opened to append (`tee -a`); any other endpoint as it is.
    pub fn appending(self) -> Endpoint {
        match self {
            Endpoint::File { path, opts } => Endpoint::File {
                path,
                opts: FileOpts {
                    append: true,
                    ..opts
                },
            },
            other => other,
        }
    }

    /// The largest datagram a `udp:` sink sends (`,size=N`), when given.
    pub fn datagram_size(&self) -> Option<usize> {
        match self {
            Endpoint::Udp { size, .. } => size.map(|n| n as usize),
            _ => None,
        }
    }

    /// The TLS options of a `tls:` or `tls-listen:` endpoint (or `systemd:…,tls`).
    pub fn tls(&self) -> Option<&TlsOpts> {
        match self {
            Endpoint::Tcp { connect, .. } => connect.tls.as_ref(),
            Endpoint::TcpListen { listen, .. } => listen.tls.as_ref(),
            Endpoint::Systemd { tls, .. } => tls.as_ref(),
            Endpoint::FdTls { tls, .. } => Some(tls),
            _ => None,
        }
    }

    /// `tcp:…,frame=len16` / `tcp-listen:…,frame=len16`: how datagrams travel in its stream.
    pub fn frame(&self) -> Option<Frame> {
        match self {
            Endpoint::Tcp { connect, .. } => connect.frame,
            Endpoint::TcpListen { listen, .. } => listen.frame,
            _ => None,
        }
    }

    /// An option only `relay` uses (`frame=len16`: datagrams in a stream whose other side
    /// is UDP), named for a usage error in pipe, tee and copy.
    pub fn relay_only_option(&self) -> Option<&'static str> {
        self.frame().map(|_| "frame=len16")
    }

    /// `tcp:…,mptcp` / `tcp-listen:…,mptcp`: its connection is to be MPTCP where it can.
    pub fn asks_mptcp(&self) -> bool {
        match self {
            Endpoint::Tcp { connect, .. } => connect.mptcp,
            Endpoint::TcpListen { listen, .. } => listen.mptcp,
            _ => false,
        }
    }

    /// An endpoint that can only be a source, named for a usage error when it is a sink:
    /// `udp-listen:` has no peer to send to until one sends first.
    pub fn source_only(&self) -> Option<&'static str> {
        match self {
            Endpoint::UdpListen { .. } => Some(
                "udp-listen: only receives in pipe (it has no peer to send to); \
                 send with udp:HOST:PORT",
            ),
            _ => None,
        }
    }

    /// The path of a file named with no options (`data.bin`, `file:x`): an operand copy
    /// takes as cp would. Anything else (a stream, `file:x,append`) makes copy a pipe.
    pub fn plain_file(&self) -> Option<&Path> {
        match self {
            Endpoint::File { path, opts } if *opts == FileOpts::default() => Some(path),
            _ => None,
        }
    }

    /// Listens by its scheme (`tcp-listen:`, `unix-listen:`, `systemd:`). An `fd:N` may
    /// hold a listening socket too: [`Endpoint::listens`] asks the fd.
    pub fn is_listener(&self) -> bool {
        matches!(
            self,
            Endpoint::TcpListen { .. }
                | Endpoint::UnixListen { .. }
                | Endpoint::Systemd { .. }
                | Endpoint::FdTls { .. }
        )
    }

    /// A TCP, unix or TLS socket end, connected or accepted: a command at the other end of
    /// `pipe` or `tee` is told its addresses (`ZEROCAT_PEER_ADDR`...). Not a WebSocket (its
    /// fd is a bridge's), a datagram socket, or an `fd:N` that is not a listener.
    pub fn names_a_peer(&self) -> bool {
        match self {
            Endpoint::Tcp { connect, .. } => connect.ws.is_none(),
            Endpoint::TcpListen { listen, .. } => listen.ws.is_none(),
            Endpoint::Unix { .. } | Endpoint::UnixListen { .. } => true,
            Endpoint::Systemd { .. } | Endpoint::FdTls { .. } | Endpoint::Fd(_) => self.listens(),
            _ => false,
        }
    }

    /// `exec:`/`sh:`.
    pub fn is_command(&self) -> bool {
        matches!(self, Endpoint::Command(_))
    }

    /// [`Endpoint::is_listener`], or an `fd:N` that is a listening socket (SO_ACCEPTCONN).
    pub fn listens(&self) -> bool {
        match self {
            Endpoint::Fd(n) => listener::is_listening(*n).unwrap_or(false),
            other => other.is_listener(),
        }
    }

    /// Short scheme word for reports: "stdio", "fd", "file", "tcp", "tcp-listen", "tls",
    /// "tls-listen", "unix", "unix-listen", "systemd", "udp", "udp-listen", "exec", "sh".
    pub fn scheme(&self) -> &'static str {
        match self {
            Endpoint::Stdio => "stdio",
            Endpoint::Fd(_) | Endpoint::FdTls { .. } => "fd",
            Endpoint::File { .. } => "file",
            Endpoint::Tcp { connect, .. } if connect.ws.is_some() && connect.tls.is_some() => "wss",
            Endpoint::Tcp { connect, .. } if connect.ws.is_some() => "ws",
            Endpoint::TcpListen { listen, .. } if listen.ws.is_some() => "ws-listen",
            Endpoint::Tcp { connect, .. } if connect.tls.is_some() => "tls",
            Endpoint::Tcp { .. } => "tcp",
            Endpoint::TcpListen { listen, .. } if listen.tls.is_some() => "tls-listen",
            Endpoint::TcpListen { .. } => "tcp-listen",
            Endpoint::Unix { .. } => "unix",
            Endpoint::UnixListen { .. } => "unix-listen",
            Endpoint::Systemd { .. } => "systemd",
            Endpoint::Udp { .. } => "udp",
            Endpoint::UdpListen { .. } => "udp-listen",
            Endpoint::S3 { .. } => "s3",
            Endpoint::Command(spec) => match spec.program {
                command::Program::Exec(_) => "exec",
                command::Program::Sh(_) => "sh",
            },
            Endpoint::Http { url, .. } if url.scheme() == "https" => "https",
            Endpoint::Http { .. } => "http",
            Endpoint::Pty { .. } => "pty",
            Endpoint::Terminal { on, .. } => on.scheme(),
        }
    }

    /// `ws://`, `wss://`, `ws-listen:` (also behind TLS).
    pub fn is_websocket(&self) -> bool {
        match self {
            Endpoint::Tcp { connect, .. } => connect.ws.is_some(),
            Endpoint::TcpListen { listen, .. } => listen.ws.is_some(),
            _ => false,
        }
    }

    /// `http://` or `https://`.
    pub fn is_http(&self) -> bool {
        matches!(self, Endpoint::Http { .. })
    }

    /// A source whose body the http endpoint's pump moves, watching `--idle-timeout` and
    /// resuming a cut itself (`http(s)://`, `s3://`): the command's own idle watch stays off.
    pub fn pumps_a_body(&self) -> bool {
        matches!(self, Endpoint::Http { .. } | Endpoint::S3 { .. })
    }

    /// An `http(s)://` sink told the length of the body it will be given (a regular file's
    /// size): it sends Content-Length and the engine's sendfile goes straight into the
    /// connection. Any other endpoint as it is.
    pub fn with_upload_len(&self, len: Option<u64>) -> Endpoint {
        match self {
            Endpoint::Http { url, opts, .. } => Endpoint::Http {
                url: url.clone(),
                opts: opts.clone(),
                upload_len: len,
            },
            other => other.clone(),
        }
    }
}
