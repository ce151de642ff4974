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
    valued('p', "p"),
    valued('q', "q"),
    valued('s', "s"),
    valued('w', "w"),
    valued('X', "X"),
    valued('x', "x"),
    // OpenBSD's flags zerocat does not take: known, so the refusal names them.
    flag('C', "C"),
    flag('D', "D"),
    flag('F', "F"),
    flag('r', "r"),
    flag('S', "S"),
    flag('t', "t"),
    flag('Z', "Z"),
    valued('I', "I"),
    valued('i', "i"),
    valued('M', "M"),
    valued('m', "m"),
    valued('O', "O"),
    valued('P', "P"),
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
            "d" => a.no_stdin = true,
            "h" => {
                eprintln!("{USAGE}");
                std::process::exit(1)
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
            "q" => a.quit_after = Some(secs(&value, "quit timeout")),
            "X" => a.proxy_kind = Some(value),
            "x" => a.proxy = Some(value),
            other => refuse_unsupported(other),
        }
    }
    run_as(a, options)
}

/// `-w 2`, `-q 0.5`: seconds, or nc's own error.
fn secs(value: &str, what: &str) -> Duration {
    super::seconds(value)
        .unwrap_or_else(|| super::refuse("nc", &format!("{what} {value} is invalid"), "", None, 1))
}

/// Flags OpenBSD nc has and zerocat does not take: the usage error, and the zerocat
/// spelling where there is one.
fn refuse_unsupported(key: &str) -> ! {
    let spelling = match key {
        "C" => "zerocat moves bytes as they are; convert line ends before it (sed 's/$/\\r/')",
        "i" => "pace with -L RATE (zerocat --limit) instead of a delay between lines",
        "P" => "give the proxy's user and password in ZEROCAT_PROXY_AUTH=user:pass",
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
        return udp(a);
    }
    if a.listen {
        return listen(a, options);
    }
    let (host, ports) = match &a.operands[..] {
        [host, ports] => (host.clone(), ports.clone()),
        [] => {
            eprintln!("{USAGE}");
            std::process::exit(1)
        }
        _ => super::refuse("nc", "missing port number", "", None, 1),
    };
    let ports = parse_ports(&ports);
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
            Some(stream) => stream,
            None => std::process::exit(1),
        }
    };
    if a.verbose {
        eprintln!(
            "Connection to {host} {port} port [tcp/{}] succeeded!",
            service(port)
        );
    }
    let fd = stream.into_raw_fd();
    session(a, options, Endpoint::Fd(fd))
}

/// One connected (or accepted) stream: relayed with stdin and stdout, piped to stdout
/// (`-d`), or handed to a command (`-e`, `-c`).
fn session(a: Asked, _options: &mut Options, peer: Endpoint) -> Invocation {
    if let Some(child) = command_side(&a) {
        return relay(a.wait, peer, child);
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
    relay(a.wait, Endpoint::Stdio, peer)
}

fn relay(idle: Option<Duration>, a: Endpoint, b: Endpoint) -> Invocation {
    Invocation::Relay(
        RelayConfig {
            once: true,
            idle_timeout: idle,
            workers: Some(1),
            ..RelayConfig::between(a, b)
        },
        Tuning::default(),
    )
}

/// `-z`: connect to each port and close at once; nc's lines; exit 0 when one answered.
fn scan(a: &Asked, host: &str, ports: &[u16]) -> ! {
    let mut any = false;
    for &port in ports {
        if let Some(stream) = connect(a, host, port, a.verbose) {
            any = true;
            drop(stream);
            if a.verbose {
                eprintln!(
                    "Connection to {host} {port} port [tcp/{}] succeeded!",
                    service(port)
                );
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
        let why = if a.numeric || host.parse::<std::net::IpAddr>().is_ok() {
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
fn connect(a: &Asked, host: &str, port: u16, say: bool) -> Option<TcpStream> {
    for addr in addresses(a, host, port) {
        let tried = match a.wait {
            Some(limit) => TcpStream::connect_timeout(&addr, limit),
            None => TcpStream::connect(addr),
        };
        match tried {
            Ok(stream) => return Some(stream),
            Err(e) if say => {
                let shown = match addr.ip().to_string() {
                    ip if ip == host => host.to_string(),
                    ip => format!("{host} ({ip})"),
                };
                eprintln!(
                    "nc: connect to {shown} port {port} (tcp) failed: {}",
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
            None | Some("5") => "socks5",
            Some("connect") => "connect",
            Some(other) => super::refuse(
                "nc",
                &format!("unknown proxy protocol {other}"),
                USAGE,
                Some("zerocat reaches SOCKS5 (-X 5) and HTTP CONNECT (-X connect) proxies"),
                1,
            ),
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
        let ip = a.source.clone().unwrap_or_else(|| match a.family {
            Some(Family::V6) => "::".to_string(),
            _ => "0.0.0.0".to_string(),
        });
        let ip = if ip.contains(':') {
            format!("[{ip}]")
        } else {
            ip
        };
        uri.push_str(&format!(
            ",bind={ip}{}",
            a.port_flag
                .as_ref()
                .map(|p| format!(":{p}"))
                .unwrap_or_default()
        ));
    }
    let target = endpoint::parse(&uri).unwrap_or_else(|e| {
        super::refuse("nc", &e.to_string(), USAGE, None, 1);
    });
    match target.open(endpoint::Role::Sink) {
        Ok(opened) => TcpStream::from(opened.fd),
        Err(e) => {
            eprintln!("nc: connect to {host} port {port} (tcp) failed: {e:#}");
            std::process::exit(1)
        }
    }
}

/// `-l`: binds (SO_REUSEADDR, as nc), says so under `-v`, accepts one connection and
/// relays it; `-k` keeps accepting.
fn listen(a: Asked, options: &mut Options) -> Invocation {
    if a.scan {
        super::refuse("nc", "cannot use -z and -l", USAGE, None, 1);
    }
    let (host, port) = match (&a.operands[..], &a.port_flag) {
        ([], Some(port)) => (None, port.clone()),
        ([port], None) => (None, port.clone()),
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
    relay(a.wait, side, other)
}

/// `-u`: datagrams. `nc -u HOST PORT` sends stdin; `nc -lu PORT` prints what arrives.
fn udp(a: Asked) -> Invocation {
    let (host, port) = match (&a.operands[..], a.listen) {
        ([host, port], _) => (Some(host.clone()), port.clone()),
        ([port], true) => (None, port.clone()),
        ([], true) if a.port_flag.is_some() => (None, a.port_flag.clone().unwrap_or_default()),
        _ => super::refuse("nc", "missing port number", "", None, 1),
    };
    let bracket = |h: String| if h.contains(':') { format!("[{h}]") } else { h };
    let uri = match (a.listen, host) {
        (true, Some(host)) => format!("udp-listen:{}:{port}", bracket(host)),
        (true, None) => format!("udp-listen:0.0.0.0:{port}"),
        (false, Some(host)) => format!("udp:{}:{port}", bracket(host)),
        (false, None) => unreachable!("a connector has a host"),
    };
    let side = endpoint_of(&uri);
    let (src, dst) = if a.listen {
        (side, Endpoint::Stdio)
    } else {
        (Endpoint::Stdio, side)
    };
    Invocation::Pipe(PipeConfig {
        src,
        dst,
        grace: crate::cmd::relay::GRACE,
        idle_timeout: a.wait,
        keep_open: false,
    })
}

/// `80`, `20-30`, or a service name from /etc/services.
fn parse_ports(text: &str) -> Vec<u16> {
    let port = |p: &str| -> u16 {
        match p.parse::<u64>() {
            Ok(n) if n > 65535 => {
                super::refuse("nc", &format!("port number too large: {p}"), "", None, 1)
            }
            Ok(n) if n > 0 => n as u16,
            _ => port_of_service(p).unwrap_or_else(|| {
                super::refuse("nc", &format!("port number invalid: {p}"), "", None, 1)
            }),
        }
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match text
        .split_once('-')
        .filter(|(lo, hi)| digits(lo) && digits(hi))
    {
        Some((lo, hi)) => {
            let (lo, hi) = (port(lo), port(hi));
            let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
            (lo..=hi).collect()
        }
        None => vec![port(text)],
    }
}

/// The service /etc/services names for a TCP port, as nc shows it (`*` for none).
fn service(port: u16) -> String {
    services()
        .find(|(_, p)| *p == port)
        .map_or_else(|| "*".to_string(), |(name, _)| name)
}

fn port_of_service(name: &str) -> Option<u16> {
    services().find(|(n, _)| n == name).map(|(_, p)| p)
}

/// /etc/services' TCP entries: (name, port).
fn services() -> impl Iterator<Item = (String, u16)> {
    let text = std::fs::read_to_string("/etc/services").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let line = line.split('#').next()?;
            let mut words = line.split_whitespace();
            let name = words.next()?;
            let (port, proto) = words.next()?.split_once('/')?;
            (proto == "tcp").then(|| Some((name.to_string(), port.parse().ok()?)))?
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
