//! nc: OpenBSD netcat's flags (Debian's build, with its `-q`), and the ncat spellings people
//! mix in (`--exec`, `--sh-exec`, `--listen`, `--keep-open`, `--udp`, `--verbose`). `nc HOST
//! PORT` relays stdin and stdout with the peer; `nc -l [HOST] PORT` takes one connection;
//! `nc -z HOST PORTS` only connects. Connecting, listening and accepting happen here, so
//! the lines scripts parse (`Connection to H P port [tcp/*] succeeded!`, `nc: connect to
//! H port P (tcp) failed: ...`) are OpenBSD's, word for word; then the connected fd is a
//! `fd:N` side of the relay, and the engine moves the bytes.

use std::ffi::OsString;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::IntoRawFd;
use std::time::Duration;

use super::getopt::{self, Arg, Item, Spec};
use crate::cmd::pipe::PipeConfig;
use crate::cmd::relay::{RelayConfig, Tuning};
use crate::endpoint::{self, Endpoint};
use crate::options::Options;
use crate::Invocation;

const fn flag(short: char, key: &'static str) -> Spec {
    Spec {
        short: Some(short),
        long: None,
        arg: Arg::None,
        key,
    }
}

const fn valued(short: char, key: &'static str) -> Spec {
    Spec {
        short: Some(short),
        long: None,
        arg: Arg::Required,
        key,
    }
}

const fn long(name: &'static str, arg: Arg, key: &'static str) -> Spec {
    Spec {
        short: None,
        long: Some(name),
        arg,
        key,
    }
}

const SPECS: &[Spec] = &[
    flag('4', "4"),
    flag('6', "6"),
    flag('C', "C"),
    flag('d', "d"),
    flag('h', "h"),
    flag('k', "k"),
    flag('l', "l"),
    flag('N', "N"),
    flag('n', "n"),
    flag('U', "U"),
    flag('u', "u"),
    flag('v', "v"),
    flag('z', "z"),
    valued('e', "e"),
    valued('c', "c"),
    valued('i', "i"),
    valued('P', "P"),
    valued('p', "p"),
    valued('q', "q"),
    valued('s', "s"),
    valued('w', "w"),
    valued('X', "X"),
    valued('x', "x"),
    // OpenBSD's flags zerocat does not take: known, so the refusal names them.
    flag('D', "D"),
    flag('F', "F"),
    flag('r', "r"),
    flag('S', "S"),
    flag('t', "t"),
    flag('Z', "Z"),
    valued('I', "I"),
    valued('M', "M"),
    valued('m', "m"),
    valued('O', "O"),
    valued('T', "T"),
    valued('V', "V"),
    valued('W', "W"),
    // ncat's long spellings.
    long("exec", Arg::Required, "e"),
    long("sh-exec", Arg::Required, "c"),
    long("listen", Arg::None, "l"),
    long("keep-open", Arg::None, "k"),
    long("udp", Arg::None, "u"),
    long("verbose", Arg::None, "v"),
    long("wait", Arg::Required, "w"),
    long("recv-only", Arg::None, "d"),
    long("source", Arg::Required, "s"),
    long("source-port", Arg::Required, "p"),
    long("proxy", Arg::Required, "x"),
    long("proxy-type", Arg::Required, "X"),
    long("nodns", Arg::None, "n"),
    long("help", Arg::None, "h"),
];

/// `-h`'s summary below the usage: the flags zerocat's nc takes.
const HELP: &str = "\
\tCommand Summary:
\t\t-4\t\tUse IPv4
\t\t-6\t\tUse IPv6
\t\t-C\t\tSend CRLF as line-ending (each line through userspace)
\t\t-c cmd\t\tRun cmd with sh -c for the connection (ncat's --sh-exec)
\t\t-d\t\tDetach from stdin
\t\t-e prog\t\tRun prog for the connection (ncat's --exec)
\t\t-h\t\tThis help text
\t\t-i interval\tDelay interval for lines sent (each line through userspace)
\t\t-k\t\tKeep inbound sockets open for multiple connects
\t\t-l\t\tListen mode, for inbound connects
\t\t-N\t\tShutdown the network socket after EOF on stdin (always)
\t\t-n\t\tSuppress name/port resolutions
\t\t-P proxyuser\tUsername for proxy authentication (password asked on the terminal)
\t\t-p port\t\tSpecify local port for remote connects
\t\t-q secs\t\tquit after EOF on stdin and delay of secs
\t\t-s sourceaddr\tLocal source address
\t\t-U\t\tUse UNIX domain socket
\t\t-u\t\tUDP mode
\t\t-v\t\tVerbose
\t\t-w timeout\tTimeout for connects and final net reads
\t\t-X proto\tProxy protocol: \"5\" (SOCKS) or \"connect\"
\t\t-x addr[:port]\tSpecify proxy address and port
\t\t-z\t\tZero-I/O mode [used for scanning]
\tPort numbers can be individual or ranges: lo-hi [inclusive]
\tRefused, with the zerocat spelling: -D -F -I -M -m -O -r -S -T -t -V -W -Z
\t--zerocat-report[=json]\tzerocat's report (the kernel path) at the end";

const USAGE: &str = "\
usage: nc [-46CDdFhklNnrStUuvZz] [-I length] [-i interval] [-M ttl]
	  [-m minttl] [-O length] [-P proxy_username] [-p source_port]
	  [-q seconds] [-s sourceaddr] [-T keyword] [-V rtable] [-W recvlimit]
	  [-w timeout] [-X proxy_protocol] [-x proxy_address[:port]]
	  [destination] [port]";

/// What the command line asks nc to do.
#[derive(Debug, Default)]
struct Asked {
    listen: bool,
    keep: bool,
    udp: bool,
    unix: bool,
    scan: bool,
    verbose: bool,
    numeric: bool,
    no_stdin: bool,
    family: Option<Family>,
    exec: Option<String>,
    shell: Option<String>,
    port_flag: Option<String>,
    source: Option<String>,
    wait: Option<Duration>,
    quit_after: Option<Duration>,
    proxy: Option<String>,
    proxy_kind: Option<String>,
    proxy_user: Option<String>,
    crlf: bool,
    interval: Option<Duration>,
    operands: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

pub fn parse(name: &str, args: &[OsString], options: &mut Options) -> Invocation {
    let _ = name;
    let items = getopt::parse(args, SPECS).unwrap_or_else(|e| {
        super::refuse("nc", &e.glibc_words(), USAGE, None, 1);
    });
    let mut a = Asked::default();
    for item in items {
        let (key, value) = match item {
            Item::Operand(word) => {
                a.operands.push(word);
                continue;
            }
            Item::Opt { key, value } => (key, value.unwrap_or_default()),
        };
        match key {
            "4" => a.family = Some(Family::V4),
            "6" => a.family = Some(Family::V6),
            "C" => a.crlf = true,
            "i" => a.interval = interval(&value),
            "P" => a.proxy_user = Some(value),
            "d" => a.no_stdin = true,
            "h" => {
                eprintln!("zerocat answering as OpenBSD netcat\n{USAGE}\n{HELP}");
                std::process::exit(0)
            }
            "k" => a.keep = true,
            "l" => a.listen = true,
            // zerocat passes stdin's EOF on as a half-close always: what -N asks for.
            "N" => {}
            "n" => a.numeric = true,
            "U" => a.unix = true,
            "u" => a.udp = true,
            "v" => a.verbose = true,
            "z" => a.scan = true,
            "e" => a.exec = Some(value),
            "c" => a.shell = Some(value),
            "p" => a.port_flag = Some(value),
            "s" => a.source = Some(value),
            "w" => a.wait = Some(secs(&value, "timeout")),
            // Debian's -q: a negative count waits for ever, as without it.
            "q" if value.trim_start().starts_with('-') => a.quit_after = None,
            "q" => a.quit_after = Some(secs(&value, "quit timer")),
            "X" => a.proxy_kind = Some(proxy_protocol(value)),
            "x" => a.proxy = Some(value),
            other => refuse_unsupported(other),
        }
    }
    if a.keep && !a.listen {
        super::refuse("nc", "must use -l with -k", "", None, 1);
    }
    run_as(a, options)
}

/// `-X 5|connect` as given; SOCKS4 refused with the zerocat way; anything else is nc's
/// own error.
fn proxy_protocol(value: String) -> String {
    match value.as_str() {
        "5" | "connect" => value,
        "4" => super::refuse(
            "nc",
            "-X 4: not supported by zerocat's nc",
            USAGE,
            Some("zerocat reaches SOCKS5 (-X 5) and HTTP CONNECT (-X connect) proxies"),
            1,
        ),
        _ => super::refuse("nc", "unsupported proxy protocol", "", None, 1),
    }
}

/// `-i SECS`: whole seconds as nc's strtonum takes them (0 pauses not at all), or nc's
/// words for why not (`nc: interval invalid: 0.5`).
fn interval(value: &str) -> Option<Duration> {
    match strtonum_in(value, 0, u32::MAX.into()) {
        Ok(0) => None,
        Ok(secs) => Some(Duration::from_secs(secs as u64)),
        Err(why) => super::refuse("nc", &format!("interval {why}: {value}"), "", None, 1),
    }
}

/// `-w 2`, `-q 0.5`: seconds, or nc's own error (`nc: timeout invalid: abc`).
fn secs(value: &str, what: &str) -> Duration {
    super::seconds(value)
        .unwrap_or_else(|| super::refuse("nc", &format!("{what} invalid: {value}"), "", None, 1))
}

/// Flags OpenBSD nc has and zerocat does not take: the usage error, and the zerocat
/// spelling where there is one.
fn refuse_unsupported(key: &str) -> ! {
    let spelling = match key {
        "T" => "socket options: tcp:HOST:PORT,tos=N (see zerocat --help)",
        "r" => "probe the ports in order: zerocat probe tcp:HOST:LO-HI",
        _ => "see zerocat --help for the endpoint options",
    };
    super::refuse(
        "nc",
        &format!("-{key}: not supported by zerocat's nc"),
        USAGE,
        Some(spelling),
        1,
    )
}

/// The invocation for what was asked; connects, listens and accepts first where nc's own
/// lines depend on it.
fn run_as(a: Asked, options: &mut Options) -> Invocation {
    if a.unix {
        return unix(a);
    }
    if a.udp {
        return udp(a, options);
    }
    if a.listen {
        return listen(a, options);
    }
    let (host, ports) = match &a.operands[..] {
        [host, ports @ ..] if !ports.is_empty() => (host.clone(), ports),
        [] => {
            eprintln!("{USAGE}");
            std::process::exit(1)
        }
        _ => super::refuse("nc", "missing port number", "", None, 1),
    };
    // Each operand after the host is a port or a range, scanned in order.
    let ports: Vec<u16> = ports.iter().flat_map(|p| parse_ports(p)).collect();
    if a.scan {
        scan(&a, &host, &ports);
    }
    if ports.len() > 1 {
        super::refuse("nc", "port range not valid", "", None, 1);
    }
    let port = ports[0];
    let stream = if a.proxy.is_some() || a.source.is_some() || a.port_flag.is_some() {
        connect_through_endpoint(&a, &host, port)
    } else {
        match connect(&a, &host, port, a.verbose) {
            Some((stream, addr)) => {
                if a.verbose {
                    say_succeeded(&host, addr);
                }
                stream
            }
            None => std::process::exit(1),
        }
    };
    let fd = stream.into_raw_fd();
    session(a, options, Endpoint::Fd(fd))
}

/// One connected (or accepted) stream: relayed with stdin and stdout, piped to stdout
/// (`-d`), or handed to a command (`-e`, `-c`).
fn session(a: Asked, options: &mut Options, peer: Endpoint) -> Invocation {
    if let Some(child) = command_side(&a) {
        return relay(&a, peer, child);
    }
    if !a.no_stdin {
        lines_from_stdin(&a, options);
    }
    if a.no_stdin {
        return Invocation::Pipe(PipeConfig {
            src: peer,
            dst: Endpoint::Stdio,
            grace: crate::cmd::relay::GRACE,
            idle_timeout: a.wait,
            keep_open: false,
        });
    }
    relay(&a, Endpoint::Stdio, peer)
}

/// `-C`, `-i`: stdin's lines as nc sends them (a CR before each LF that has none; a pause
/// after each line), through a thread that reads every byte ([`super::lines`]) and a pipe
/// put in stdin's place; the session then moves them by the userspace path, and the
/// report says why. Without either flag stdin is left as it is, for the kernel's paths.
fn lines_from_stdin(a: &Asked, options: &mut Options) {
    if !a.crlf && a.interval.is_none() {
        return;
    }
    let lines = super::lines::Lines {
        crlf: a.crlf,
        pause: a.interval,
        ..super::lines::Lines::ended_by(b'\n')
    };
    use std::os::fd::{AsFd as _, AsRawFd as _};
    let started = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|stdin| lines.start(stdin))
        .and_then(|piped| nix::unistd::dup2(piped.as_raw_fd(), 0).map_err(std::io::Error::from));
    if let Err(e) = started {
        super::refuse("nc", &format!("stdin: {}", strerror(&e)), "", None, 1);
    }
    options.via = crate::engine::Via::Forced(crate::engine::DataPath::Userspace);
    options.userspace_because = Some(if a.crlf {
        "nc -C rewrites each line end (every byte read)"
    } else {
        "nc -i pauses after each line (every byte read)"
    });
}

/// One session between `x` and `y`: `-w` idle ends it cleanly ("silently closed", exit 0,
/// as nc). `-q` changes nothing here: Debian's build half-closes at stdin's EOF (zerocat
/// always does) and starts its timer only once the peer closed, when zerocat just ends.
fn relay(asked: &Asked, x: Endpoint, y: Endpoint) -> Invocation {
    Invocation::Relay(
        RelayConfig {
            once: true,
            idle_timeout: asked.wait,
            idle_ends_cleanly: true,
            workers: Some(1),
            ..RelayConfig::between(x, y)
        },
        Tuning::default(),
    )
}

/// `Connection to H P port [tcp/SERVICE] succeeded!`, `H (IP)` when H was a name.
fn say_succeeded(host: &str, addr: SocketAddr) {
    eprintln!(
        "Connection to {} {} port [tcp/{}] succeeded!",
        shown(host, addr),
        addr.port(),
        service(addr.port(), "tcp")
    );
}

/// A host as nc names it in its lines: as given, with the address after a name.
fn shown(host: &str, addr: SocketAddr) -> String {
    match addr.ip().to_string() {
        ip if ip == host => host.to_string(),
        ip => format!("{host} ({ip})"),
    }
}

/// `-z`: connect to each port and close at once; nc's lines; exit 0 when one answered.
fn scan(a: &Asked, host: &str, ports: &[u16]) -> ! {
    let mut any = false;
    for &port in ports {
        if let Some((stream, addr)) = connect(a, host, port, a.verbose) {
            any = true;
            drop(stream);
            if a.verbose {
                say_succeeded(host, addr);
            }
        }
    }
    std::process::exit(if any { 0 } else { 1 })
}

/// The addresses `host` names (numerically only under `-n`), of the family asked for.
fn addresses(a: &Asked, host: &str, port: u16) -> Vec<SocketAddr> {
    let resolved: Vec<SocketAddr> = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) if a.numeric => Vec::new(),
        Err(_) => (host, port)
            .to_socket_addrs()
            .map(Iterator::collect)
            .unwrap_or_default(),
    };
    let wanted: Vec<SocketAddr> = resolved
        .into_iter()
        .filter(|addr| match a.family {
            Some(Family::V4) => addr.is_ipv4(),
            Some(Family::V6) => addr.is_ipv6(),
            None => true,
        })
        .collect();
    if wanted.is_empty() {
        let numeric = host.parse::<std::net::IpAddr>().is_ok();
        let why = if numeric && a.family.is_some() {
            "Address family for hostname not supported"
        } else if a.numeric || numeric {
            "Name or service not known"
        } else {
            "Temporary failure in name resolution"
        };
        super::refuse(
            "nc",
            &format!("getaddrinfo for host \"{host}\" port {port}: {why}"),
            "",
            None,
            1,
        );
    }
    wanted
}

/// Connects to the first address of `host` that answers (within `-w`), saying each
/// failure as OpenBSD nc does.
fn connect(a: &Asked, host: &str, port: u16, say: bool) -> Option<(TcpStream, SocketAddr)> {
    for addr in addresses(a, host, port) {
        let tried = match a.wait {
            Some(limit) => TcpStream::connect_timeout(&addr, limit),
            None => TcpStream::connect(addr),
        };
        match tried {
            Ok(stream) => return Some((stream, addr)),
            Err(e) if say => {
                eprintln!(
                    "nc: connect to {} port {port} (tcp) failed: {}",
                    shown(host, addr),
                    strerror(&e)
                );
            }
            Err(_) => {}
        }
    }
    None
}

/// A connection that leaves through a proxy (`-X`/`-x`) or from a chosen source (`-s`,
/// `-p`): the tcp: endpoint's own options make it.
fn connect_through_endpoint(a: &Asked, host: &str, port: u16) -> TcpStream {
    let host_part = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    let mut uri = format!("tcp:{host_part}:{port}");
    if let Some(proxy) = &a.proxy {
        let word = match a.proxy_kind.as_deref() {
            Some("connect") => "connect",
            _ => "socks5",
        };
        let proxy = if proxy.contains(':') {
            proxy.clone()
        } else if word == "socks5" {
            format!("{proxy}:1080")
        } else {
            format!("{proxy}:3128")
        };
        uri.push_str(&format!(",{word}={proxy}"));
    }
    if a.source.is_some() || a.port_flag.is_some() {
        let ip = match &a.source {
            Some(source) => source_address(a, source),
            None if a.family == Some(Family::V6) => std::net::Ipv6Addr::UNSPECIFIED.into(),
            None => std::net::Ipv4Addr::UNSPECIFIED.into(),
        };
        let port = a.port_flag.as_deref().map_or(0, source_port);
        uri.push_str(&format!(",bind={}", SocketAddr::new(ip, port)));
    }
    let opened = match &a.proxy_user {
        Some(user) if a.proxy_kind.as_deref() == Some("connect") => {
            open_with_password(&uri, user, a.proxy.as_deref().unwrap_or_default())
        }
        _ => open_tcp(&uri),
    };
    match opened {
        Ok(opened) => {
            let stream = TcpStream::from(opened.fd);
            if a.verbose {
                // Through a proxy the peer is the proxy: nc names the target as given.
                match stream.peer_addr() {
                    Ok(addr) if a.proxy.is_none() => say_succeeded(host, addr),
                    _ => eprintln!(
                        "Connection to {host} {port} port [tcp/{}] succeeded!",
                        service(port, "tcp")
                    ),
                }
            }
            stream
        }
        Err(e) => {
            say_connect_failed(a, host, port, &e);
            std::process::exit(1)
        }
    }
}

fn open_tcp(uri: &str) -> anyhow::Result<endpoint::Opened> {
    let target = endpoint::parse(uri).unwrap_or_else(|e| {
        super::refuse("nc", &e.to_string(), USAGE, None, 1);
    });
    target.open(endpoint::Role::Sink)
}

/// `-P USER -X connect`: as nc, first without credentials; when the proxy answers 407,
/// again with USER and the password read from the terminal, up to nc's four tries
/// (`Proxy authentication failed` after each refused one).
fn open_with_password(uri: &str, user: &str, proxy: &str) -> anyhow::Result<endpoint::Opened> {
    let proxy_host = proxy_host(proxy);
    let mut tries = 0;
    let mut auth: Option<String> = None;
    loop {
        tries += 1;
        if tries > 4 {
            super::refuse("nc", "Too many authentication failures", "", None, 1);
        }
        if tries > 1 {
            let password = proxy_password(user, proxy_host);
            // A comma of the credentials is written `\,` in a URI option.
            auth = Some(format!("{user}:{password}").replace(',', "\\,"));
        }
        let with_auth = match &auth {
            Some(auth) => format!("{uri},proxy-auth={auth}"),
            None => uri.to_string(),
        };
        match open_tcp(&with_auth) {
            Err(e) if proxy_answer(&e).is_some_and(|answer| answer.code == 407) => {
                if tries > 1 {
                    eprintln!("Proxy authentication failed");
                }
            }
            other => return other,
        }
    }
}

/// The answer an HTTP CONNECT proxy refused with, when that is why `e` happened.
fn proxy_answer(e: &anyhow::Error) -> Option<&endpoint::outbound::HttpAnswer> {
    e.chain()
        .find_map(|c| c.downcast_ref::<endpoint::outbound::Refused>())
        .and_then(|refused| refused.answer.as_ref())
}

/// `-x`'s host, as nc names it in its prompt: without the port or the brackets.
fn proxy_host(proxy: &str) -> &str {
    match proxy.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => proxy.rsplit_once(':').map_or(proxy, |(host, _)| host),
    }
}

/// The proxy's password as nc's readpassphrase(3) reads it: prompted for and typed on the
/// terminal (`/dev/tty`), echo off. No terminal: nc's refusal, and the zerocat way.
fn proxy_password(user: &str, proxy_host: &str) -> String {
    use std::io::{Read as _, Write as _};
    let Ok(mut tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        super::refuse(
            "nc",
            "Unable to read proxy passphrase",
            "",
            Some(&format!(
                "without a terminal, give the password in {}=USER:PASS",
                endpoint::outbound::AUTH_ENV
            )),
            1,
        )
    };
    // Echo off before the prompt, as readpassphrase(3) does: a password typed as soon as
    // the prompt shows must not be echoed.
    let quiet = tty.try_clone().ok().and_then(|fd| {
        let mode = crate::sys::terminal::Mode {
            raw: false,
            echo: Some(false),
        };
        crate::sys::terminal::change(fd.into(), mode).ok()
    });
    let _ = write!(tty, "Proxy password for {user}@{proxy_host}: ");
    let mut typed = Vec::new();
    let mut byte = [0u8; 1];
    while let Ok(1) = tty.read(&mut byte) {
        if byte[0] == b'\n' {
            break;
        }
        typed.push(byte[0]);
    }
    drop(quiet);
    let _ = writeln!(tty);
    String::from_utf8_lossy(&typed)
        .trim_end_matches('\r')
        .to_string()
}

/// A connection through the tcp: endpoint failed: nc's line under `-v` when it was the
/// connect that failed (to the proxy, when there is one), else zerocat's words.
fn say_connect_failed(a: &Asked, host: &str, port: u16, e: &anyhow::Error) {
    let io = e.chain().find_map(|c| c.downcast_ref::<std::io::Error>());
    let refused = io
        .and_then(std::io::Error::raw_os_error)
        .is_some_and(|raw| {
            use nix::errno::Errno;
            [
                Errno::ECONNREFUSED,
                Errno::ETIMEDOUT,
                Errno::EHOSTUNREACH,
                Errno::ENETUNREACH,
                Errno::EADDRINUSE,
                Errno::EADDRNOTAVAIL,
            ]
            .contains(&Errno::from_raw(raw))
        });
    if let Some(answer) = proxy_answer(e) {
        eprintln!("nc: Proxy error: \"{}\"", answer.line);
        return;
    }
    match (io, &a.proxy) {
        (Some(io), None) if refused => {
            if a.verbose {
                eprintln!(
                    "nc: connect to {host} port {port} (tcp) failed: {}",
                    strerror(io)
                );
            }
        }
        (Some(io), Some(proxy)) if refused && e.to_string().contains("cannot connect to the") => {
            if a.verbose {
                let (proxy_host, proxy_port) = proxy.rsplit_once(':').unwrap_or((proxy, ""));
                eprintln!(
                    "nc: connect to {proxy_host} port {proxy_port} (tcp) failed: {}",
                    strerror(io)
                );
            }
        }
        _ => eprintln!("nc: {e:#}"),
    }
}

/// `-s ADDR`: an address, or a name resolved as nc's getaddrinfo does.
fn source_address(a: &Asked, source: &str) -> std::net::IpAddr {
    let resolved = match source.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) if a.numeric => Vec::new(),
        Err(_) => (source, 0)
            .to_socket_addrs()
            .map(|addrs| addrs.map(|addr| addr.ip()).collect())
            .unwrap_or_default(),
    };
    resolved
        .into_iter()
        .find(|ip| match a.family {
            Some(Family::V4) => ip.is_ipv4(),
            Some(Family::V6) => ip.is_ipv6(),
            None => true,
        })
        .unwrap_or_else(|| {
            super::refuse("nc", "getaddrinfo: Name or service not known", "", None, 1)
        })
}

/// `-p PORT`: a number or a service name, as nc's getaddrinfo takes it.
fn source_port(text: &str) -> u16 {
    text.parse()
        .ok()
        .or_else(|| port_of_service(text))
        .unwrap_or_else(|| {
            super::refuse(
                "nc",
                "getaddrinfo: Servname not supported for ai_socktype",
                "",
                None,
                1,
            )
        })
}

/// `-l`: binds (SO_REUSEADDR, as nc), says so under `-v`, accepts one connection and
/// relays it; `-k` keeps accepting.
fn listen(a: Asked, options: &mut Options) -> Invocation {
    if a.scan {
        super::refuse("nc", "cannot use -z and -l", USAGE, None, 1);
    }
    let (host, port) = match (&a.operands[..], &a.port_flag) {
        ([], Some(port)) => (a.source.clone(), port.clone()),
        ([port], None) => (a.source.clone(), port.clone()),
        ([host], Some(port)) => (Some(host.clone()), port.clone()),
        ([host, port], _) => (Some(host.clone()), port.clone()),
        _ => super::refuse("nc", "missing port number", "", None, 1),
    };
    let port = parse_ports(&port);
    let [port] = port[..] else {
        super::refuse("nc", "port range not valid", "", None, 1)
    };
    let host = host.unwrap_or_else(|| match a.family {
        Some(Family::V6) => "::".to_string(),
        _ => "0.0.0.0".to_string(),
    });
    let bound = addresses(&a, &host, port)
        .into_iter()
        .find_map(|addr| TcpListener::bind(addr).ok())
        .unwrap_or_else(|| {
            eprintln!("nc: Address already in use");
            std::process::exit(1)
        });
    let local = bound.local_addr().ok();
    if a.verbose {
        if let Some(local) = local {
            eprintln!("Listening on {} {}", local.ip(), local.port());
        }
    }
    if a.keep {
        // One connection after another into the session, until a signal.
        let fd = bound.into_raw_fd();
        let listener = Endpoint::Fd(fd);
        return keep_open(a, listener);
    }
    let (stream, peer) = loop {
        match bound.accept() {
            Ok(accepted) => break accepted,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                if crate::sys::process::must_stop() {
                    std::process::exit(130)
                }
            }
            Err(e) => {
                eprintln!("nc: accept: {}", strerror(&e));
                std::process::exit(1)
            }
        }
    };
    drop(bound);
    if a.verbose {
        eprintln!("Connection received on {} {}", peer.ip(), peer.port());
    }
    session(a, options, Endpoint::Fd(stream.into_raw_fd()))
}

/// `-lk`: every connection in turn. Without `-e`/`-c`, each one's bytes go to stdout,
/// whole, one connection after another (`pipe --keep-open`: what `nc -lk PORT > log`
/// is for; stdin is not sent to them). With a command, each connection gets its own, one
/// at a time, as ncat -k does.
fn keep_open(a: Asked, listener: Endpoint) -> Invocation {
    let Some(child) = command_side(&a) else {
        return Invocation::Pipe(PipeConfig {
            src: listener,
            dst: Endpoint::Stdio,
            grace: crate::cmd::relay::GRACE,
            idle_timeout: a.wait,
            keep_open: true,
        });
    };
    Invocation::Relay(
        RelayConfig {
            idle_timeout: a.wait,
            idle_ends_cleanly: true,
            workers: Some(1),
            // One connection at a time, as nc -k serves them: the next waits in the backlog.
            max_conns: Some(1),
            ..RelayConfig::between(listener, child)
        },
        Tuning::default(),
    )
}

/// The command `-e PROG` (exec:) or `-c CMD` (sh:) names, as a relay side.
fn command_side(a: &Asked) -> Option<Endpoint> {
    match (&a.exec, &a.shell) {
        (Some(program), _) => Some(endpoint_of(&format!("exec:{program}"))),
        (None, Some(command)) => Some(endpoint_of(&format!("sh:{command}"))),
        (None, None) => None,
    }
}

/// A URI made from nc's operands, or nc's error naming why it does not parse.
fn endpoint_of(uri: &str) -> Endpoint {
    endpoint::parse(uri).unwrap_or_else(|e| super::refuse("nc", &e.to_string(), "", None, 1))
}

/// `-U`: a unix socket, connected or (`-l`) listened on.
fn unix(a: Asked) -> Invocation {
    let [path] = &a.operands[..] else {
        super::refuse("nc", "missing socket path", USAGE, None, 1)
    };
    let scheme = if a.listen { "unix-listen" } else { "unix" };
    let side = endpoint_of(&format!("{scheme}:{path}"));
    let other = command_side(&a).unwrap_or(Endpoint::Stdio);
    relay(&a, side, other)
}

/// `-u`: datagrams. `nc -u HOST PORT` is a session between stdin/stdout and the peer,
/// a read of stdin a datagram, each answer printed (ended by `-w` or `-q` seconds without
/// a datagram either way, else a minute after stdin's EOF); `nc -uz HOST PORTS` only
/// connects; `nc -lu PORT` prints what arrives.
fn udp(a: Asked, options: &mut Options) -> Invocation {
    let bracket = |h: &str| {
        if h.contains(':') {
            format!("[{h}]")
        } else {
            h.to_string()
        }
    };
    if !a.listen {
        let (host, ports) = match &a.operands[..] {
            [host, ports @ ..] if !ports.is_empty() => (host, ports),
            _ => super::refuse("nc", "missing port number", "", None, 1),
        };
        let ports: Vec<u16> = ports.iter().flat_map(|p| parse_ports(p)).collect();
        if a.scan {
            udp_scan(&a, host, &ports);
        }
        let [port] = ports[..] else {
            super::refuse("nc", "port range not valid", "", None, 1)
        };
        let peer = endpoint_of(&format!("udp:{}:{port}", bracket(host)));
        lines_from_stdin(&a, options);
        // UDP has no EOF to wait for: -q's seconds bound the silence, as -w's do.
        let idle = match (a.wait, a.quit_after) {
            (Some(w), Some(q)) => Some(w.min(q)),
            (w, q) => w.or(q),
        };
        return Invocation::Relay(
            RelayConfig {
                once: true,
                idle_timeout: idle,
                idle_ends_cleanly: true,
                workers: Some(1),
                ..RelayConfig::between(Endpoint::Stdio, peer)
            },
            Tuning::default(),
        );
    }
    let (host, port) = match &a.operands[..] {
        [host, port] => (Some(host.clone()), port.clone()),
        [port] => (None, port.clone()),
        [] if a.port_flag.is_some() => (None, a.port_flag.clone().unwrap_or_default()),
        _ => super::refuse("nc", "missing port number", "", None, 1),
    };
    let uri = match host {
        Some(host) => format!("udp-listen:{}:{port}", bracket(&host)),
        None => format!("udp-listen:0.0.0.0:{port}"),
    };
    Invocation::Pipe(PipeConfig {
        src: endpoint_of(&uri),
        dst: Endpoint::Stdio,
        grace: crate::cmd::relay::GRACE,
        idle_timeout: a.wait,
        keep_open: false,
    })
}

/// `-uz`: a UDP "connection" to each port. Quiet, nothing is sent (as nc). With `-v`,
/// nc's udptest: five `X` datagrams, a refusal (ICMP port unreachable) on any of them
/// fails the port, silently as nc; zerocat sends them 100 ms apart where nc takes about
/// three seconds.
fn udp_scan(a: &Asked, host: &str, ports: &[u16]) -> ! {
    let mut any = false;
    for &port in ports {
        for addr in addresses(a, host, port) {
            let local: SocketAddr = if addr.is_ipv4() {
                (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
            } else {
                (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
            };
            let tried = std::net::UdpSocket::bind(local).and_then(|socket| {
                socket.connect(addr)?;
                if a.verbose {
                    for i in 0..5 {
                        if i > 0 {
                            std::thread::sleep(Duration::from_millis(100));
                        }
                        socket.send(b"X")?;
                    }
                }
                Ok(())
            });
            // A refusal is silent, as nc's.
            if tried.is_ok() {
                any = true;
                if a.verbose {
                    eprintln!(
                        "Connection to {} {port} port [udp/{}] succeeded!",
                        shown(host, addr),
                        service(port, "udp")
                    );
                }
                break;
            }
        }
    }
    std::process::exit(if any { 0 } else { 1 })
}

/// `80`, `20-30`, or a service name from /etc/services; nc's words for a bad one
/// (`port number too small: 0`, `port number invalid: x`, the high end checked first).
fn parse_ports(text: &str) -> Vec<u16> {
    let refuse = |why: &str, p: &str| -> ! {
        super::refuse("nc", &format!("port number {why}: {p}"), "", None, 1)
    };
    let number = |p: &str| strtonum(p).unwrap_or_else(|why| refuse(why, p));
    match text.split_once('-') {
        Some((lo, hi)) if text.starts_with(|c: char| c.is_ascii_digit()) => {
            let hi = number(hi);
            let lo = number(lo);
            let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
            (lo..=hi).collect()
        }
        _ => match strtonum(text) {
            Ok(port) => vec![port],
            Err("invalid") => {
                vec![port_of_service(text).unwrap_or_else(|| refuse("invalid", text))]
            }
            Err(why) => refuse(why, text),
        },
    }
}

/// A port as strtonum(3) reads it between 1 and 65535, or its word for why not.
fn strtonum(text: &str) -> Result<u16, &'static str> {
    strtonum_in(text, 1, 65535).map(|n| n as u16)
}

/// strtonum(3): a decimal integer between `min` and `max`, or its word for why not
/// (`invalid`, `too small`, `too large`).
fn strtonum_in(text: &str, min: i64, max: i64) -> Result<i64, &'static str> {
    let signless = text.strip_prefix(['-', '+']).unwrap_or(text);
    if signless.is_empty() || !signless.bytes().all(|b| b.is_ascii_digit()) {
        return Err("invalid");
    }
    match text.parse::<i64>() {
        Ok(n) if n < min => Err("too small"),
        Ok(n) if n > max => Err("too large"),
        Ok(n) => Ok(n),
        Err(_) if text.starts_with('-') => Err("too small"),
        Err(_) => Err("too large"),
    }
}

/// The service /etc/services names for a port of `proto`, as nc shows it (`*` for none).
fn service(port: u16, proto: &str) -> String {
    services(proto)
        .find(|(_, p)| *p == port)
        .map_or_else(|| "*".to_string(), |(name, _)| name)
}

fn port_of_service(name: &str) -> Option<u16> {
    services("tcp").find(|(n, _)| n == name).map(|(_, p)| p)
}

/// /etc/services' entries of `proto` (tcp, udp): (name, port).
fn services(proto: &str) -> impl Iterator<Item = (String, u16)> {
    let text = std::fs::read_to_string("/etc/services").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let line = line.split('#').next()?;
            let mut words = line.split_whitespace();
            let name = words.next()?;
            let (port, its_proto) = words.next()?.split_once('/')?;
            (its_proto == proto).then(|| Some((name.to_string(), port.parse().ok()?)))?
        })
        .collect::<Vec<_>>()
        .into_iter()
}

/// An error's words as strerror(3) has them (no "(os error N)").
fn strerror(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(raw) => nix::errno::Errno::from_raw(raw).desc().to_string(),
        None if e.kind() == std::io::ErrorKind::TimedOut => "Operation timed out".to_string(),
        None => e.to_string(),
    }
}
