//! Endpoints (DESIGN §2): what the user names as a source or a sink.
//!
//! - `grammar.rs`: the URI text <-> [`Endpoint`], pure (no syscall).
//! - `open.rs`: an [`Endpoint`] -> an owned fd: files, sockets, listeners, connect
//!   retries, and [`predict`] (what the fd would be, opening nothing) for `--explain`.
//!
//! This file holds what an endpoint is; each file has its unit tests in `FILE/tests.rs`.

mod grammar;
mod open;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use grammar::{parse, parse_duration, parse_timeout, ParseError};
pub use open::{is_retryable_connect, predict, Listener, Opened, Role};

/// Options that may follow a comma (`file:x,append`). Each scheme accepts only its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOpts {
    pub append: bool,
    pub excl: bool,
    pub mode: Option<u32>,
}

/// Options of a connector (`tcp:`, `unix:`): reconnect attempts for a peer that is not up
/// yet (`tcp:db:5432,retry=10,interval=500ms`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectOpts {
    /// Further attempts after the first one fails (0: try once).
    pub retry: u32,
    /// Pause between attempts; [`DEFAULT_RETRY_INTERVAL`] when not given.
    pub interval: Option<Duration>,
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

    /// The path of a file named with no options (`data.bin`, `file:x`): an operand copy
    /// takes as cp would. Anything else (a stream, `file:x,append`) makes copy a pipe.
    pub fn plain_file(&self) -> Option<&Path> {
        match self {
            Endpoint::File { path, opts } if *opts == FileOpts::default() => Some(path),
            _ => None,
        }
    }

    pub fn is_listener(&self) -> bool {
        matches!(
            self,
            Endpoint::TcpListen { .. } | Endpoint::UnixListen { .. }
        )
    }

    /// Short scheme word for reports: "stdio", "fd", "file", "tcp", "tcp-listen", "unix",
    /// "unix-listen".
    pub fn scheme(&self) -> &'static str {
        match self {
            Endpoint::Stdio => "stdio",
            Endpoint::Fd(_) => "fd",
            Endpoint::File { .. } => "file",
            Endpoint::Tcp { .. } => "tcp",
            Endpoint::TcpListen { .. } => "tcp-listen",
            Endpoint::Unix { .. } => "unix",
            Endpoint::UnixListen { .. } => "unix-listen",
        }
    }
}
