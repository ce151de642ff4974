//! The endpoint grammar: `-` is stdio; `WORD:REST` (WORD = a letter, then letters, digits,
//! `+ . -`) is a URI whose scheme must be known; anything else is a bare file path. Options
//! follow a comma (`file:x,append`) and each scheme accepts only its own. Pure: parsing and
//! display open nothing, and an endpoint displays as the canonical URI that parses back to it.

use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use super::access::{self, Access};
use super::command::{self, Program};
use super::outbound;
use super::proxy::Version;
use super::sockopt::{self, SockOpts};
use super::OptionWord;
use super::{
    ByteRange, ConnectOpts, Endpoint, FileOpts, Frame, HeaderSpec, HttpOpts, ListenOpts, S3Opts,
    TlsOpts, UnixAddr,
};
use crate::units::hex;

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

/// `sun_path` holds 108 bytes; a path needs its NUL, an abstract name its leading NUL.
const SUN_PATH_MAX: usize = 107;
/// The most a `mode=` may set: permission bits plus setuid/setgid/sticky.
const MODE_MAX: u32 = 0o7777;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Fd,
    File,
    Tcp,
    TcpListen,
    Unix,
    UnixListen,
    Systemd,
    Udp,
    UdpListen,
    Tls,
    TlsListen,
    Ws,
    Wss,
    WsListen,
    Exec,
    Sh,
    S3,
    Http,
    Https,
    Pty,
}

/// One scheme of the grammar: its words, what it is at each end, the options it takes.
#[derive(Debug)]
pub struct SchemeInfo {
    scheme: Scheme,
    /// The canonical word, as reports and `Display` write it.
    pub name: &'static str,
    /// Other words for it (`tcp-l`, socat's `system`).
    pub aliases: &'static [&'static str],
    /// What follows `NAME:`.
    pub address: &'static str,
    pub as_source: &'static str,
    pub as_sink: &'static str,
    pub options: &'static [OptionWord],
}

const fn opt(form: &'static str, meaning: &'static str) -> OptionWord {
    OptionWord { form, meaning }
}

// Option words several schemes share, with one meaning each.
const RETRY: OptionWord = opt(
    "retry=N",
    "N further attempts while the peer is not up (refused, no socket file)",
);
const INTERVAL: OptionWord = opt("interval=DURATION", "the pause between attempts (1s)");
const SOCKS5: OptionWord = opt(
    "socks5=HOST:PORT",
    "go out through this SOCKS5 proxy, which resolves the target",
);
const CONNECT: OptionWord = opt(
    "connect=HOST:PORT",
    "go out through this HTTP proxy's CONNECT",
);
const PROXY_AUTH: OptionWord = opt(
    "proxy-auth=USER:PASS",
    "credentials for socks5= or connect= (or ZEROCAT_PROXY_AUTH)",
);
const MPTCP: OptionWord = opt(
    "mptcp",
    "an MPTCP socket (plain TCP where the kernel refuses one)",
);
const BACKLOG: OptionWord = opt("backlog=N", "the listen(2) backlog (4096)");
const REUSEPORT: OptionWord = opt(
    "reuseport",
    "SO_REUSEPORT: several processes share the port",
);
const IPV6ONLY: OptionWord = opt(
    "ipv6only=0|1",
    "on an IPv6 address: dual-stack (0, the default) or IPv6 only",
);
const PROXY_READ: OptionWord = opt(
    "proxy",
    "every connection starts with a PROXY protocol v1/v2 header, read first",
);
const REUSEADDR: OptionWord = opt("reuseaddr", "socat's word, accepted: always on");
const TLS_FLAG: OptionWord = opt(
    "tls",
    "serve TLS on the inherited listener (with cert= and key=)",
);
const CERT: OptionWord = opt("cert=PEM", "the certificate chain to present");
const KEY: OptionWord = opt("key=PEM", "the private key of cert=");
const CAFILE_SERVER: OptionWord = opt(
    "cafile=PEM",
    "require client certificates signed by these CAs (or these very certificates)",
);
const ALPN: OptionWord = opt(
    "alpn=PROTOCOLS",
    "ALPN protocols, in order of preference (alpn=h2,http/1.1)",
);
const MODE: OptionWord = opt(
    "mode=OCTAL",
    "exactly this mode for the file created, whatever the umask",
);
const FRAME: OptionWord = opt(
    "frame=len16",
    "relay with udp:/udp-listen: a 2-byte length before each datagram (DNS over TCP)",
);
const METHOD: OptionWord = opt("method=PUT|POST", "the method of an upload (a sink; PUT)");
const HEADER: OptionWord = opt(
    "header=NAME:VALUE|@FILE",
    "send this header (repeatable); @FILE: 'Name: value' lines read from FILE, out of ps",
);
const HEADER_ENV: OptionWord = opt(
    "header-env=NAME:VAR",
    "send header NAME with environment variable VAR's value (a token kept out of ps)",
);
const RANGE: OptionWord = opt(
    "range=START-[END]",
    "only these bytes (a source): Range, and a 206 whose Content-Range matches",
);
const STDERR: OptionWord = opt("stderr", "the child's stderr joins the stream (a source)");
const PTY: OptionWord = opt(
    "pty",
    "the child runs on a pseudo-terminal of its own (setsid, controlling tty)",
);
const ROWS: OptionWord = opt("rows=N", "with pty: the terminal's rows (24)");
const COLS: OptionWord = opt("cols=N", "with pty: the terminal's columns (80)");
const RAW: OptionWord = opt(
    "raw",
    "a terminal in raw mode for the run (- too: stdin's terminal), always put back",
);
const ECHO: OptionWord = opt("echo=0|1", "a terminal's echo off or on for the run");

/// Every scheme: the one table of the grammar. Parsing takes its words and checks options
/// against it; `--help`, the man page's ENDPOINTS, the completions and the unknown-scheme
/// hint are made from it. Canonical names in this order are what suggestions prefer on a tie.
pub const SCHEME_TABLE: &[SchemeInfo] = &[
    SchemeInfo {
        scheme: Scheme::Fd,
        name: "fd",
        aliases: &[],
        address: "N",
        as_source: "the inherited fd N; a listening socket accepts, as a listener",
        as_sink: "the inherited fd N (a listening socket: the same)",
        options: &[TLS_FLAG, CERT, KEY, CAFILE_SERVER, ALPN],
    },
    SchemeInfo {
        scheme: Scheme::File,
        name: "file",
        aliases: &[],
        address: "PATH",
        as_source: "opened read-only (a bare PATH too)",
        as_sink: "created or truncated, like > and cp",
        options: &[
            opt("append", "append instead of truncating (a sink)"),
            opt("excl", "refuse an existing file (a sink)"),
            MODE,
            RAW,
            ECHO,
        ],
    },
    SchemeInfo {
        scheme: Scheme::Tcp,
        name: "tcp",
        aliases: &["tcp4", "tcp6"],
        address: "HOST:PORT",
        as_source: "connect",
        as_sink: "connect",
        options: &[
            RETRY,
            INTERVAL,
            opt(
                "proxy=v1|v2",
                "send a PROXY protocol header naming the other side's client first",
            ),
            SOCKS5,
            CONNECT,
            PROXY_AUTH,
            MPTCP,
            FRAME,
            sockopt::BIND,
            sockopt::KEEPALIVE,
            sockopt::NODELAY,
            sockopt::SNDBUF,
            sockopt::RCVBUF,
            sockopt::BINDTODEVICE,
            sockopt::MARK,
            sockopt::TOS,
            sockopt::TTL,
        ],
    },
    SchemeInfo {
        scheme: Scheme::TcpListen,
        name: "tcp-listen",
        aliases: &["tcp-l"],
        address: "[HOST:]PORT",
        as_source: "accept one connection (relay: every one); no HOST binds 127.0.0.1",
        as_sink: "the same",
        options: &[
            BACKLOG,
            REUSEPORT,
            IPV6ONLY,
            PROXY_READ,
            MPTCP,
            REUSEADDR,
            access::ALLOW,
            access::DENY,
            access::ALLOW_FILE,
            sockopt::KEEPALIVE,
            sockopt::NODELAY,
            sockopt::SNDBUF,
            sockopt::RCVBUF,
            sockopt::BINDTODEVICE,
            sockopt::MARK,
            sockopt::TOS,
            sockopt::TTL,
            FRAME,
        ],
    },
    SchemeInfo {
        scheme: Scheme::Unix,
        name: "unix",
        aliases: &[],
        address: "PATH|@NAME",
        as_source: "connect to a unix socket (@: abstract)",
        as_sink: "the same",
        options: &[RETRY, INTERVAL],
    },
    SchemeInfo {
        scheme: Scheme::UnixListen,
        name: "unix-listen",
        aliases: &["unix-l"],
        address: "PATH|@NAME",
        as_source: "accept on a unix socket (relay: every connection)",
        as_sink: "the same",
        options: &[
            opt(
                "mode=OCTAL",
                "the socket file's mode, set at bind (not for @NAME)",
            ),
            BACKLOG,
        ],
    },
    SchemeInfo {
        scheme: Scheme::Systemd,
        name: "systemd",
        aliases: &[],
        address: "[NAME]",
        as_source: "the listening sockets systemd passed (LISTEN_FDS; NAME: FileDescriptorName=)",
        as_sink: "the same",
        options: &[PROXY_READ, TLS_FLAG, CERT, KEY, CAFILE_SERVER, ALPN],
    },
    SchemeInfo {
        scheme: Scheme::Udp,
        name: "udp",
        aliases: &["udp4", "udp6"],
        address: "HOST:PORT",
        as_source: "each datagram's payload, in order; an empty datagram ends it",
        as_sink: "each read becomes one datagram",
        options: &[
            opt(
                "size=N",
                "the largest datagram sent, 1-65507 (not in relay)",
            ),
            sockopt::BIND,
            sockopt::SNDBUF,
            sockopt::RCVBUF,
            sockopt::BINDTODEVICE,
            sockopt::MARK,
            sockopt::TOS,
            sockopt::TTL,
        ],
    },
    SchemeInfo {
        scheme: Scheme::UdpListen,
        name: "udp-listen",
        aliases: &["udp-l"],
        address: "[HOST:]PORT",
        as_source: "datagrams of the first peer that sends (relay: a session per client)",
        as_sink: "none: a usage error (relay: answers go back to each client)",
        options: &[access::ALLOW, access::DENY, access::ALLOW_FILE],
    },
    SchemeInfo {
        scheme: Scheme::Tls,
        name: "tls",
        aliases: &[],
        address: "HOST:PORT",
        as_source: "connect, TLS client (rustls; kTLS where the kernel takes it)",
        as_sink: "the same",
        options: &[
            opt(
                "sni=NAME",
                "the name sent and verified (default: HOST, unless an address)",
            ),
            opt(
                "cafile=PEM",
                "verify the server against these CAs (or this very certificate), not the system's",
            ),
            opt(
                "pin=sha256:HEX",
                "the server's certificate must be the one whose DER has this SHA-256",
            ),
            opt(
                "verify=0|1",
                "0 takes any certificate (insecure, with a warning)",
            ),
            opt("cert=PEM", "a client certificate (with key=)"),
            KEY,
            ALPN,
            RETRY,
            INTERVAL,
            SOCKS5,
            CONNECT,
            PROXY_AUTH,
            MPTCP,
            sockopt::BIND,
            sockopt::KEEPALIVE,
            sockopt::NODELAY,
            sockopt::SNDBUF,
            sockopt::RCVBUF,
            sockopt::BINDTODEVICE,
            sockopt::MARK,
            sockopt::TOS,
            sockopt::TTL,
        ],
    },
    SchemeInfo {
        scheme: Scheme::TlsListen,
        name: "tls-listen",
        aliases: &["tls-l"],
        address: "[HOST:]PORT,cert=PEM,key=PEM",
        as_source: "accept, TLS server (tcp-listen: with a handshake on each connection)",
        as_sink: "the same",
        options: &[
            opt("cert=PEM", "the certificate chain to present (required)"),
            opt("key=PEM", "the private key of cert= (required)"),
            CAFILE_SERVER,
            ALPN,
            BACKLOG,
            REUSEPORT,
            IPV6ONLY,
            PROXY_READ,
            MPTCP,
            REUSEADDR,
            access::ALLOW,
            access::DENY,
            access::ALLOW_FILE,
            sockopt::KEEPALIVE,
            sockopt::NODELAY,
            sockopt::SNDBUF,
            sockopt::RCVBUF,
            sockopt::BINDTODEVICE,
            sockopt::MARK,
            sockopt::TOS,
            sockopt::TTL,
        ],
    },
    SchemeInfo {
        scheme: Scheme::Ws,
        name: "ws",
        aliases: &[],
        address: "//HOST[:PORT]/PATH",
        as_source: "connect, WebSocket client (RFC 6455): the server's binary frames",
        as_sink: "the same: each read a masked binary frame; EOF a close frame",
        options: &[RETRY, INTERVAL],
    },
    SchemeInfo {
        scheme: Scheme::Wss,
        name: "wss",
        aliases: &[],
        address: "//HOST[:PORT]/PATH",
        as_source: "ws:// inside TLS (port 443 by default), the options of tls:",
        as_sink: "the same",
        options: &[
            opt(
                "sni=NAME",
                "the name sent and verified (default: HOST, unless an address)",
            ),
            opt(
                "cafile=PEM",
                "verify the server against these CAs (or this very certificate)",
            ),
            opt(
                "pin=sha256:HEX",
                "the server's certificate must be the one whose DER has this SHA-256",
            ),
            opt(
                "verify=0|1",
                "0 takes any certificate (insecure, with a warning)",
            ),
            RETRY,
            INTERVAL,
        ],
    },
    SchemeInfo {
        scheme: Scheme::WsListen,
        name: "ws-listen",
        aliases: &["ws-l"],
        address: "[HOST:]PORT[/PATH]",
        as_source:
            "accept, WebSocket server (the upgrade for PATH, any without); cert=/key= for wss",
        as_sink: "the same: each read an unmasked binary frame, its payload spliced",
        options: &[
            opt(
                "cert=PEM",
                "serve wss: the certificate chain to present (with key=)",
            ),
            opt("key=PEM", "the private key of cert="),
            CAFILE_SERVER,
            BACKLOG,
            REUSEPORT,
            IPV6ONLY,
            REUSEADDR,
        ],
    },
    SchemeInfo {
        scheme: Scheme::Exec,
        name: "exec",
        aliases: &[],
        address: "PROGRAM ARG...",
        as_source: "the child's stdout (a pipe; words split as a shell would, no shell)",
        as_sink: "the child's stdin (relay: both, a child per connection)",
        options: &[STDERR, PTY, ROWS, COLS],
    },
    SchemeInfo {
        scheme: Scheme::Sh,
        name: "sh",
        aliases: &["system"],
        address: "COMMAND",
        as_source: "the stdout of /bin/sh -c COMMAND",
        as_sink: "its stdin (relay: both, a child per connection)",
        options: &[STDERR, PTY, ROWS, COLS],
    },
    SchemeInfo {
        scheme: Scheme::Pty,
        name: "pty",
        aliases: &[],
        address: "[LINK]",
        as_source: "a new pseudo-terminal (raw, no echo): what a program writes to it \
                    (its /dev/pts name on stderr; LINK: a symlink to it)",
        as_sink: "the same: what the program reads",
        options: &[],
    },
    SchemeInfo {
        scheme: Scheme::S3,
        name: "s3",
        aliases: &[],
        address: "//BUCKET/KEY",
        as_source: "a signed GET (credentials, region, endpoint as the AWS CLI finds them)",
        as_sink: "a signed PUT; past one part, a multipart upload (aborted on failure)",
        options: &[
            opt(
                "endpoint=URL",
                "the S3 service (http://HOST:PORT; else AWS_ENDPOINT_URL, the profile, AWS)",
            ),
            opt(
                "part-size=SIZE",
                "a sink's part: one PUT up to it, multipart past it (8M; 5M-5G)",
            ),
            opt(
                "parts=N",
                "a sink's parts sent at once (4; 1-64; copy -j N); memory: N+1 parts",
            ),
            opt(
                "cafile=PEM",
                "an https endpoint: verify it against these CAs (or this very certificate)",
            ),
            opt(
                "verify=0|1",
                "an https endpoint: 0 does not verify its certificate (insecure, said)",
            ),
            opt(
                "sni=NAME",
                "an https endpoint: the name sent and verified (default: its host)",
            ),
            opt(
                "pin=sha256:HEX",
                "an https endpoint: trust exactly the certificate of this SHA-256",
            ),
        ],
    },
    SchemeInfo {
        scheme: Scheme::Http,
        name: "http",
        aliases: &[],
        address: "//HOST[:PORT]/PATH[?QUERY]",
        as_source: "GET; the body spliced after the head (exit 1 on a status not 2xx)",
        as_sink:
            "PUT (method=POST): Content-Length and sendfile from a file, chunked from a stream",
        options: &[
            METHOD, HEADER, HEADER_ENV, RANGE, RETRY, INTERVAL, SOCKS5, CONNECT, PROXY_AUTH, MPTCP,
        ],
    },
    SchemeInfo {
        scheme: Scheme::Https,
        name: "https",
        aliases: &[],
        address: "//HOST[:PORT]/PATH[?QUERY]",
        as_source: "as http, over TLS (every tls: option)",
        as_sink: "as http, over TLS",
        options: &[
            METHOD,
            HEADER,
            HEADER_ENV,
            RANGE,
            opt(
                "sni=NAME",
                "the name sent and verified (default: the URL's host, unless an address)",
            ),
            opt(
                "cafile=PEM",
                "verify the server against these CAs (or this very certificate), not the system's",
            ),
            opt(
                "pin=sha256:HEX",
                "the server's certificate must be the one whose DER has this SHA-256",
            ),
            opt(
                "verify=0|1",
                "0 takes any certificate (insecure, with a warning)",
            ),
            opt("cert=PEM", "a client certificate (with key=)"),
            KEY,
            RETRY,
            INTERVAL,
            SOCKS5,
            CONNECT,
            PROXY_AUTH,
            MPTCP,
        ],
    },
];

impl SchemeInfo {
    /// Every word that names this scheme, the canonical one first.
    pub fn words(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.aliases.iter().copied())
    }

    /// The option words as error messages list them: `append, excl, mode=OCTAL`.
    pub fn option_forms(&self) -> String {
        let forms: Vec<&str> = self.options.iter().map(|o| o.form).collect();
        forms.join(", ")
    }
}

/// Every scheme word, canonical names first (the order suggestions prefer on a tie).
fn scheme_words() -> impl Iterator<Item = &'static str> {
    let names = SCHEME_TABLE.iter().map(|s| s.name);
    names.chain(SCHEME_TABLE.iter().flat_map(|s| s.aliases.iter().copied()))
}

/// Every scheme word, for a message: `fd, file, tcp, tcp-listen (tcp-l), …`.
pub fn scheme_names() -> String {
    let names: Vec<String> = SCHEME_TABLE
        .iter()
        .map(|s| match s.aliases {
            [] => s.name.to_string(),
            aliases => format!("{} ({})", s.name, aliases.join(", ")),
        })
        .collect();
    names.join(", ")
}

impl Scheme {
    fn from_word(word: &str) -> Option<Scheme> {
        SCHEME_TABLE
            .iter()
            .find(|info| info.words().any(|w| w.eq_ignore_ascii_case(word)))
            .map(|info| info.scheme)
    }

    fn info(self) -> &'static SchemeInfo {
        SCHEME_TABLE
            .iter()
            .find(|info| info.scheme == self)
            .expect("every scheme has its row in SCHEME_TABLE")
    }

    fn name(self) -> &'static str {
        self.info().name
    }

    fn takes_option(self, name: &str) -> bool {
        self.info().options.iter().any(|o| o.word() == name)
    }
}

/// Options as written after the commas, already checked against the scheme.
#[derive(Default)]
struct RawOpts {
    append: bool,
    excl: bool,
    mode: Option<u32>,
    backlog: Option<i32>,
    listen: ListenOpts,
    connect: ConnectOpts,
    size: Option<u32>,
    tls: TlsOpts,
    /// `systemd:…,tls`.
    tls_flag: bool,
    sock: SockOpts,
    access: Access,
    /// `http(s)://`: method=, header=, header-env=, range=.
    http: HttpOpts,
    /// `file:…,raw,echo=0`: the terminal's mode for the run.
    terminal: crate::sys::terminal::Mode,
}

/// The option whose value is a secret: never shown ([`redact`]).
const SECRET_OPTION: &str = "proxy-auth=";

/// Options whose values may be secrets: a message shows `***` from the value on.
const SECRET_OPTIONS: [&str; 2] = [SECRET_OPTION, "header="];

/// `arg` as a message may show it: from the value of `proxy-auth=` or `header=` on, `***`
/// (what follows may be the rest of a password holding a comma), and a URL's password
/// (`//user:PASS@host`) as `***`. Endpoints display without them already.
pub fn redact(arg: &str) -> std::borrow::Cow<'_, str> {
    let lower = arg.to_ascii_lowercase();
    let cut = SECRET_OPTIONS
        .iter()
        .filter_map(|secret| lower.find(secret).map(|at| at + secret.len()))
        .min();
    let mut shown: std::borrow::Cow<'_, str> = match cut {
        Some(at) => format!("{}***", &arg[..at]).into(),
        None => arg.into(),
    };
    // `scheme://user:password@host`: the password hidden.
    if let Some(start) = shown.find("://").map(|i| i + 3) {
        let authority_end = shown[start..]
            .find(['/', '?', '#', ','])
            .map_or(shown.len(), |i| start + i);
        let authority = &shown[start..authority_end];
        if let Some(at) = authority.rfind('@') {
            if let Some(colon) = authority[..at].find(':') {
                let hidden = format!("{}***{}", &shown[..start + colon + 1], &shown[start + at..]);
                shown = hidden.into();
            }
        }
    }
    shown
}

/// Parse one endpoint argument. Pure: opens nothing.
pub fn parse(arg: &str) -> Result<Endpoint, ParseError> {
    let fail = |message: String| ParseError {
        arg: redact(arg).into_owned(),
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
    if let Some(options) = arg.strip_prefix("-,") {
        return parse_stdio_options(options).map_err(fail);
    }
    let Some((word, rest)) = split_scheme(arg) else {
        if let Some(dash) = socat_stdio_word(arg) {
            return Err(fail(format!(
                "socat's {arg} is '{dash}' here; to name a file called '{arg}', write ./{arg} \
                 or file:{arg}"
            )));
        }
        return Ok(Endpoint::File {
            path: PathBuf::from(arg),
            opts: FileOpts::default(),
        });
    };
    let scheme =
        Scheme::from_word(word).ok_or_else(|| fail(unknown_scheme_message(word, &redact(arg))))?;
    // `tcp://host:80`: URL habit; the `//` would go to the resolver as part of a name.
    // (A path may start with `//`: file: and unix: take it as it is.)
    let networked = matches!(
        scheme,
        Scheme::Tcp
            | Scheme::TcpListen
            | Scheme::Udp
            | Scheme::UdpListen
            | Scheme::Tls
            | Scheme::TlsListen
    );
    if networked && rest.starts_with("//") {
        return Err(fail(format!(
            "'{word}://' is URL style; write {}:{} (no //)",
            scheme.name(),
            &rest[2..]
        )));
    }
    if matches!(scheme, Scheme::Exec | Scheme::Sh) {
        return parse_command(scheme, rest).map_err(fail);
    }
    if scheme == Scheme::S3 {
        return parse_s3(rest).map_err(fail);
    }
    if matches!(scheme, Scheme::Http | Scheme::Https) {
        return parse_http(scheme, rest).map_err(fail);
    }
    parse_uri(scheme, rest)
        .and_then(|endpoint| endpoint.pin_family(sockopt::family_of_word(word)))
        .map_err(fail)
}

/// socat's bare address words for stdio (`STDIO`, `STDOUT`, `STDIN`): as a bare path they
/// would create a file of that name. What zerocat writes for them.
fn socat_stdio_word(arg: &str) -> Option<&'static str> {
    // Upper case only, as socat's manual writes them: `stdout` is a plausible file name.
    ["STDIO", "STDIN", "STDOUT"].contains(&arg).then_some("-")
}

/// [`parse`] for an argument as the OS gave it. Paths are bytes on Linux: a bare path, or
/// the path of `file:PATH[,OPTIONS]`, that is not UTF-8 is taken byte for byte; anything
/// else (a scheme's address, an option) must be UTF-8.
pub fn parse_os(arg: &OsStr) -> Result<Endpoint, ParseError> {
    if let Some(text) = arg.to_str() {
        return parse(text);
    }
    let shown = arg.to_string_lossy();
    let fail = |message: &str| ParseError {
        arg: redact(&shown).into_owned(),
        message: message.to_string(),
    };
    // The scheme word is ASCII, so the lossy text starts with the same bytes.
    let Some((word, _)) = split_scheme(&shown) else {
        return Ok(Endpoint::File {
            path: PathBuf::from(arg),
            opts: FileOpts::default(),
        });
    };
    if Scheme::from_word(word) != Some(Scheme::File) {
        return Err(fail(
            "not UTF-8: only a file path may hold bytes that are not UTF-8 (a bare PATH or \
             file:PATH)",
        ));
    }
    let rest = &arg.as_bytes()[word.len() + 1..];
    let (path, options) = split_file_address(rest);
    let options = std::str::from_utf8(options.unwrap_or_default())
        .map_err(|_| fail("not UTF-8 in the options after the path"))?;
    // The options parsed as they would be after any path; the path kept as bytes.
    let with_options = if options.is_empty() {
        "file:x".to_string()
    } else {
        format!("file:x,{options}")
    };
    match parse(&with_options)? {
        Endpoint::File { opts, .. } => Ok(Endpoint::File {
            path: PathBuf::from(OsStr::from_bytes(&path)),
            opts,
        }),
        _ => unreachable!("file: parses as a file"),
    }
}

/// A `file:` address in bytes: the path up to the first comma that no backslash escapes
/// (`\,` is a comma of the path, `\\` a backslash; any other backslash is itself), and
/// what follows that comma (the options), if any.
fn split_file_address(rest: &[u8]) -> (Vec<u8>, Option<&[u8]>) {
    let mut path = Vec::with_capacity(rest.len());
    let mut i = 0;
    while i < rest.len() {
        match (rest[i], rest.get(i + 1)) {
            (b'\\', Some(&next @ (b',' | b'\\'))) => {
                path.push(next);
                i += 2;
            }
            (b',', _) => return (path, Some(&rest[i + 1..])),
            (byte, _) => {
                path.push(byte);
                i += 1;
            }
        }
    }
    (path, None)
}

/// A path as a `file:` address writes it: commas and backslashes escaped.
fn escape_file_path(path: &str) -> String {
    path.replace('\\', "\\\\").replace(',', "\\,")
}

/// The part after `SCHEME:`: the address, then options after commas (socat style).
fn parse_uri(scheme: Scheme, rest: &str) -> Result<Endpoint, String> {
    if scheme == Scheme::File {
        let (path, options) = split_file_address(rest.as_bytes());
        let path = String::from_utf8(path).expect("split at ASCII bytes of UTF-8 text");
        let options = options.map(|o| std::str::from_utf8(o).expect("UTF-8 text"));
        let opts = parse_options(scheme, options.into_iter().flat_map(|o| o.split(',')))?;
        if path.is_empty() {
            return Err("empty path; expected file:PATH".into());
        }
        let file = Endpoint::File {
            path: PathBuf::from(path),
            opts: FileOpts {
                append: opts.append,
                excl: opts.excl,
                mode: opts.mode,
            },
        };
        return Ok(on_terminal(file, opts.terminal));
    }
    let mut pieces = rest.split(',');
    let address = pieces.next().unwrap_or("");
    let opts = parse_options(scheme, pieces)?;

    match scheme {
        Scheme::Fd => {
            let fd = parse_fd(address)?;
            let tls_given = opts.tls != TlsOpts::default();
            match (opts.tls_flag, tls_given) {
                (true, _) => Ok(Endpoint::FdTls {
                    fd,
                    tls: server_tls(opts.tls, "expected fd:N,tls,cert=PEM,key=PEM")?,
                }),
                (false, true) => Err("cert=, key=, cafile= and alpn= of fd: go with its 'tls' \
                                      flag: fd:N,tls,cert=PEM,key=PEM (a listening socket)"
                    .into()),
                (false, false) => Ok(Endpoint::Fd(fd)),
            }
        }
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
        Scheme::Tcp | Scheme::Tls => {
            let expected = if scheme == Scheme::Tls {
                "expected tls:HOST:PORT"
            } else {
                "expected tcp:HOST:PORT"
            };
            let (host, port) = split_host_port(address, scheme.name(), expected)?;
            let host = host.ok_or_else(|| format!("missing HOST; {expected}"))?;
            let port = parse_port(port, expected)?;
            if port == 0 {
                return Err(format!(
                    "port 0 is not a port to connect to; {expected} with PORT 1-65535"
                ));
            }
            let mut connect = opts.connect;
            connect.sock = opts.sock;
            if scheme == Scheme::Tls {
                if opts.tls.cert.is_some() != opts.tls.key.is_some() {
                    return Err("a client certificate takes both cert=PEM and key=PEM".into());
                }
                if opts.tls.insecure && opts.tls.pin.is_some() {
                    return Err(
                        "pin= checks the server's certificate and verify=0 skips the \
                                check: give one of them"
                            .into(),
                    );
                }
                connect.tls = Some(opts.tls);
            }
            Ok(Endpoint::Tcp {
                host,
                port,
                connect,
            })
        }
        Scheme::TcpListen | Scheme::TlsListen => {
            let expected = if scheme == Scheme::TlsListen {
                "expected tls-listen:[HOST:]PORT,cert=PEM,key=PEM"
            } else {
                "expected tcp-listen:[HOST:]PORT"
            };
            let (host, port) = split_host_port(address, scheme.name(), expected)?;
            let port = parse_port(port, expected)?;
            if opts.listen.ipv6only.is_some() && !may_be_ipv6(host.as_deref()) {
                return Err(format!(
                    "option 'ipv6only' applies to an IPv6 listener such as {}:[::]:{port}",
                    scheme.name()
                ));
            }
            let mut listen = opts.listen;
            listen.sock = opts.sock;
            listen.access = opts.access;
            if scheme == Scheme::TlsListen {
                listen.tls = Some(server_tls(opts.tls, expected)?);
            }
            Ok(Endpoint::TcpListen {
                host,
                port,
                backlog: opts.backlog,
                listen,
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
        Scheme::Udp => {
            let expected = "expected udp:HOST:PORT";
            let (host, port) = split_host_port(address, "udp", expected)?;
            let host = host.ok_or_else(|| format!("missing HOST; {expected}"))?;
            let port = parse_port(port, expected)?;
            if port == 0 {
                return Err(format!(
                    "port 0 is not a port to send to; {expected} with PORT 1-65535"
                ));
            }
            Ok(Endpoint::Udp {
                host,
                port,
                size: opts.size,
                sock: opts.sock,
            })
        }
        Scheme::UdpListen => {
            let expected = "expected udp-listen:[HOST:]PORT";
            let (host, port) = split_host_port(address, "udp-listen", expected)?;
            let port = parse_port(port, expected)?;
            Ok(Endpoint::UdpListen {
                host,
                port,
                access: opts.access,
            })
        }
        Scheme::Exec | Scheme::Sh => parse_command(scheme, rest),
        Scheme::S3 => parse_s3(rest),
        Scheme::Ws | Scheme::Wss => parse_ws(scheme, address, opts),
        Scheme::WsListen => parse_ws_listen(address, opts),
        Scheme::Http | Scheme::Https => parse_http(scheme, rest),
        Scheme::Pty => Ok(Endpoint::Pty {
            link: (!address.is_empty()).then(|| PathBuf::from(address)),
        }),
        Scheme::Systemd => {
            let name = match address {
                "" => None,
                name if name.bytes().all(|b| b.is_ascii_graphic() && b != b':') => {
                    Some(name.to_string())
                }
                _ => {
                    return Err(format!(
                        "'{address}' is not a socket name (FileDescriptorName= is printable \
                         ASCII without ':'); expected systemd: or systemd:NAME"
                    ))
                }
            };
            let tls_given = opts.tls != TlsOpts::default();
            let tls = match (opts.tls_flag, tls_given) {
                (true, _) => Some(server_tls(
                    opts.tls,
                    "expected systemd:[NAME],tls,cert=PEM,key=PEM",
                )?),
                (false, true) => {
                    return Err(
                        "cert=, key=, cafile= and alpn= of systemd: go with its 'tls' \
                                flag: systemd:[NAME],tls,cert=PEM,key=PEM"
                            .into(),
                    )
                }
                (false, false) => None,
            };
            Ok(Endpoint::Systemd {
                name,
                proxy: opts.listen.proxy,
                tls,
            })
        }
    }
}

/// `http://HOST[:PORT]/PATH[?QUERY][,OPTIONS]`, the URL as curl takes it, parsed by the
/// `url` crate (WHATWG URL). A comma belongs to the URL unless an option word follows it
/// (`/a,b.txt` is a path; `,header=…` an option; `,cafile=…` one http does not take).
fn parse_http(scheme: Scheme, rest: &str) -> Result<Endpoint, String> {
    let name = scheme.name();
    let expected = format!("expected {name}://HOST[:PORT]/PATH[?QUERY]");
    let pieces: Vec<&str> = rest.split(',').collect();
    let first_option = pieces.iter().skip(1).position(|piece| {
        let word = piece.split_once('=').map_or(*piece, |(word, _)| word);
        let word = word.to_ascii_lowercase();
        SCHEME_TABLE
            .iter()
            .any(|info| info.options.iter().any(|o| o.word() == word))
    });
    let (address, options) = match first_option {
        Some(i) => (pieces[..=i].join(","), &pieces[i + 1..]),
        None => (rest.to_string(), &[][..]),
    };
    if !address.starts_with("//") {
        return Err(format!("'{name}:{address}' has no '//'; {expected}"));
    }
    // `http:///x`: the URL standard would take `x` as the host; curl says no host.
    if address[2..].is_empty() || address[2..].starts_with(['/', '?', '#']) {
        return Err(format!("missing HOST; {expected}"));
    }
    let url =
        url::Url::parse(&format!("{name}:{address}")).map_err(|e| format!("{e}; {expected}"))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("missing HOST; {expected}"));
    }
    if url.port() == Some(0) {
        return Err(format!(
            "port 0 is not a port to connect to; {expected} with PORT 1-65535"
        ));
    }
    let opts = parse_options(scheme, options.iter().copied())?;
    let mut connect = opts.connect;
    if scheme == Scheme::Https {
        if opts.tls.cert.is_some() != opts.tls.key.is_some() {
            return Err("a client certificate takes both cert=PEM and key=PEM".into());
        }
        if opts.tls.insecure && opts.tls.pin.is_some() {
            return Err(
                "pin= checks the server's certificate and verify=0 skips the check: give one \
                 of them"
                    .into(),
            );
        }
        connect.tls = Some(opts.tls);
    }
    Ok(Endpoint::Http {
        url,
        opts: HttpOpts {
            connect,
            ..opts.http
        },
        upload_len: None,
    })
}

/// `START-[END]` with END ≥ START.
pub fn parse_range(text: &str) -> Result<ByteRange, String> {
    const EXPECTED: &str = "expected range=START-[END] in bytes, e.g. range=0-1023 or range=4096-";
    let (start, end) = text
        .split_once('-')
        .ok_or_else(|| format!("'{text}' has no '-'; {EXPECTED}"))?;
    let number = |s: &str| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
            .ok_or_else(|| format!("'{s}' is not a byte offset; {EXPECTED}"))
    };
    let start = number(start)?;
    let end = if end.is_empty() {
        None
    } else {
        Some(number(end)?)
    };
    if end.is_some_and(|end| end < start) {
        return Err(format!("END is before START in '{text}'; {EXPECTED}"));
    }
    Ok(ByteRange { start, end })
}

/// `Name: value` or `Name:value`: a token name (RFC 9110 §5.1) and a value without CR or LF.
pub fn split_header(text: &str) -> Result<(&str, &str), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| "expected NAME:VALUE".to_string())?;
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    // Not echoed: text before a ':' that is no name may be a token written without one.
    if name.is_empty() || !name.bytes().all(token) {
        return Err(
            "what comes before ':' is not a header name (letters, digits and !#$%&'*+-.^_`|~)"
                .to_string(),
        );
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(format!("the value of {name} holds a line break"));
    }
    Ok((name, value.trim()))
}

/// `url` as shown: a password as `***`, no fragment.
pub fn redact_url(url: &url::Url) -> String {
    let mut shown = url.clone();
    if shown.password().is_some() {
        let _ = shown.set_password(Some("***"));
    }
    shown.set_fragment(None);
    shown.to_string()
}

/// A TLS listener's options: its certificate and key are required.
/// `ws://HOST[:PORT]/PATH` and `wss://…`: a TCP (TLS) connector with a WebSocket on it.
fn parse_ws(scheme: Scheme, address: &str, opts: RawOpts) -> Result<Endpoint, String> {
    let secure = scheme == Scheme::Wss;
    let word = scheme.name();
    let expected = format!("expected {word}://HOST[:PORT]/PATH");
    let Some(rest) = address.strip_prefix("//") else {
        return Err(format!("{expected} (with the //)"));
    };
    let Some(slash) = rest.find('/') else {
        return Err(format!(
            "{word}://{rest} has no path: a WebSocket is asked for by path; {expected} \
             (/ for the root)"
        ));
    };
    let (authority, path) = rest.split_at(slash);
    let default_port = if secure { 443 } else { 80 };
    let bracketed = authority.starts_with('[');
    let has_port = if bracketed {
        authority.contains("]:")
    } else {
        authority.contains(':')
    };
    let (host, port) = if has_port {
        let (host, port) = split_host_port(authority, word, &expected)?;
        (host, parse_port(port, &expected)?)
    } else {
        let host = authority.trim_start_matches('[').trim_end_matches(']');
        (Some(host.to_string()), default_port)
    };
    let host = host
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("missing HOST; {expected}"))?;
    if port == 0 {
        return Err(format!("port 0 is not a port to connect to; {expected}"));
    }
    let mut connect = opts.connect;
    if secure {
        if opts.tls.insecure && opts.tls.pin.is_some() {
            return Err(
                "pin= checks the server's certificate and verify=0 skips the check: \
                        give one of them"
                    .into(),
            );
        }
        connect.tls = Some(opts.tls);
    }
    connect.ws = Some(super::WsOpts {
        path: Some(path.to_string()),
    });
    Ok(Endpoint::Tcp {
        host,
        port,
        connect,
    })
}

/// `ws-listen:[HOST:]PORT[/PATH]` (`cert=`/`key=`: wss).
fn parse_ws_listen(address: &str, opts: RawOpts) -> Result<Endpoint, String> {
    let expected = "expected ws-listen:[HOST:]PORT[/PATH]";
    let (address, path) = match address.find('/') {
        Some(i) => (&address[..i], Some(address[i..].to_string())),
        None => (address, None),
    };
    let (host, port) = split_host_port(address, "ws-listen", expected)?;
    let port = parse_port(port, expected)?;
    let mut listen = opts.listen;
    if opts.tls != TlsOpts::default() {
        listen.tls = Some(server_tls(
            opts.tls,
            "expected ws-listen:[HOST:]PORT[/PATH],cert=PEM,key=PEM",
        )?);
    }
    listen.ws = Some(super::WsOpts { path });
    Ok(Endpoint::TcpListen {
        host,
        port,
        backlog: opts.backlog,
        listen,
    })
}

fn server_tls(tls: TlsOpts, expected: &str) -> Result<TlsOpts, String> {
    if tls.cert.is_none() || tls.key.is_none() {
        return Err(format!(
            "a TLS listener needs its certificate and key; {expected}"
        ));
    }
    Ok(tls)
}

/// `s3://BUCKET/KEY[,endpoint=URL][,part-size=SIZE][,parts=N]`: a comma of the key is written `\,`
/// (as in a `file:` path).
fn parse_s3(rest: &str) -> Result<Endpoint, String> {
    let expected = "expected s3://BUCKET/KEY";
    let (address, options) = split_file_address(rest.as_bytes());
    let address = String::from_utf8(address).expect("split at ASCII bytes of UTF-8 text");
    let Some(path) = address.strip_prefix("//") else {
        return Err(format!("missing '//'; {expected}"));
    };
    let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
    if bucket.is_empty() {
        return Err(format!("missing BUCKET; {expected}"));
    }
    if !bucket
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(format!(
            "'{bucket}' is not a bucket name (letters, digits, '-', '.', '_'); {expected}"
        ));
    }
    let mut opts = S3Opts::default();
    let mut verify_seen = false;
    let options = options.map(|o| std::str::from_utf8(o).expect("UTF-8 text"));
    for piece in options.into_iter().flat_map(|o| o.split(',')) {
        let (name, value) = piece.split_once('=').unwrap_or((piece, ""));
        match name.to_ascii_lowercase().as_str() {
            "endpoint" if opts.endpoint.is_none() => {
                super::s3::config::parse_endpoint(value)?;
                opts.endpoint = Some(value.to_string());
            }
            "part-size" if opts.part_size.is_none() => {
                let size = crate::units::parse_bytes(value)?;
                let (min, max) = (super::s3::MIN_PART_SIZE, super::s3::MAX_PART_SIZE);
                if !(min..=max).contains(&size) {
                    return Err(format!(
                        "part-size={value}: S3 takes parts of 5 MiB to 5 GiB"
                    ));
                }
                opts.part_size = Some(size);
            }
            "cafile" if opts.tls.cafile.is_none() && !value.is_empty() => {
                opts.tls.cafile = Some(PathBuf::from(value));
            }
            "sni" if opts.tls.sni.is_none() && !value.is_empty() => {
                opts.tls.sni = Some(value.to_string());
            }
            "verify" if !verify_seen => {
                verify_seen = true;
                opts.tls.insecure = match value {
                    "1" => false,
                    "0" => true,
                    _ => {
                        return Err(format!(
                            "option 'verify' takes 0 (do not verify the server: insecure) or \
                             1, got '{value}'"
                        ))
                    }
                };
            }
            "pin" if opts.tls.pin.is_none() => opts.tls.pin = Some(parse_pin(Some(value))?),
            "cafile" | "sni" if value.is_empty() => {
                return Err(format!("option '{name}' needs a value: {name}=…"))
            }
            "parts" if opts.parts.is_none() => {
                let max = super::s3::MAX_PARTS_IN_FLIGHT;
                match value.parse::<usize>() {
                    Ok(n) if (1..=max).contains(&n) => opts.parts = Some(n),
                    _ => {
                        return Err(format!(
                            "parts={value}: parts sent at once is a count from 1 to {max}"
                        ))
                    }
                }
            }
            "endpoint" | "part-size" | "parts" | "cafile" | "sni" | "verify" | "pin" => {
                return Err(format!(
                    "option '{name}' is given twice (s3: takes {})",
                    Scheme::S3.info().option_forms()
                ))
            }
            _ => {
                return Err(format!(
                    "option '{name}' is not an option of s3: (s3: takes {}; a comma of the \
                     key is written \\,)",
                    Scheme::S3.info().option_forms()
                ))
            }
        }
    }
    if opts.tls.insecure && opts.tls.pin.is_some() {
        return Err(
            "pin= checks the server's certificate and verify=0 skips the check: give one of them"
                .into(),
        );
    }
    Ok(Endpoint::S3 {
        bucket: bucket.to_string(),
        key: key.to_string(),
        opts,
    })
}

/// `endpoint` as it is, or on a terminal set to `mode` for the run when one was asked for.
fn on_terminal(endpoint: Endpoint, mode: crate::sys::terminal::Mode) -> Endpoint {
    if mode == crate::sys::terminal::Mode::default() {
        return endpoint;
    }
    Endpoint::Terminal {
        on: Box::new(endpoint),
        mode,
    }
}

/// `echo=0|1`.
fn parse_echo(value: Option<&str>) -> Result<bool, String> {
    match value {
        Some("1") => Ok(true),
        Some("0") => Ok(false),
        _ => Err(format!(
            "option 'echo' takes 0 (off) or 1 (on), got '{}'",
            value.unwrap_or("")
        )),
    }
}

/// `-,raw,echo=0`: stdin's terminal (when it is one) set so for the run.
fn parse_stdio_options(options: &str) -> Result<Endpoint, String> {
    let mut mode = crate::sys::terminal::Mode::default();
    for option in options.split(',') {
        match option.to_ascii_lowercase().as_str() {
            "raw" => mode.raw = true,
            o if o.starts_with("echo=") => mode.echo = Some(parse_echo(o.strip_prefix("echo="))?),
            _ => {
                return Err(format!(
                    "'-' takes raw and echo=0|1 (its terminal's mode), not '{option}'"
                ))
            }
        }
    }
    Ok(on_terminal(Endpoint::Stdio, mode))
}

/// `exec:PROGRAM ARG...` / `sh:COMMAND`: options follow the first comma outside quotes (a
/// comma of the command is quoted: `sh:'echo a,b'`).
fn parse_command(scheme: Scheme, rest: &str) -> Result<Endpoint, String> {
    let (address, options) = match command::option_comma(rest) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, ""),
    };
    let mut stderr = false;
    let mut pty = false;
    let (mut rows, mut cols) = (None, None);
    for option in options.split(',').filter(|o| !o.is_empty()) {
        let lower = option.to_ascii_lowercase();
        let (name, value) = match lower.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (lower.as_str(), None),
        };
        let size = |value| {
            option_number(
                name,
                value,
                &format!("expected {name}=N with N from 1 to 65535"),
                |n: &u16| *n > 0,
            )
        };
        match (name, value) {
            ("stderr", None) => stderr = true,
            ("pty", None) => pty = true,
            ("rows", value) => rows = Some(size(value)?),
            ("cols", value) => cols = Some(size(value)?),
            _ => {
                return Err(format!(
                    "unknown option '{option}'; {} takes: {} (quote a comma that belongs \
                     to the command: {}:'a,b')",
                    scheme.name(),
                    scheme.info().option_forms(),
                    scheme.name()
                ))
            }
        }
    }
    if !pty && (rows.is_some() || cols.is_some()) {
        return Err(format!(
            "options 'rows' and 'cols' size the terminal of 'pty': {}:COMMAND,pty,rows=N,cols=N",
            scheme.name()
        ));
    }
    let default = super::pty::WindowSize::default();
    let pty = pty.then(|| super::pty::WindowSize {
        rows: rows.unwrap_or(default.rows),
        cols: cols.unwrap_or(default.cols),
    });
    let program = command::parse(scheme == Scheme::Sh, address)?;
    Ok(Endpoint::Command(command::CommandSpec {
        program,
        stderr,
        pty,
    }))
}

/// A listener's host that could be an IPv6 address: a literal one, or a name (resolved
/// later). The default host and IPv4 literals cannot.
fn may_be_ipv6(host: Option<&str>) -> bool {
    host.is_some_and(|h| h.parse::<std::net::Ipv4Addr>().is_err())
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
    let nearest = scheme_words()
        .map(|s| (edit_distance(&lower, s), s))
        .min_by_key(|(distance, _)| *distance)
        .filter(|(distance, s)| *distance <= 2 && *distance < s.len().max(lower.len()));
    let hint = match nearest {
        Some((_, s)) => format!("did you mean '{s}'?"),
        None => format!("known schemes: {}", scheme_names()),
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
    let mut proxy_auth: Option<String> = None;
    let takes = || {
        let help = scheme.info().option_forms();
        if help.is_empty() {
            format!("{}: takes no options", scheme.name())
        } else {
            format!("{}: takes {help}", scheme.name())
        }
    };
    let pieces = join_escaped_commas(pieces);
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    // A piece after proxy-auth= that is no option of the scheme is likely the rest of a
    // password holding a comma: the message must not show it.
    for pair in pieces.windows(2) {
        let name = pair[1].split_once('=').map_or(pair[1], |(name, _)| name);
        let name = name.to_ascii_lowercase();
        if pair[0].to_ascii_lowercase().starts_with(SECRET_OPTION)
            && (name.is_empty() || !scheme.takes_option(&name))
        {
            return Err(format!(
                "option 'proxy-auth': what follows its value is no option of {}: a password \
                 holding ',' cannot be given here; put USER:PASS in {} instead",
                scheme.name(),
                outbound::AUTH_ENV
            ));
        }
    }
    let mut after_alpn = false;
    for piece in pieces {
        // `alpn=h2,http/1.1`: a word after alpn= that is no option is another protocol.
        if after_alpn && !piece.contains('=') && !piece.is_empty() && !scheme.takes_option(piece) {
            opts.tls.alpn.push(piece.to_string());
            continue;
        }
        after_alpn = false;
        let (name, value) = match piece.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (piece, None),
        };
        let name = name.to_ascii_lowercase();
        if name.is_empty() {
            return Err(format!("empty option after ','; {}", takes()));
        }
        if name == "fork" {
            return Err(
                "option 'fork' is not needed: relay serves every connection a listener \
                 accepts (socat's fork), each on the event loop, without forking"
                    .to_string(),
            );
        }
        if !scheme.takes_option(&name) {
            let known = SCHEME_TABLE
                .iter()
                .any(|info| info.options.iter().any(|o| o.word() == name));
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
        if seen.contains(&name) && !matches!(name.as_str(), "header" | "header-env") {
            return Err(format!("option '{name}' is given twice ({})", takes()));
        }
        seen.push(name.clone());
        if sockopt::is_word(&name) {
            opts.sock.set(&name, value)?;
            continue;
        }
        if access::is_word(&name) {
            opts.access.set(&name, value)?;
            continue;
        }
        match (name.as_str(), value) {
            ("append" | "excl" | "reuseport" | "reuseaddr" | "mptcp" | "tls" | "raw", Some(_)) => {
                return Err(format!(
                    "option '{name}' is a flag and takes no value ({})",
                    takes()
                ));
            }
            ("append", None) => opts.append = true,
            ("raw", None) => opts.terminal.raw = true,
            ("echo", value) => opts.terminal.echo = Some(parse_echo(value)?),
            ("tls", None) => opts.tls_flag = true,
            ("sni", value) => {
                let name = option_value("sni", value, "expected sni=NAME")?;
                opts.tls.sni = Some(name.to_string());
            }
            ("cafile" | "cert" | "key", value) => {
                let path = option_value(&name, value, &format!("expected {name}=PEM-FILE"))?;
                let path = Some(PathBuf::from(path));
                match name.as_str() {
                    "cafile" => opts.tls.cafile = path,
                    "cert" => opts.tls.cert = path,
                    _ => opts.tls.key = path,
                }
            }
            ("pin", value) => opts.tls.pin = Some(parse_pin(value)?),
            ("method", value) => {
                let method = option_value("method", value, "expected method=PUT or method=POST")?;
                let method = method.to_ascii_uppercase();
                if !matches!(method.as_str(), "PUT" | "POST" | "PATCH") {
                    return Err(format!(
                        "option 'method' takes PUT, POST or PATCH (the method of an upload), \
                         got '{method}'"
                    ));
                }
                opts.http.method = Some(method);
            }
            ("header", value) => {
                let value = option_value(
                    "header",
                    value,
                    "expected header=NAME:VALUE or header=@FILE",
                )?;
                let spec = match value.strip_prefix('@') {
                    Some(path) if !path.is_empty() => HeaderSpec::File(PathBuf::from(path)),
                    _ => {
                        let (name, value) = split_header(value).map_err(|e| {
                            format!("option 'header': {e}; expected header=NAME:VALUE")
                        })?;
                        HeaderSpec::Given {
                            name: name.to_string(),
                            value: value.to_string(),
                        }
                    }
                };
                opts.http.headers.push(spec);
            }
            ("header-env", value) => {
                let expected = "expected header-env=NAME:VAR (header NAME, value from $VAR)";
                let value = option_value("header-env", value, expected)?;
                let (name, var) = split_header(value)
                    .map_err(|e| format!("option 'header-env': {e}; {expected}"))?;
                if var.is_empty() || var.contains('=') {
                    return Err(format!(
                        "option 'header-env': '{var}' is no variable name; {expected}"
                    ));
                }
                opts.http.headers.push(HeaderSpec::Env {
                    name: name.to_string(),
                    var: var.to_string(),
                });
            }
            ("range", value) => {
                let value = option_value("range", value, "expected range=START-[END]")?;
                opts.http.range =
                    Some(parse_range(value).map_err(|e| format!("option 'range': {e}"))?);
            }
            ("verify", value) => {
                opts.tls.insecure = match value {
                    Some("1") => false,
                    Some("0") => true,
                    _ => {
                        return Err(format!(
                            "option 'verify' takes 0 (do not verify the server: insecure) or 1, \
                             got '{}'",
                            value.unwrap_or("")
                        ))
                    }
                }
            }
            ("alpn", value) => {
                let first = option_value("alpn", value, "expected alpn=PROTOCOL[,PROTOCOL...]")?;
                opts.tls.alpn.push(first.to_string());
                after_alpn = true;
            }
            ("excl", None) => opts.excl = true,
            ("reuseport", None) => opts.listen.reuseport = true,
            // socat's habit: zerocat's TCP listeners always set SO_REUSEADDR.
            ("reuseaddr", None) => {}
            ("mptcp", None) => {
                opts.listen.mptcp = true;
                opts.connect.mptcp = true;
            }
            ("ipv6only", value) => {
                opts.listen.ipv6only = Some(match value {
                    Some("1") => true,
                    Some("0") => false,
                    _ => {
                        return Err(format!(
                            "option 'ipv6only' takes 0 or 1, got '{}'",
                            value.unwrap_or("")
                        ))
                    }
                })
            }
            // A listener reads a header (`proxy`); a connector sends one (`proxy=v1|v2`).
            ("proxy", None) if scheme != Scheme::Tcp => opts.listen.proxy = true,
            ("proxy", Some(_)) if scheme != Scheme::Tcp => {
                return Err(format!(
                    "option 'proxy' is a flag on {} (it reads v1 or v2, whichever comes); \
                     proxy=v1|v2 is for a tcp: connector",
                    scheme.name()
                ))
            }
            ("proxy", value) => {
                opts.connect.proxy = Some(match value {
                    Some(v) if v.eq_ignore_ascii_case("v1") => Version::V1,
                    Some(v) if v.eq_ignore_ascii_case("v2") => Version::V2,
                    _ => {
                        return Err(format!(
                            "option 'proxy' of tcp: takes v1 or v2 (the PROXY protocol \
                             version to send), got '{}'",
                            value.unwrap_or("")
                        ))
                    }
                })
            }
            ("frame", value) => {
                let frame = match value {
                    Some(v) if v.eq_ignore_ascii_case("len16") => Frame::Len16,
                    _ => {
                        return Err(format!(
                            "option 'frame' takes len16 (a 2-byte big-endian length before \
                             each datagram), got '{}'",
                            value.unwrap_or("")
                        ))
                    }
                };
                opts.connect.frame = Some(frame);
                opts.listen.frame = Some(frame);
            }
            ("mode", value) => opts.mode = Some(parse_mode(value)?),
            ("backlog", value) => opts.backlog = Some(parse_backlog(value)?),
            ("size", value) => {
                opts.size = Some(option_number(
                    "size",
                    value,
                    "expected size=N with N from 1 to 65507 (the largest UDP payload)",
                    |n: &u32| (1..=65_507).contains(n),
                )?)
            }
            ("retry", value) => opts.connect.retry = parse_retry(value)?,
            ("interval", value) => {
                let value =
                    option_value("interval", value, "expected interval=DURATION, e.g. 500ms")?;
                opts.connect.interval =
                    Some(parse_duration(value).map_err(|e| format!("interval: {e}"))?);
            }
            ("socks5" | "connect", value) => {
                let kind = if name == "socks5" {
                    outbound::Kind::Socks5
                } else {
                    outbound::Kind::Connect
                };
                if let Some(other) = &opts.connect.via {
                    return Err(format!(
                        "options '{}' and '{name}' do not combine: one proxy per connector",
                        other.kind.option()
                    ));
                }
                let expected =
                    format!("expected {name}=PROXYHOST:PORT, e.g. {name}=127.0.0.1:1080");
                let value = option_value(&name, value, &expected)?;
                let (host, port) = split_host_port(value, "tcp", &expected)
                    .map_err(|e| format!("option '{name}': {e}"))?;
                let host = host.ok_or_else(|| format!("option '{name}': {expected}"))?;
                let port =
                    parse_port(port, &expected).map_err(|e| format!("option '{name}': {e}"))?;
                if port == 0 {
                    return Err(format!(
                        "option '{name}': port 0 is no proxy's port; {expected}"
                    ));
                }
                opts.connect.via = Some(outbound::Via {
                    kind,
                    host: host.to_string(),
                    port,
                    auth: None,
                });
            }
            ("proxy-auth", value) => {
                let value = option_value("proxy-auth", value, "expected proxy-auth=USER:PASS")?;
                if !value.contains(':') {
                    return Err("option 'proxy-auth' takes USER:PASS (no ':' found)".into());
                }
                proxy_auth = Some(value.replace("\\,", ",").replace("\\\\", "\\"));
            }
            _ => unreachable!("takes_option admitted an option with no parser"),
        }
    }
    if let Some(auth) = proxy_auth {
        match &mut opts.connect.via {
            Some(via) => via.auth = Some(auth),
            None => {
                return Err(
                    "option 'proxy-auth' needs socks5=PROXYHOST:PORT or connect=PROXYHOST:PORT"
                        .into(),
                )
            }
        }
    }
    Ok(opts)
}

/// The option pieces, with a `proxy-auth=` value's `\,` (a comma of the password, as a
/// `file:` path writes one) joined back with what follows: the piece ends in an odd number
/// of backslashes. Its value is unescaped (`\,`, `\\`) where it is read.
fn join_escaped_commas<'a>(pieces: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut joined: Vec<String> = Vec::new();
    let mut open = false;
    for piece in pieces {
        match joined.last_mut() {
            Some(last) if open => {
                last.push(',');
                last.push_str(piece);
            }
            _ => joined.push(piece.to_string()),
        }
        let last = joined.last().expect("just pushed");
        let trailing = last.bytes().rev().take_while(|&b| b == b'\\').count();
        open = last.to_ascii_lowercase().starts_with(SECRET_OPTION) && trailing % 2 == 1;
    }
    joined
}

/// The value of `name=VALUE`; a missing or empty one is an error that says what fits.
fn option_value<'a>(name: &str, value: Option<&'a str>, expected: &str) -> Result<&'a str, String> {
    value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("option '{name}' needs a value; {expected}"))
}

/// `pin=sha256:HEX`: the SHA-256 of the server certificate's DER, 64 hex digits, with or
/// without the colons of `openssl x509 -noout -fingerprint -sha256` (either case).
fn parse_pin(value: Option<&str>) -> Result<[u8; 32], String> {
    const EXPECTED: &str = "expected pin=sha256:HEX, the SHA-256 of the server certificate's \
                            DER in 64 hex digits (openssl x509 -in CERT.pem -noout -fingerprint \
                            -sha256 prints it)";
    let value = option_value("pin", value, EXPECTED)?;
    let Some(hex) = value
        .split_once(':')
        .filter(|(kind, _)| kind.eq_ignore_ascii_case("sha256"))
        .map(|(_, hex)| hex)
    else {
        return Err(format!("option 'pin' takes a SHA-256 only; {EXPECTED}"));
    };
    let digits: Vec<u8> = hex.bytes().filter(|&b| b != b':').collect();
    let nibble = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut pin = [0u8; 32];
    if digits.len() != 64 || digits.iter().any(|&b| nibble(b).is_none()) {
        return Err(format!(
            "option 'pin': '{hex}' is not 64 hex digits; {EXPECTED}"
        ));
    }
    for (byte, pair) in pin.iter_mut().zip(digits.chunks(2)) {
        *byte = nibble(pair[0]).unwrap_or(0) << 4 | nibble(pair[1]).unwrap_or(0);
    }
    Ok(pin)
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
const DURATION_MAX: Duration = Duration::from_secs(365 * 24 * 3600);

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
        0 if matches!(
            scheme,
            "tcp-listen" | "udp-listen" | "tls-listen" | "ws-listen"
        ) =>
        {
            Ok((None, address))
        }
        // `tcp:9000` (nc's `nc -l 9000` habit): a port and no host.
        0 if !address.is_empty() && address.bytes().all(|b| b.is_ascii_digit()) => Err(format!(
            "missing HOST: '{address}' is only a port; write {scheme}:HOST:{address} to \
             connect, or {scheme}-listen:{address} to listen"
        )),
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
            Endpoint::FdTls { fd, tls } => {
                write!(f, "fd:{fd},tls")?;
                write_tls_opts(f, tls)
            }
            Endpoint::File { path, opts } => {
                let path_text = path.to_string_lossy();
                // `file:a,b` would read `b` as an option; the bare form keeps the comma.
                if path_text.contains(',') && *opts == FileOpts::default() {
                    let bare = parse(&path_text);
                    if bare.as_ref() == Ok(self) {
                        return f.write_str(&path_text);
                    }
                }
                write!(f, "file:{}", escape_file_path(&path_text))?;
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
                connect:
                    connect @ ConnectOpts {
                        ws: Some(ws), tls, ..
                    },
            } => {
                let scheme = if tls.is_some() { "wss" } else { "ws" };
                write!(
                    f,
                    "{scheme}://{}:{port}{}",
                    uri_host(host),
                    ws.path.as_deref().unwrap_or("/")
                )?;
                write_connect_opts(f, connect)?;
                match tls {
                    Some(tls) => write_tls_opts(f, tls),
                    None => Ok(()),
                }
            }
            Endpoint::Tcp {
                host,
                port,
                connect,
            } => {
                let scheme = match (&connect.tls, connect.sock.family) {
                    (Some(_), _) => "tls".to_string(),
                    (None, Some(family)) => format!("tcp{}", family.digit()),
                    (None, None) => "tcp".to_string(),
                };
                write!(f, "{scheme}:{}:{port}", uri_host(host))?;
                write_connect_opts(f, connect)?;
                connect.sock.write(f)?;
                match &connect.tls {
                    Some(tls) => write_tls_opts(f, tls),
                    None => Ok(()),
                }
            }
            Endpoint::TcpListen {
                host,
                port,
                backlog,
                listen,
            } => {
                f.write_str(if listen.ws.is_some() {
                    "ws-listen:"
                } else if listen.tls.is_some() {
                    "tls-listen:"
                } else {
                    "tcp-listen:"
                })?;
                if let Some(host) = host {
                    write!(f, "{}:", uri_host(host))?;
                }
                write!(f, "{port}")?;
                if let Some(path) = listen.ws.as_ref().and_then(|ws| ws.path.as_ref()) {
                    f.write_str(path)?;
                }
                if let Some(backlog) = backlog {
                    write!(f, ",backlog={backlog}")?;
                }
                if listen.reuseport {
                    f.write_str(",reuseport")?;
                }
                if let Some(only) = listen.ipv6only {
                    write!(f, ",ipv6only={}", u8::from(only))?;
                }
                if listen.proxy {
                    f.write_str(",proxy")?;
                }
                if listen.mptcp {
                    f.write_str(",mptcp")?;
                }
                if listen.frame == Some(Frame::Len16) {
                    f.write_str(",frame=len16")?;
                }
                listen.access.write(f)?;
                listen.sock.write(f)?;
                match &listen.tls {
                    Some(tls) => write_tls_opts(f, tls),
                    None => Ok(()),
                }
            }
            Endpoint::Udp {
                host,
                port,
                size,
                sock,
            } => {
                let digit = sock.family.map(|f| f.digit().to_string());
                write!(
                    f,
                    "udp{}:{}:{port}",
                    digit.unwrap_or_default(),
                    uri_host(host)
                )?;
                if let Some(size) = size {
                    write!(f, ",size={size}")?;
                }
                sock.write(f)
            }
            Endpoint::S3 { bucket, key, opts } => {
                write!(f, "s3://{bucket}/{}", escape_file_path(key))?;
                if let Some(endpoint) = &opts.endpoint {
                    write!(f, ",endpoint={endpoint}")?;
                }
                if let Some(size) = opts.part_size {
                    write!(f, ",part-size={size}")?;
                }
                if let Some(n) = opts.parts {
                    write!(f, ",parts={n}")?;
                }
                write_tls_opts(f, &opts.tls)
            }
            Endpoint::UdpListen { host, port, access } => {
                f.write_str("udp-listen:")?;
                if let Some(host) = host {
                    write!(f, "{}:", uri_host(host))?;
                }
                write!(f, "{port}")?;
                access.write(f)
            }
            Endpoint::Systemd { name, proxy, tls } => {
                write!(f, "systemd:{}", name.as_deref().unwrap_or(""))?;
                if *proxy {
                    f.write_str(",proxy")?;
                }
                match tls {
                    Some(tls) => {
                        f.write_str(",tls")?;
                        write_tls_opts(f, tls)
                    }
                    None => Ok(()),
                }
            }
            Endpoint::Http { url, opts, .. } => {
                f.write_str(&redact_url(url))?;
                if let Some(method) = &opts.method {
                    write!(f, ",method={method}")?;
                }
                for header in &opts.headers {
                    match header {
                        // The value may be a token: never shown.
                        HeaderSpec::Given { name, .. } => write!(f, ",header={name}:***")?,
                        HeaderSpec::File(path) => write!(f, ",header=@{}", path.display())?,
                        HeaderSpec::Env { name, var } => write!(f, ",header-env={name}:{var}")?,
                    }
                }
                if let Some(range) = &opts.range {
                    write!(f, ",range={range}")?;
                }
                write_connect_opts(f, &opts.connect)?;
                match &opts.connect.tls {
                    Some(tls) => write_tls_opts(f, tls),
                    None => Ok(()),
                }
            }
            Endpoint::Command(spec) => {
                match &spec.program {
                    Program::Exec(argv) => {
                        let words: Vec<String> =
                            argv.iter().map(|w| command::quote_word(w)).collect();
                        write!(f, "exec:{}", words.join(" "))?;
                    }
                    Program::Sh(line) if command::option_comma(line).is_none() => {
                        write!(f, "sh:{line}")?
                    }
                    Program::Sh(line) => write!(f, "sh:{}", command::quote_word(line))?,
                }
                if spec.stderr {
                    f.write_str(",stderr")?;
                }
                if let Some(size) = spec.pty {
                    f.write_str(",pty")?;
                    if size != super::pty::WindowSize::default() {
                        write!(f, ",rows={},cols={}", size.rows, size.cols)?;
                    }
                }
                Ok(())
            }
            Endpoint::Pty { link } => match link {
                Some(link) => write!(f, "pty:{}", link.display()),
                None => f.write_str("pty:"),
            },
            Endpoint::Terminal { on, mode } => {
                write!(f, "{on}")?;
                if mode.raw {
                    f.write_str(",raw")?;
                }
                if let Some(echo) = mode.echo {
                    write!(f, ",echo={}", u8::from(echo))?;
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

fn write_tls_opts(f: &mut fmt::Formatter<'_>, tls: &TlsOpts) -> fmt::Result {
    if let Some(sni) = &tls.sni {
        write!(f, ",sni={sni}")?;
    }
    for (name, path) in [
        ("cafile", &tls.cafile),
        ("cert", &tls.cert),
        ("key", &tls.key),
    ] {
        if let Some(path) = path {
            write!(f, ",{name}={}", path.display())?;
        }
    }
    if let Some(pin) = &tls.pin {
        write!(f, ",pin=sha256:{}", hex(pin))?;
    }
    if tls.insecure {
        f.write_str(",verify=0")?;
    }
    if !tls.alpn.is_empty() {
        write!(f, ",alpn={}", tls.alpn.join(","))?;
    }
    Ok(())
}

fn write_connect_opts(f: &mut fmt::Formatter<'_>, opts: &ConnectOpts) -> fmt::Result {
    if opts.retry > 0 {
        write!(f, ",retry={}", opts.retry)?;
    }
    if let Some(interval) = opts.interval {
        write!(f, ",interval={}ms", interval.as_millis())?;
    }
    if let Some(version) = opts.proxy {
        write!(f, ",proxy={version}")?;
    }
    if let Some(via) = &opts.via {
        // The credentials stay out of what is shown.
        write!(
            f,
            ",{}={}:{}",
            via.kind.option(),
            uri_host(&via.host),
            via.port
        )?;
    }
    if opts.mptcp {
        f.write_str(",mptcp")?;
    }
    if opts.frame == Some(Frame::Len16) {
        f.write_str(",frame=len16")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
