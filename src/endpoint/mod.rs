//! Endpoint URIs (DESIGN §2): parsing is pure; opening turns an endpoint into an owned fd.
//!
//! Grammar: `-` is stdio; `WORD:REST` (WORD = a letter, then letters, digits, `+ . -`) is a URI
//! whose scheme must be known; anything else is a bare file path. Options follow a comma
//! (`file:x,append`) and each scheme accepts only its own.

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::socket::{
    self, sockopt, AddressFamily, Backlog, SockFlag, SockType, SockaddrLike, SockaddrStorage,
    UnixAddr as NixUnixAddr,
};
use nix::sys::stat::{umask, Mode};

use crate::exit::Interrupted;
use crate::sys::fdkind::{FdInfo, FdKind};

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
}

/// A malformed endpoint argument: a usage error (exit 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub arg: String,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid endpoint '{}': {}", self.arg, self.message)
    }
}
impl std::error::Error for ParseError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Source,
    Sink,
}

/// The host a listener binds when the URI names none: never expose a port by default.
pub const DEFAULT_LISTEN_HOST: &str = "127.0.0.1";
/// The listen(2) backlog when the URI gives no `backlog=`.
pub const DEFAULT_BACKLOG: i32 = 128;
/// `sun_path` holds 108 bytes; a path needs its NUL, an abstract name its leading NUL.
const SUN_PATH_MAX: usize = 107;
/// The most a `mode=` may set: permission bits plus setuid/setgid/sticky.
const MODE_MAX: u32 = 0o7777;

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// Every scheme word, canonical names first (the order suggestions prefer on a tie).
const SCHEMES: &[&str] = &[
    "fd",
    "file",
    "tcp",
    "tcp-listen",
    "unix",
    "unix-listen",
    "tcp-l",
    "unix-l",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Fd,
    File,
    Tcp,
    TcpListen,
    Unix,
    UnixListen,
}

impl Scheme {
    fn from_word(word: &str) -> Option<Scheme> {
        Some(match word.to_ascii_lowercase().as_str() {
            "fd" => Scheme::Fd,
            "file" => Scheme::File,
            "tcp" => Scheme::Tcp,
            "tcp-listen" | "tcp-l" => Scheme::TcpListen,
            "unix" => Scheme::Unix,
            "unix-listen" | "unix-l" => Scheme::UnixListen,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Scheme::Fd => "fd",
            Scheme::File => "file",
            Scheme::Tcp => "tcp",
            Scheme::TcpListen => "tcp-listen",
            Scheme::Unix => "unix",
            Scheme::UnixListen => "unix-listen",
        }
    }

    /// Option names this scheme takes, as shown in error messages.
    fn option_help(self) -> &'static str {
        match self {
            Scheme::File => "append, excl, mode=OCTAL",
            Scheme::TcpListen => "backlog=N",
            Scheme::UnixListen => "mode=OCTAL, backlog=N",
            Scheme::Tcp | Scheme::Unix => "retry=N, interval=DURATION",
            Scheme::Fd => "",
        }
    }

    fn takes_option(self, name: &str) -> bool {
        matches!(
            (self, name),
            (Scheme::File, "append" | "excl" | "mode")
                | (Scheme::TcpListen, "backlog")
                | (Scheme::UnixListen, "mode" | "backlog")
                | (Scheme::Tcp | Scheme::Unix, "retry" | "interval")
        )
    }
}

/// Options as written after the commas, already checked against the scheme.
#[derive(Default)]
struct RawOpts {
    append: bool,
    excl: bool,
    mode: Option<u32>,
    backlog: Option<i32>,
    connect: ConnectOpts,
}

/// Parse one endpoint argument. Pure: opens nothing.
pub fn parse(arg: &str) -> Result<Endpoint, ParseError> {
    let fail = |message: String| ParseError {
        arg: arg.to_string(),
        message,
    };
    if arg.is_empty() {
        return Err(fail(
            "empty argument; expected -, a file path, or SCHEME:ADDRESS".into(),
        ));
    }
    if arg == "-" {
        return Ok(Endpoint::Stdio);
    }
    let Some((word, rest)) = split_scheme(arg) else {
        return Ok(Endpoint::File {
            path: PathBuf::from(arg),
            opts: FileOpts::default(),
        });
    };
    let scheme = Scheme::from_word(word).ok_or_else(|| fail(unknown_scheme_message(word, arg)))?;
    parse_uri(scheme, rest).map_err(fail)
}

/// The part after `SCHEME:`: the address, then options after commas (socat style).
fn parse_uri(scheme: Scheme, rest: &str) -> Result<Endpoint, String> {
    let mut pieces = rest.split(',');
    let address = pieces.next().unwrap_or("");
    let opts = parse_options(scheme, pieces)?;

    match scheme {
        Scheme::Fd => parse_fd(address).map(Endpoint::Fd),
        Scheme::File => {
            if address.is_empty() {
                return Err("empty path; expected file:PATH".into());
            }
            Ok(Endpoint::File {
                path: PathBuf::from(address),
                opts: FileOpts {
                    append: opts.append,
                    excl: opts.excl,
                    mode: opts.mode,
                },
            })
        }
        Scheme::Tcp => {
            let expected = "expected tcp:HOST:PORT";
            let (host, port) = split_host_port(address, "tcp", expected)?;
            let host = host.ok_or_else(|| format!("missing HOST; {expected}"))?;
            let port = parse_port(port, expected)?;
            if port == 0 {
                return Err(format!(
                    "port 0 is not a port to connect to; {expected} with PORT 1-65535"
                ));
            }
            Ok(Endpoint::Tcp {
                host,
                port,
                connect: opts.connect,
            })
        }
        Scheme::TcpListen => {
            let expected = "expected tcp-listen:[HOST:]PORT";
            let (host, port) = split_host_port(address, "tcp-listen", expected)?;
            let port = parse_port(port, expected)?;
            Ok(Endpoint::TcpListen {
                host,
                port,
                backlog: opts.backlog,
            })
        }
        Scheme::Unix => Ok(Endpoint::Unix {
            addr: parse_unix_addr(address, "unix")?,
            connect: opts.connect,
        }),
        Scheme::UnixListen => {
            let addr = parse_unix_addr(address, "unix-listen")?;
            if opts.mode.is_some() && matches!(addr, UnixAddr::Abstract(_)) {
                return Err(
                    "mode= does not apply to an abstract socket (@NAME has no file to chmod)"
                        .into(),
                );
            }
            Ok(Endpoint::UnixListen {
                addr,
                mode: opts.mode,
                backlog: opts.backlog,
            })
        }
    }
}

/// `WORD:REST` when the argument starts with a scheme-shaped word and a colon.
fn split_scheme(arg: &str) -> Option<(&str, &str)> {
    let (word, rest) = arg.split_once(':')?;
    let mut chars = word.chars();
    let first_is_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'));
    (first_is_letter && rest_ok).then_some((word, rest))
}

fn unknown_scheme_message(word: &str, arg: &str) -> String {
    let lower = word.to_ascii_lowercase();
    // Only suggest a scheme that is plausibly a typo of what was written.
    let nearest = SCHEMES
        .iter()
        .map(|s| (edit_distance(&lower, s), *s))
        .min_by_key(|(distance, _)| *distance)
        .filter(|(distance, s)| *distance <= 2 && *distance < s.len().max(lower.len()));
    let hint = match nearest {
        Some((_, s)) => format!("did you mean '{s}'?"),
        None => "known schemes: fd, file, tcp, tcp-listen, unix, unix-listen".to_string(),
    };
    format!(
        "unknown scheme '{word}' ({hint}); to name a file called '{arg}', \
         write ./{arg} or file:{arg}"
    )
}

/// Optimal string alignment distance: Levenshtein plus adjacent swaps (`tpc` -> `tcp` is 1).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

fn parse_options<'a>(
    scheme: Scheme,
    pieces: impl Iterator<Item = &'a str>,
) -> Result<RawOpts, String> {
    let mut opts = RawOpts::default();
    let mut seen: Vec<String> = Vec::new();
    let takes = || {
        let help = scheme.option_help();
        if help.is_empty() {
            format!("{}: takes no options", scheme.name())
        } else {
            format!("{}: takes {help}", scheme.name())
        }
    };
    for piece in pieces {
        let (name, value) = match piece.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (piece, None),
        };
        let name = name.to_ascii_lowercase();
        if name.is_empty() {
            return Err(format!("empty option after ','; {}", takes()));
        }
        if !scheme.takes_option(&name) {
            let known =
                ["append", "excl", "mode", "backlog", "retry", "interval"].contains(&name.as_str());
            let what = if known {
                "does not apply to"
            } else {
                "is not an option of"
            };
            return Err(format!(
                "option '{name}' {what} {}: ({})",
                scheme.name(),
                takes()
            ));
        }
        if seen.contains(&name) {
            return Err(format!("option '{name}' is given twice ({})", takes()));
        }
        seen.push(name.clone());
        match (name.as_str(), value) {
            ("append" | "excl", Some(_)) => {
                return Err(format!(
                    "option '{name}' is a flag and takes no value ({})",
                    takes()
                ));
            }
            ("append", None) => opts.append = true,
            ("excl", None) => opts.excl = true,
            ("mode", value) => opts.mode = Some(parse_mode(value)?),
            ("backlog", value) => opts.backlog = Some(parse_backlog(value)?),
            ("retry", value) => opts.connect.retry = parse_retry(value)?,
            ("interval", value) => {
                let value =
                    option_value("interval", value, "expected interval=DURATION, e.g. 500ms")?;
                opts.connect.interval =
                    Some(parse_duration(value).map_err(|e| format!("interval: {e}"))?);
            }
            _ => unreachable!("takes_option admitted an option with no parser"),
        }
    }
    Ok(opts)
}

/// The value of `name=VALUE`; a missing or empty one is an error that says what fits.
fn option_value<'a>(name: &str, value: Option<&'a str>, expected: &str) -> Result<&'a str, String> {
    value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("option '{name}' needs a value; {expected}"))
}

/// `name=N` with N written in decimal digits only (no sign, no space), and `fits`.
fn option_number<T: std::str::FromStr>(
    name: &str,
    value: Option<&str>,
    expected: &str,
    fits: impl Fn(&T) -> bool,
) -> Result<T, String> {
    let value = option_value(name, value, expected)?;
    match value.parse::<T>() {
        Ok(n) if fits(&n) && value.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(format!("{name} '{value}' is not valid; {expected}")),
    }
}

fn parse_mode(value: Option<&str>) -> Result<u32, String> {
    let expected = "expected mode=OCTAL, e.g. mode=0600";
    let value = option_value("mode", value, expected)?;
    if !value.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return Err(format!("mode '{value}' is not octal; {expected}"));
    }
    match u32::from_str_radix(value, 8) {
        Ok(mode) if mode <= MODE_MAX => Ok(mode),
        _ => Err(format!("mode '{value}' is above 07777; {expected}")),
    }
}

fn parse_backlog(value: Option<&str>) -> Result<i32, String> {
    let expected = "expected backlog=N with N a positive integer";
    option_number("backlog", value, expected, |n: &i32| *n > 0)
}

fn parse_retry(value: Option<&str>) -> Result<u32, String> {
    let expected = "expected retry=N with N the number of further attempts (0 or more)";
    option_number("retry", value, expected, |_: &u32| true)
}

/// The longest duration a timeout or retry interval may ask for: far beyond any real
/// need, and far inside what `Instant` arithmetic can hold (a huge one would panic).
pub const DURATION_MAX: Duration = Duration::from_secs(365 * 24 * 3600);

/// A duration as written on the command line: a number with a unit `ms`, `s`, `m` or `h`
/// (`500ms`, `2s`, `1.5s`, `5m`); a bare number is seconds. At most [`DURATION_MAX`].
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let expected = "expected a duration such as 500ms, 2s, 1.5s, 5m or 1h";
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("unknown unit in '{text}'; {expected}")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration; {expected}"))?;
    match Duration::try_from_secs_f64(value * scale) {
        Ok(duration) if duration <= DURATION_MAX => Ok(duration),
        _ => Err(format!(
            "'{text}' is too long: a duration may be at most 8760h (one year)"
        )),
    }
}

/// A timeout: a duration above 0 (a timeout of 0 would end everything at once).
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        Duration::ZERO => Err(format!("'{text}': a timeout must be above 0")),
        duration => Ok(duration),
    }
}

fn parse_fd(address: &str) -> Result<i32, String> {
    let expected = "expected fd:N with N a descriptor number (0, 1, 2, ...)";
    if address.is_empty() {
        return Err(format!("missing N; {expected}"));
    }
    if !address.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "'{address}' is not a descriptor number; {expected}"
        ));
    }
    address
        .parse::<i32>()
        .map_err(|_| format!("fd {address} is out of range; {expected}"))
}

/// Split `HOST:PORT`, `[V6]:PORT` or (for listeners) a bare `PORT`. Returns the host without
/// brackets and the port text, unparsed.
fn split_host_port<'a>(
    address: &'a str,
    scheme: &str,
    expected: &str,
) -> Result<(Option<String>, &'a str), String> {
    if address.is_empty() {
        return Err(format!("missing address; {expected}"));
    }
    if let Some(bracketed) = address.strip_prefix('[') {
        let Some((host, after)) = bracketed.split_once(']') else {
            return Err(format!("missing ']' after the IPv6 address; {expected}"));
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!(
                "'[{host}]' is not an IPv6 address (brackets are for IPv6 only); {expected}"
            ));
        }
        let Some(port) = after.strip_prefix(':') else {
            return Err(format!("missing ':PORT' after '[{host}]'; {expected}"));
        };
        return Ok((Some(host.to_string()), port));
    }
    match address.matches(':').count() {
        // Only a listener may leave out the host.
        0 if scheme == "tcp-listen" => Ok((None, address)),
        0 => Err(format!("missing PORT; {expected}")),
        1 => {
            let (host, port) = address.split_once(':').unwrap_or_default();
            if host.is_empty() {
                return Err(format!("missing HOST before ':'; {expected}"));
            }
            if host.contains(']') {
                return Err(format!("unbalanced ']' in host '{host}'; {expected}"));
            }
            Ok((Some(host.to_string()), port))
        }
        _ => {
            // Suggest the bracketed form only when the split is unambiguous.
            let example = match address.rsplit_once(':') {
                Some((host, port)) if host.parse::<std::net::Ipv6Addr>().is_ok() => {
                    format!("write {scheme}:[{host}]:{port}")
                }
                _ => format!("e.g. {scheme}:[::1]:PORT"),
            };
            Err(format!(
                "an IPv6 address needs brackets: {example}; {expected}"
            ))
        }
    }
}

fn parse_port(text: &str, expected: &str) -> Result<u16, String> {
    if text.is_empty() {
        return Err(format!("missing PORT; {expected}"));
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("port '{text}' is not a number; {expected}"));
    }
    text.parse::<u16>()
        .map_err(|_| format!("port out of range: {text} (ports are 0-65535); {expected}"))
}

fn parse_unix_addr(address: &str, scheme: &str) -> Result<UnixAddr, String> {
    let expected = format!("expected {scheme}:PATH or {scheme}:@NAME");
    if address.is_empty() {
        return Err(format!("missing socket path; {expected}"));
    }
    if let Some(name) = address.strip_prefix('@') {
        if name.is_empty() {
            return Err(format!("empty abstract socket name after '@'; {expected}"));
        }
        if name.len() > SUN_PATH_MAX {
            return Err(format!(
                "abstract socket name is {} bytes; the limit is {SUN_PATH_MAX}",
                name.len()
            ));
        }
        return Ok(UnixAddr::Abstract(name.as_bytes().to_vec()));
    }
    if address.len() > SUN_PATH_MAX {
        return Err(format!(
            "unix socket path is {} bytes; the limit is {SUN_PATH_MAX} \
             (sun_path holds 108 bytes including the NUL); use a shorter or relative path",
            address.len()
        ));
    }
    Ok(UnixAddr::Path(PathBuf::from(address)))
}

impl std::str::FromStr for Endpoint {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse(s)
    }
}

// ---------------------------------------------------------------------------------------------
// Display: the canonical form, which parses back to an equal Endpoint
// ---------------------------------------------------------------------------------------------

/// A host as written in a URI: IPv6 literals in brackets.
fn uri_host(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

impl fmt::Display for UnixAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnixAddr::Path(path) => write!(f, "{}", path.display()),
            UnixAddr::Abstract(name) => write!(f, "@{}", String::from_utf8_lossy(name)),
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Stdio => f.write_str("-"),
            Endpoint::Fd(n) => write!(f, "fd:{n}"),
            Endpoint::File { path, opts } => {
                let path_text = path.to_string_lossy();
                // `file:a,b` would read `b` as an option; the bare form keeps the comma.
                if path_text.contains(',') && *opts == FileOpts::default() {
                    let bare = parse(&path_text);
                    if bare.as_ref() == Ok(self) {
                        return f.write_str(&path_text);
                    }
                }
                write!(f, "file:{path_text}")?;
                if opts.append {
                    f.write_str(",append")?;
                }
                if opts.excl {
                    f.write_str(",excl")?;
                }
                if let Some(mode) = opts.mode {
                    write!(f, ",mode={mode:04o}")?;
                }
                Ok(())
            }
            Endpoint::Tcp {
                host,
                port,
                connect,
            } => {
                write!(f, "tcp:{}:{port}", uri_host(host))?;
                write_connect_opts(f, connect)
            }
            Endpoint::TcpListen {
                host,
                port,
                backlog,
            } => {
                f.write_str("tcp-listen:")?;
                if let Some(host) = host {
                    write!(f, "{}:", uri_host(host))?;
                }
                write!(f, "{port}")?;
                if let Some(backlog) = backlog {
                    write!(f, ",backlog={backlog}")?;
                }
                Ok(())
            }
            Endpoint::Unix { addr, connect } => {
                write!(f, "unix:{addr}")?;
                write_connect_opts(f, connect)
            }
            Endpoint::UnixListen {
                addr,
                mode,
                backlog,
            } => {
                write!(f, "unix-listen:{addr}")?;
                if let Some(mode) = mode {
                    write!(f, ",mode={mode:04o}")?;
                }
                if let Some(backlog) = backlog {
                    write!(f, ",backlog={backlog}")?;
                }
                Ok(())
            }
        }
    }
}

fn write_connect_opts(f: &mut fmt::Formatter<'_>, opts: &ConnectOpts) -> fmt::Result {
    if opts.retry > 0 {
        write!(f, ",retry={}", opts.retry)?;
    }
    if let Some(interval) = opts.interval {
        write!(f, ",interval={}ms", interval.as_millis())?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Opening
// ---------------------------------------------------------------------------------------------

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
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixListener as StdUnixListener;

    fn ok(arg: &str) -> Endpoint {
        parse(arg).unwrap_or_else(|e| panic!("{arg} should parse: {e}"))
    }

    /// Parse must fail and the message must contain every fragment.
    fn err(arg: &str, fragments: &[&str]) {
        let e = parse(arg).expect_err(&format!("{arg} should not parse"));
        assert_eq!(e.arg, arg);
        let text = e.to_string();
        for fragment in fragments {
            assert!(
                text.contains(fragment),
                "{arg}: {text:?} lacks {fragment:?}"
            );
        }
    }

    fn file(path: &str) -> Endpoint {
        Endpoint::File {
            path: PathBuf::from(path),
            opts: FileOpts::default(),
        }
    }

    fn tcp_listen(host: Option<&str>, port: u16) -> Endpoint {
        Endpoint::TcpListen {
            host: host.map(String::from),
            port,
            backlog: None,
        }
    }

    const VALID: &[&str] = &[
        "-",
        "fd:0",
        "fd:3",
        "fd:2147483647",
        "data.bin",
        "/var/log/x",
        "./tcp:odd",
        "sub/tcp:odd",
        "a,b",
        "file:tcp:odd",
        "file:-",
        "FILE:x",
        "file:out.log,append",
        "file:x,excl",
        "file:x,mode=0600",
        "file:x,mode=600",
        "file:x,append,excl,mode=7777",
        "file:x,MODE=0644",
        "tcp:example.com:80",
        "tcp:127.0.0.1:9",
        "tcp:[::1]:8080",
        "Tcp:[::1]:80",
        "tcp:h:65535",
        "tcp-listen:8080",
        "TCP-LISTEN:8080",
        "tcp-l:0",
        "tcp-listen:[::1]:0",
        "tcp-listen:[::]:8080",
        "tcp-listen:0.0.0.0:8080",
        "tcp-listen:localhost:1,backlog=5",
        "unix:/run/x.sock",
        "unix:rel.sock",
        "unix:@name",
        "unix-listen:/run/x.sock,mode=0600,backlog=4",
        "unix-l:@abstract",
        "unix-listen:@n,backlog=1",
    ];

    #[test]
    fn valid_forms_parse_to_the_expected_endpoints() {
        assert_eq!(ok("-"), Endpoint::Stdio);
        assert_eq!(ok("fd:3"), Endpoint::Fd(3));
        assert_eq!(ok("fd:2147483647"), Endpoint::Fd(i32::MAX));
        assert_eq!(ok("data.bin"), file("data.bin"));
        assert_eq!(ok("/var/log/x"), file("/var/log/x"));
        assert_eq!(ok("./tcp:odd"), file("./tcp:odd"));
        assert_eq!(ok("sub/tcp:odd"), file("sub/tcp:odd"));
        assert_eq!(ok("file:tcp:odd"), file("tcp:odd"));
        assert_eq!(ok("a,b"), file("a,b"), "a bare path keeps its comma");
        assert_eq!(ok("FILE:x"), file("x"));
        assert_eq!(
            ok("file:x,append,excl,mode=0600"),
            Endpoint::File {
                path: PathBuf::from("x"),
                opts: FileOpts {
                    append: true,
                    excl: true,
                    mode: Some(0o600)
                }
            }
        );
        assert_eq!(
            ok("file:x,mode=600"),
            Endpoint::File {
                path: PathBuf::from("x"),
                opts: FileOpts {
                    mode: Some(0o600),
                    ..FileOpts::default()
                }
            }
        );
        assert_eq!(
            ok("Tcp:[::1]:80"),
            Endpoint::Tcp {
                host: "::1".into(),
                port: 80,
                connect: ConnectOpts::default(),
            }
        );
        assert_eq!(
            ok("tcp:example.com:443"),
            Endpoint::Tcp {
                host: "example.com".into(),
                port: 443,
                connect: ConnectOpts::default(),
            }
        );
        assert_eq!(ok("TCP-LISTEN:8080"), tcp_listen(None, 8080));
        assert_eq!(ok("tcp-l:0"), tcp_listen(None, 0));
        assert_eq!(ok("tcp-listen:[::1]:0"), tcp_listen(Some("::1"), 0));
        assert_eq!(ok("tcp-listen:[::]:8080"), tcp_listen(Some("::"), 8080));
        assert_eq!(
            ok("tcp-listen:0.0.0.0:8080"),
            tcp_listen(Some("0.0.0.0"), 8080)
        );
        assert_eq!(
            ok("tcp-listen:9,backlog=16"),
            Endpoint::TcpListen {
                host: None,
                port: 9,
                backlog: Some(16)
            }
        );
        assert_eq!(
            ok("unix:/run/x.sock"),
            Endpoint::Unix {
                addr: UnixAddr::Path("/run/x.sock".into()),
                connect: ConnectOpts::default(),
            }
        );
        assert_eq!(
            ok("unix:@name"),
            Endpoint::Unix {
                addr: UnixAddr::Abstract(b"name".to_vec()),
                connect: ConnectOpts::default(),
            }
        );
        assert_eq!(
            ok("unix-listen:/s,mode=0600,backlog=4"),
            Endpoint::UnixListen {
                addr: UnixAddr::Path("/s".into()),
                mode: Some(0o600),
                backlog: Some(4)
            }
        );
        assert_eq!(
            ok("unix-l:@n"),
            Endpoint::UnixListen {
                addr: UnixAddr::Abstract(b"n".to_vec()),
                mode: None,
                backlog: None
            }
        );
        let longest = format!("unix:/{}", "p".repeat(SUN_PATH_MAX - 1));
        assert!(parse(&longest).is_ok(), "107 bytes fit in sun_path");
    }

    #[test]
    fn every_valid_form_round_trips_through_display() {
        for arg in VALID {
            let endpoint = ok(arg);
            let shown = endpoint.to_string();
            assert_eq!(ok(&shown), endpoint, "{arg} displayed as {shown}");
        }
    }

    #[test]
    fn display_is_canonical() {
        assert_eq!(ok("data.bin").to_string(), "file:data.bin");
        assert_eq!(
            ok("file:x,mode=600,append").to_string(),
            "file:x,append,mode=0600"
        );
        assert_eq!(ok("Tcp:[::1]:80").to_string(), "tcp:[::1]:80");
        assert_eq!(ok("TCP-L:8080").to_string(), "tcp-listen:8080");
        assert_eq!(ok("tcp-l:[::]:1").to_string(), "tcp-listen:[::]:1");
        assert_eq!(
            ok("unix-l:@n,backlog=3").to_string(),
            "unix-listen:@n,backlog=3"
        );
        assert_eq!(ok("a,b").to_string(), "a,b");
        assert_eq!("fd:7".parse::<Endpoint>(), Ok(Endpoint::Fd(7)));
    }

    #[test]
    fn scheme_words_and_listener_kinds() {
        let cases = [
            ("-", "stdio", false),
            ("fd:1", "fd", false),
            ("x", "file", false),
            ("tcp:h:1", "tcp", false),
            ("tcp-l:1", "tcp-listen", true),
            ("unix:s", "unix", false),
            ("unix-l:s", "unix-listen", true),
        ];
        for (arg, scheme, listener) in cases {
            assert_eq!(ok(arg).scheme(), scheme, "{arg}");
            assert_eq!(ok(arg).is_listener(), listener, "{arg}");
        }
    }

    #[test]
    fn malformed_tcp_says_what_was_expected() {
        err("tcp:", &["expected tcp:HOST:PORT"]);
        err("tcp:host", &["missing PORT", "expected tcp:HOST:PORT"]);
        err("tcp::80", &["missing HOST", "expected tcp:HOST:PORT"]);
        err("tcp:host:", &["missing PORT", "expected tcp:HOST:PORT"]);
        err("tcp:h:99999", &["port out of range"]);
        err("tcp:h:0", &["port 0", "1-65535"]);
        err("tcp:h:http", &["not a number"]);
        err("tcp:h:-1", &["not a number"]);
        err("tcp:::1:80", &["brackets", "tcp:[::1]:80"]);
        err("tcp:[::1]", &["missing ':PORT'"]);
        err("tcp:[::1:80", &["missing ']'"]);
        err("tcp:[host]:80", &["not an IPv6 address"]);
        err("tcp-listen:", &["expected tcp-listen:[HOST:]PORT"]);
        err("tcp-listen:70000", &["port out of range"]);
        err("tcp-listen::80", &["missing HOST"]);
        err("tcp-l:::8080", &["brackets", "e.g. tcp-listen:[::1]:PORT"]);
        err("tcp-l:::1:8080", &["write tcp-listen:[::1]:8080"]);
    }

    #[test]
    fn malformed_unix_fd_and_file_say_what_was_expected() {
        err("unix:", &["expected unix:PATH or unix:@NAME"]);
        err("unix:@", &["empty abstract socket name"]);
        err("unix-listen:", &["expected unix-listen:PATH"]);
        let too_long = format!("unix:/{}", "p".repeat(SUN_PATH_MAX));
        err(&too_long, &["108 bytes", "limit is 107"]);
        let name_too_long = format!("unix:@{}", "n".repeat(SUN_PATH_MAX + 1));
        err(&name_too_long, &["limit is 107"]);
        err("unix-listen:@n,mode=0600", &["abstract"]);
        err("fd:", &["expected fd:N"]);
        err("fd:-1", &["expected fd:N"]);
        err("fd:x", &["expected fd:N"]);
        err("fd:2147483648", &["out of range"]);
        err("file:", &["expected file:PATH"]);
        err("", &["empty argument"]);
    }

    #[test]
    fn options_must_fit_the_scheme() {
        err(
            "file:x,backlog=3",
            &["'backlog'", "file:", "append, excl, mode=OCTAL"],
        );
        err(
            "tcp:h:1,append",
            &["'append'", "tcp:", "retry=N, interval=DURATION"],
        );
        err(
            "unix:s,mode=0600",
            &["'mode'", "unix:", "retry=N, interval=DURATION"],
        );
        err("fd:1,append", &["'append'", "fd:", "takes no options"]);
        err("tcp-listen:1,mode=0600", &["'mode'", "backlog=N"]);
        err("file:x,mode=9", &["not octal", "mode=OCTAL"]);
        err("file:x,mode=", &["needs a value"]);
        err("file:x,mode", &["needs a value"]);
        err("file:x,mode=17777", &["above 07777"]);
        err("file:x,append,append", &["'append'", "twice"]);
        err("file:x,append=yes", &["takes no value"]);
        err(
            "tcp:h:1,retry=1,interval=8761h",
            &["interval", "at most 8760h"],
        );
        err("file:x,sync", &["'sync'", "is not an option of file:"]);
        err("file:x,", &["empty option"]);
        err("tcp-l:1,backlog=0", &["positive"]);
        err("tcp-l:1,backlog=-3", &["positive"]);
        err("unix-l:s,backlog=x", &["positive"]);
    }

    #[test]
    fn connectors_take_retry_and_interval() {
        assert_eq!(
            ok("tcp:h:1,retry=5,interval=250ms"),
            Endpoint::Tcp {
                host: "h".into(),
                port: 1,
                connect: ConnectOpts {
                    retry: 5,
                    interval: Some(Duration::from_millis(250)),
                },
            }
        );
        assert_eq!(
            ok("unix:@x,RETRY=0"),
            Endpoint::Unix {
                addr: UnixAddr::Abstract(b"x".to_vec()),
                connect: ConnectOpts::default(),
            }
        );
        let only_interval = ok("unix:/s,interval=2");
        let Endpoint::Unix { connect, .. } = &only_interval else {
            panic!("{only_interval:?}")
        };
        assert_eq!(connect.pause(), Duration::from_secs(2));
        assert_eq!(ok("tcp:h:1").to_string(), "tcp:h:1");
        assert_eq!(
            ok("tcp:h:1,interval=1.5s,retry=3").to_string(),
            "tcp:h:1,retry=3,interval=1500ms"
        );
        err("tcp:h:1,retry", &["needs a value"]);
        err("tcp:h:1,retry=-1", &["retry '-1'"]);
        err("tcp:h:1,retry=x", &["not valid"]);
        err("tcp:h:1,retry=1,retry=2", &["twice"]);
        err("tcp:h:1,interval=", &["needs a value"]);
        err("tcp:h:1,interval=5 parsecs", &["unknown unit"]);
        err("unix:s,interval=ms", &["not a duration"]);
        err(
            "tcp-listen:1,retry=3",
            &["'retry'", "does not apply to tcp-listen"],
        );
        err(
            "file:x,interval=1s",
            &["'interval'", "does not apply to file"],
        );
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("8760h"), Ok(DURATION_MAX));
        assert!(parse_duration("8760.001h").is_err());
        assert!(parse_duration("5000000000000000h")
            .unwrap_err()
            .contains("at most"));
        assert!(parse_timeout("0").unwrap_err().contains("above 0"));
        assert_eq!(parse_timeout("1ms"), Ok(Duration::from_millis(1)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1e400s").is_err());
        assert!(parse_duration("s").is_err());
    }

    #[test]
    fn connect_retries_until_the_peer_is_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("late.sock");
        let late = path.clone();
        let server = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let l = StdUnixListener::bind(&late).unwrap();
            l.accept().unwrap();
        });
        let uri = format!("unix:{},retry=50,interval=50ms", path.display());
        ok(&uri).connect().expect("connects once the server is up");
        server.join().unwrap();
        let without = format!("unix:{}", dir.path().join("never.sock").display());
        assert!(ok(&without).connect().is_err());
    }

    #[test]
    fn unknown_schemes_are_errors_never_files() {
        err(
            "tpc:host:80",
            &[
                "unknown scheme 'tpc'",
                "did you mean 'tcp'?",
                "./tpc:host:80",
                "file:tpc:host:80",
            ],
        );
        err("tcp-lisen:80", &["did you mean 'tcp-listen'?"]);
        err("uinx:/s", &["did you mean 'unix'?"]);
        err(
            "bogus:x",
            &["unknown scheme 'bogus'", "./bogus:x", "file:bogus:x"],
        );
        err("http://example.com/", &["unknown scheme 'http'"]);
    }

    #[test]
    fn scheme_detection_follows_the_word_rule() {
        assert_eq!(split_scheme("tcp:x"), Some(("tcp", "x")));
        assert_eq!(split_scheme("a+b.c-d9:x"), Some(("a+b.c-d9", "x")));
        assert_eq!(split_scheme("9p:x"), None);
        assert_eq!(split_scheme("./tcp:x"), None);
        assert_eq!(split_scheme("sub/tcp:x"), None);
        assert_eq!(split_scheme("a b:x"), None);
        assert_eq!(edit_distance("tpc", "tcp"), 1);
        assert_eq!(edit_distance("", "fd"), 2);
        assert_eq!(edit_distance("file", "file"), 0);
    }

    #[test]
    fn tcp_listener_announces_and_accepts() {
        let listener = ok("tcp-listen:0").listen().expect("listen on 127.0.0.1:0");
        let local = listener.local_addr().to_string();
        assert!(local.starts_with("127.0.0.1:"), "{local}");
        assert!(!local.ends_with(":0"), "port 0 must be replaced: {local}");

        let mut client = TcpStream::connect(&local).expect("connect");
        let (fd, peer) = listener.accept().expect("accept");
        assert!(peer.starts_with("127.0.0.1:"), "{peer}");
        client.write_all(b"ping").unwrap();
        let mut server = std::fs::File::from(fd);
        let mut buf = [0u8; 4];
        server.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");

        // The same port through the tcp: connector.
        let connector: Endpoint = format!("tcp:{local}").parse().unwrap();
        let _conn = connector.connect().expect("tcp: connect");
        listener.accept().expect("second accept");
    }

    #[test]
    fn tcp_connect_refused_names_the_endpoint() {
        // Bind, learn the port, close: nobody listens there now.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let e = ok(&format!("tcp:127.0.0.1:{port}"))
            .connect()
            .expect_err("nobody listens");
        let text = format!("{e:#}");
        assert!(
            text.starts_with(&format!("cannot connect to tcp:127.0.0.1:{port}: ")),
            "{text}"
        );
        assert!(text.contains("refused"), "{text}");
    }

    #[test]
    fn unix_listener_replaces_a_stale_socket_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        // A stale socket: bound, then its listener went away without unlinking.
        drop(StdUnixListener::bind(&path).unwrap());
        assert!(path.exists());

        let endpoint = ok(&format!("unix-listen:{},mode=0600", path.display()));
        let listener = endpoint.listen().expect("stale socket is replaced");
        assert_eq!(listener.local_addr(), path.display().to_string());
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o600);

        let connector = ok(&format!("unix:{}", path.display()));
        let mut client = UnixStream::from(connector.connect().expect("unix: connect"));
        let (fd, peer) = listener.accept().expect("accept");
        assert_eq!(peer, "unix");
        client.write_all(b"hi").unwrap();
        let mut buf = [0u8; 2];
        std::fs::File::from(fd).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hi");

        // A live listener is not stale: a second listen must refuse (its probe connects).
        let e = endpoint.listen().expect_err("in use");
        assert!(format!("{e:#}").contains("another process"), "{e:#}");
        assert!(path.exists(), "a live socket is left alone");

        drop(listener);
        assert!(!path.exists(), "the listener removes its socket file");
    }

    #[test]
    fn unix_listener_never_unlinks_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("precious");
        std::fs::write(&path, b"data").unwrap();
        let e = ok(&format!("unix-listen:{}", path.display()))
            .listen()
            .expect_err("a regular file is in the way");
        let text = format!("{e:#}");
        assert!(text.contains("not a socket"), "{text}");
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert_eq!(std::fs::read(&path).unwrap(), b"data");
    }

    #[test]
    fn abstract_unix_listener_and_connector() {
        let name = format!("zerocat-test-{}", std::process::id());
        let listener = ok(&format!("unix-listen:@{name}"))
            .listen()
            .expect("listen");
        assert_eq!(listener.local_addr(), format!("@{name}"));
        let _client = ok(&format!("unix:@{name}")).connect().expect("connect");
        listener.accept().expect("accept");
    }

    #[test]
    fn file_sink_defers_truncation_to_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        std::fs::write(&path, b"old contents").unwrap();
        let sink = Endpoint::File {
            path: path.clone(),
            opts: FileOpts::default(),
        };
        let opened = sink.open(Role::Sink).unwrap();
        assert!(opened.truncate_pending);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"old contents",
            "not truncated yet"
        );

        let append = ok(&format!("file:{},append", path.display()));
        assert!(!append.open(Role::Sink).unwrap().truncate_pending);

        let fresh = dir.path().join("new");
        let excl = ok(&format!("file:{},excl,mode=0640", fresh.display()));
        assert!(!excl.open(Role::Sink).unwrap().truncate_pending);
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode, 0o640,
            "mode= is exact for a created file, whatever the umask"
        );
        let e = excl
            .open(Role::Sink)
            .expect_err("excl refuses an existing file");
        assert!(format!("{e:#}").contains("for writing"), "{e:#}");

        let source = file(path.to_str().unwrap()).open(Role::Source).unwrap();
        assert!(!source.truncate_pending);
    }

    #[test]
    fn directories_and_missing_files_are_errors_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let shown = dir.path().display().to_string();
        let endpoint = file(&shown);
        let e = endpoint.open(Role::Source).expect_err("directory source");
        assert_eq!(
            format!("{e:#}"),
            format!("cannot open '{shown}' for reading: is a directory")
        );
        let e = endpoint.open(Role::Sink).expect_err("directory sink");
        assert_eq!(
            format!("{e:#}"),
            format!("cannot open '{shown}' for writing: is a directory")
        );

        let missing = dir.path().join("missing.bin");
        let e = file(missing.to_str().unwrap())
            .open(Role::Source)
            .expect_err("missing source");
        let text = format!("{e:#}");
        assert!(
            text.starts_with(&format!(
                "cannot open '{}' for reading: ",
                missing.display()
            )),
            "{text}"
        );
        assert!(text.contains("No such file or directory"), "{text}");
    }

    #[test]
    fn fifo_opens_as_source_and_sink() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let writer_path = path.clone();
        let writer = std::thread::spawn(move || {
            let opened = file(writer_path.to_str().unwrap())
                .open(Role::Sink)
                .unwrap();
            assert!(!opened.truncate_pending, "a FIFO is not truncated");
            std::fs::File::from(opened.fd).write_all(b"x").unwrap();
        });
        let opened = file(path.to_str().unwrap()).open(Role::Source).unwrap();
        let mut buf = Vec::new();
        std::fs::File::from(opened.fd)
            .read_to_end(&mut buf)
            .unwrap();
        writer.join().unwrap();
        assert_eq!(buf, b"x");
    }

    #[test]
    fn inherited_fds_are_duplicated_above_stderr() {
        let (read_end, _write_end) = nix::unistd::pipe().unwrap();
        let opened = Endpoint::Fd(read_end.as_raw_fd())
            .open(Role::Source)
            .unwrap();
        assert!(opened.fd.as_raw_fd() > 2);
        assert_ne!(opened.fd.as_raw_fd(), read_end.as_raw_fd());

        let e = Endpoint::Fd(i32::MAX)
            .open(Role::Sink)
            .expect_err("closed fd");
        assert!(
            format!("{e:#}").contains(&format!("fd:{}", i32::MAX)),
            "{e:#}"
        );

        let stdin = Endpoint::Stdio.open(Role::Source);
        assert!(stdin.map(|o| o.fd.as_raw_fd() > 2).unwrap_or(true));
    }

    #[test]
    fn connect_and_listen_refuse_the_wrong_kind() {
        assert!(ok("tcp-l:0").connect().is_err());
        assert!(ok("x").connect().is_err());
        assert!(ok("tcp:h:1").listen().is_err());
    }
}
