use super::*;

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
        listen: ListenOpts::default(),
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
    "udp:127.0.0.1:53",
    "udp:127.0.0.1:53,size=1400",
    "UDP:[::1]:9",
    "udp-listen:0",
    "udp-l:[::1]:5000",
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
            backlog: Some(16),
            listen: ListenOpts::default(),
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
    assert_eq!(ok("UDP-L:7").to_string(), "udp-listen:7");
    assert_eq!(ok("udp:[::1]:7").to_string(), "udp:[::1]:7");
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
    err("fd:1,append", &["'append'", "fd:", "tls, cert=PEM"]);
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
                proxy: None,
                via: None,
                mptcp: false,
                tls: None,
                ..ConnectOpts::default()
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
    err(
        "htp://example.com/",
        &["unknown scheme 'htp'", "did you mean 'http'?"],
    );
    // With no near word, the hint names every scheme and alias (it once left out exec,
    // sh and system).
    let hint = parse("bogus:x").unwrap_err().message;
    let named: Vec<&str> = hint
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .collect();
    for info in SCHEME_TABLE {
        for word in info.words() {
            assert!(named.contains(&word), "the hint lacks {word}: {hint}");
        }
    }
    err("sytem:true", &["did you mean 'system'?"]);
}

#[test]
fn every_word_of_the_scheme_table_names_its_scheme_once() {
    let mut seen = Vec::new();
    for info in SCHEME_TABLE {
        for word in info.words() {
            assert!(!seen.contains(&word), "{word} twice in SCHEME_TABLE");
            seen.push(word);
            assert_eq!(Scheme::from_word(word), Some(info.scheme), "{word}");
            assert_eq!(
                Scheme::from_word(&word.to_ascii_uppercase()),
                Some(info.scheme)
            );
        }
        assert_eq!(info.scheme.name(), info.name);
    }
}

/// An address each scheme parses, to try its options on.
fn sample_address(scheme: &str) -> &'static str {
    match scheme {
        "fd" => "3",
        "file" => "out",
        "tcp" | "tls" | "udp" => "127.0.0.1:9",
        // An IPv6 address, which ipv6only= applies to.
        "tcp-listen" | "udp-listen" => "[::1]:0",
        "tls-listen" => "[::1]:0,cert=c.pem,key=k.pem",
        "unix" | "unix-listen" => "/tmp/s",
        "systemd" => "",
        "exec" | "sh" => "true",
        "s3" => "//b/k",
        "ws" | "wss" => "//127.0.0.1:9/p",
        "ws-listen" => "[::1]:0/p",
        "http" | "https" => "//127.0.0.1:9/a,b",
        other => panic!("give {other}: a sample address here"),
    }
}

/// A value each option form takes, to write `word=value`.
fn sample_value(form: &'static str) -> Option<&'static str> {
    let (_, value) = form.split_once('=')?;
    Some(match value {
        "N" => "1",
        "OCTAL" => "0600",
        "DURATION" => "1s",
        "HOST:PORT" => "127.0.0.1:1080",
        "USER:PASS" => "u:p",
        "PEM" => "x.pem",
        "URL" => "http://127.0.0.1:9000",
        "SIZE" => "8M",
        "START-[END]" => "0-9",
        "NAME" | "PROTOCOLS" => "h2",
        "IP[:PORT]" => "127.0.0.1",
        "IDLE[:INTVL:CNT]]" => "30:5:4",
        "IFACE" => "lo",
        "CIDR[;CIDR...]" => "127.0.0.1;10.0.0.0/8",
        "PATH" => "allowed.txt",
        "sha256:HEX" => "sha256:0000000000000000000000000000000000000000000000000000000000000000",
        choice => choice.split('|').next().unwrap_or(choice),
    })
}

/// Every option word the table lists is parsed for its scheme: none reaches the parser's
/// `unreachable!` (a word added to the table and not to `parse_options`), none is refused
/// as an option the scheme does not take.
#[test]
fn every_option_word_of_the_table_is_taken_by_its_scheme() {
    for info in SCHEME_TABLE {
        for option in info.options {
            let word = match sample_value(option.form) {
                Some(value) => format!("{}={value}", option.word()),
                None => option.word().to_string(),
            };
            // What the option needs beside it to parse (a TLS listener's cert= and key=).
            let needs: &[&str] = match (info.name, option.word()) {
                (_, "proxy-auth") => &["socks5=127.0.0.1:1080"],
                ("fd" | "systemd", "proxy") => &[],
                ("fd" | "systemd", _) => &["tls", "cert=c.pem", "key=k.pem"],
                ("tls" | "https", "cert" | "key") => &["cert=c.pem", "key=k.pem"],
                ("ws-listen", "cert" | "key" | "cafile") => &["cert=c.pem", "key=k.pem"],
                ("exec" | "sh", "rows" | "cols") => &["pty"],
                _ => &[],
            };
            let mut pieces = vec![format!("{}:{}", info.name, sample_address(info.name))];
            let needed = needs.iter().filter(|n| !n.starts_with(option.word()));
            pieces.extend(needed.map(|n| n.to_string()));
            // tls-listen's sample already holds cert= and key=.
            if !(info.name == "tls-listen" && matches!(option.word(), "cert" | "key")) {
                pieces.push(word);
            }
            let arg = pieces.join(",");
            let parsed = std::panic::catch_unwind(|| parse(&arg));
            let parsed = parsed.unwrap_or_else(|_| panic!("{arg}: the parser panicked"));
            assert!(parsed.is_ok(), "{arg}: {}", parsed.unwrap_err());
        }
    }
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
fn listener_options_reuseport_ipv6only_proxy() {
    assert_eq!(
        ok("tcp-listen:[::]:80,reuseport,ipv6only=1,proxy"),
        Endpoint::TcpListen {
            host: Some("::".into()),
            port: 80,
            backlog: None,
            listen: ListenOpts {
                reuseport: true,
                ipv6only: Some(true),
                proxy: true,
                mptcp: false,
                tls: None,
                ..ListenOpts::default()
            },
        }
    );
    assert_eq!(
        ok("tcp-listen:[::]:80,ipv6only=0").to_string(),
        "tcp-listen:[::]:80,ipv6only=0"
    );
    // A name may resolve to IPv6: allowed; an IPv4 literal or the default host: not.
    ok("tcp-listen:localhost:80,ipv6only=1");
    err(
        "tcp-listen:0.0.0.0:80,ipv6only=1",
        &["ipv6only", "IPv6 listener"],
    );
    err("tcp-listen:80,ipv6only=0", &["ipv6only", "IPv6 listener"]);
    err(
        "tcp-listen:[::]:80,ipv6only=2",
        &["ipv6only", "0 or 1", "'2'"],
    );
    err("tcp-listen:[::]:80,ipv6only", &["ipv6only", "0 or 1"]);
    err("tcp-listen:80,reuseport=1", &["reuseport", "flag"]);
    err(
        "tcp-listen:80,proxy=v2",
        &["proxy", "flag", "tcp: connector"],
    );
    // Options that do not fit the scheme name the option.
    err(
        "tcp:h:80,reuseport",
        &["option 'reuseport' does not apply to tcp"],
    );
    err(
        "unix:/x,reuseport",
        &["option 'reuseport' does not apply to unix"],
    );
    err(
        "unix-listen:/x,proxy",
        &["option 'proxy' does not apply to unix-listen"],
    );
    err(
        "unix:/x,proxy=v2",
        &["option 'proxy' does not apply to unix"],
    );
    err(
        "unix-listen:/x,reuseport",
        &["'reuseport' does not apply to unix-listen"],
    );
    err("fd:3,proxy", &["'proxy' does not apply to fd"]);
    err("file:x,ipv6only=1", &["'ipv6only' does not apply to file"]);
}

#[test]
fn connector_proxy_versions() {
    let v2 = ok("tcp:h:80,proxy=v2");
    assert!(matches!(
        v2,
        Endpoint::Tcp {
            connect: ConnectOpts {
                proxy: Some(crate::endpoint::proxy::Version::V2),
                ..
            },
            ..
        }
    ));
    assert_eq!(v2.to_string(), "tcp:h:80,proxy=v2");
    assert_eq!(ok("tcp:h:80,proxy=V1").to_string(), "tcp:h:80,proxy=v1");
    err("tcp:h:80,proxy=v3", &["option 'proxy'", "v1 or v2", "'v3'"]);
    err("tcp:h:80,proxy", &["option 'proxy'", "v1 or v2"]);
}

#[test]
fn systemd_scheme() {
    assert_eq!(
        ok("systemd:"),
        Endpoint::Systemd {
            name: None,
            proxy: false,
            tls: None,
        }
    );
    assert_eq!(
        ok("SYSTEMD:web,proxy"),
        Endpoint::Systemd {
            name: Some("web".into()),
            proxy: true,
            tls: None,
        }
    );
    assert_eq!(ok("systemd:web,proxy").to_string(), "systemd:web,proxy");
    assert!(ok("systemd:").is_listener());
    err("systemd:a b", &["not a socket name"]);
    err(
        "systemd:,backlog=3",
        &["'backlog' does not apply to systemd"],
    );
    err("systemdd:", &["did you mean 'systemd'"]);
}

#[test]
fn socks5_and_connect_parse_and_show_without_credentials() {
    let ep = parse("tcp:localhost:22,socks5=127.0.0.1:1080,proxy-auth=u:p").unwrap();
    let Endpoint::Tcp { connect, .. } = &ep else {
        panic!("{ep:?}")
    };
    let via = connect.via.as_ref().unwrap();
    assert_eq!(via.kind, crate::endpoint::outbound::Kind::Socks5);
    assert_eq!((via.host.as_str(), via.port), ("127.0.0.1", 1080));
    assert_eq!(via.auth.as_deref(), Some("u:p"));
    assert_eq!(ep.to_string(), "tcp:localhost:22,socks5=127.0.0.1:1080");
    let ep = parse("tcp:[::1]:22,CONNECT=[::1]:3128").unwrap();
    assert_eq!(ep.to_string(), "tcp:[::1]:22,connect=[::1]:3128");
    for bad in [
        "tcp:h:1,socks5=127.0.0.1",
        "tcp:h:1,socks5=127.0.0.1:0",
        "tcp:h:1,socks5=",
        "tcp:h:1,socks5=127.0.0.1:1,connect=127.0.0.1:2",
        "tcp:h:1,proxy-auth=u:p",
        "tcp:h:1,socks5=127.0.0.1:1,proxy-auth=nocolon",
        "tcp-listen:1,connect=127.0.0.1:1",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn mptcp_is_a_flag_of_tcp_endpoints_and_reads_back() {
    let Endpoint::Tcp { connect, .. } = ok("tcp:h:1,MPTCP") else {
        panic!("tcp:");
    };
    assert!(connect.mptcp);
    assert_eq!(ok("tcp:h:1,mptcp").to_string(), "tcp:h:1,mptcp");
    let Endpoint::TcpListen { listen, .. } = ok("tcp-listen:0,mptcp,reuseport") else {
        panic!("tcp-listen:");
    };
    assert!(listen.mptcp && listen.reuseport);
    assert_eq!(ok("tcp-listen:0,mptcp").to_string(), "tcp-listen:0,mptcp");
    err("tcp:h:1,mptcp=1", &["'mptcp' is a flag"]);
    err("unix:/s,mptcp", &["'mptcp' does not apply to unix"]);
    err("tcp-listen:0,mptcp,mptcp", &["given twice"]);
}

#[test]
fn a_file_path_may_hold_an_escaped_comma_or_backslash() {
    let e = parse(r"file:a\,b,append").unwrap();
    assert_eq!(
        e,
        Endpoint::File {
            path: PathBuf::from("a,b"),
            opts: FileOpts {
                append: true,
                ..FileOpts::default()
            }
        }
    );
    assert_eq!(e.to_string(), r"file:a\,b,append");
    assert_eq!(parse(&e.to_string()).unwrap(), e, "it reads back");
    let e = parse(r"file:dir\\,excl").unwrap();
    assert_eq!(
        e,
        Endpoint::File {
            path: PathBuf::from(r"dir\"),
            opts: FileOpts {
                excl: true,
                ..FileOpts::default()
            }
        }
    );
    assert_eq!(parse(&e.to_string()).unwrap(), e);
    // A backslash before anything else is itself, as it always was.
    match parse(r"file:a\b").unwrap() {
        Endpoint::File { path, .. } => assert_eq!(path, PathBuf::from(r"a\b")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn tls_endpoints_parse_with_their_options_and_display_back() {
    let e = ok("tls:api.example:443,sni=api,cafile=/ca.pem,alpn=h2,http/1.1,retry=2");
    let Endpoint::Tcp {
        host,
        port,
        connect,
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(
        (host.as_str(), *port, connect.retry),
        ("api.example", 443, 2)
    );
    let tls = connect.tls.as_ref().expect("tls");
    assert_eq!(tls.sni.as_deref(), Some("api"));
    assert_eq!(tls.alpn, ["h2", "http/1.1"]);
    assert_eq!(e.scheme(), "tls");
    assert_eq!(ok(&e.to_string()), e);
    let l = ok("tls-listen:8443,cert=c.pem,key=k.pem,cafile=ca.pem,proxy");
    assert_eq!(l.scheme(), "tls-listen");
    assert!(l.is_listener());
    assert_eq!(ok(&l.to_string()), l);
    let s = ok("systemd:web,tls,cert=c.pem,key=k.pem");
    assert!(s.tls().is_some());
    assert_eq!(ok(&s.to_string()), s);
    for (bad, says) in [
        ("tls-listen:8443", "needs its certificate and key"),
        (
            "tls-listen:8443,cert=c.pem",
            "needs its certificate and key",
        ),
        ("tls:h:1,cert=c.pem", "both cert=PEM and key=PEM"),
        ("tls:h:1,verify=maybe", "option 'verify' takes 0"),
        (
            "tls-listen:1,cert=c,key=k,sni=x",
            "option 'sni' does not apply to tls-listen",
        ),
        ("tcp:h:1,cafile=x", "option 'cafile' does not apply to tcp"),
        ("systemd:,cert=c.pem,key=k.pem", "go with its 'tls' flag"),
        ("tls://h:1", "URL style"),
    ] {
        let err = parse(bad).expect_err(bad).to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn pin_takes_a_sha256_in_hex_with_or_without_colons() {
    let hex: String = (0u8..32).map(|b| format!("{b:02x}")).collect();
    let colons = (0u8..32)
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":");
    let want: Vec<u8> = (0u8..32).collect();
    for written in [format!("sha256:{hex}"), format!("SHA256:{colons}")] {
        let e = ok(&format!("tls:h:1,pin={written},cafile=ca.pem"));
        let tls = e.tls().expect("tls");
        assert_eq!(tls.pin.map(|p| p.to_vec()), Some(want.clone()), "{written}");
        assert!(e.to_string().contains(&format!(",pin=sha256:{hex}")), "{e}");
        assert_eq!(ok(&e.to_string()), e);
    }
    err(
        &format!("tls:h:1,pin={hex}"),
        &["takes a SHA-256 only", "pin=sha256:HEX"],
    );
    err("tls:h:1,pin=md5:00", &["takes a SHA-256 only"]);
    err("tls:h:1,pin=sha256:abc", &["'abc' is not 64 hex digits"]);
    err(
        &format!("tls:h:1,pin=sha256:{}", "g".repeat(64)),
        &["is not 64 hex digits"],
    );
    err("tls:h:1,pin=", &["option 'pin' needs a value"]);
    err(
        &format!("tls:h:1,pin=sha256:{hex},verify=0"),
        &["verify=0 skips the check: give one of them"],
    );
    err(
        &format!("tls-listen:1,cert=c,key=k,pin=sha256:{hex}"),
        &["option 'pin' does not apply to tls-listen"],
    );
}

#[test]
fn a_proxy_password_takes_an_escaped_comma_and_is_never_shown() {
    let auth = |arg: &str| match parse(arg).unwrap() {
        Endpoint::Tcp { connect, .. } => connect.via.unwrap().auth.unwrap(),
        other => panic!("{other}"),
    };
    let base = "tcp:h:1,socks5=127.0.0.1:1";
    assert_eq!(auth(&format!(r"{base},proxy-auth=u:a\,b")), "u:a,b");
    assert_eq!(
        auth(&format!(r"{base},proxy-auth=u:a\\\,b,mptcp")),
        r"u:a\,b"
    );
    assert_eq!(auth(&format!(r"{base},proxy-auth=u:a\\,mptcp")), r"u:a\");
    let ep = parse(&format!(r"{base},proxy-auth=u:pw\,x")).unwrap();
    assert!(!ep.to_string().contains("pw"), "{ep}");
    for bad in [
        format!("{base},proxy-auth=u:pw,x"),
        format!("{base},proxy-auth=upw"),
        format!("{base},proxy-auth=u:pw,"),
    ] {
        let e = parse(&bad).unwrap_err().to_string();
        assert!(!e.contains("pw"), "{e}");
    }
    assert_eq!(
        redact("tcp:h:1,PROXY-AUTH=u:pw,x"),
        "tcp:h:1,PROXY-AUTH=***"
    );
    assert_eq!(redact("tcp:h:1"), "tcp:h:1");
}

#[test]
fn frame_len16_is_a_tcp_stream_option_that_displays_back() {
    for uri in ["tcp:h:53,frame=len16", "tcp-listen:5353,frame=len16"] {
        let e = ok(uri);
        assert_eq!(e.frame(), Some(crate::endpoint::Frame::Len16), "{uri}");
        assert_eq!(e.to_string(), uri);
    }
    assert_eq!(
        ok("TCP:h:53,FRAME=LEN16").to_string(),
        "tcp:h:53,frame=len16"
    );
    for bad in [
        "udp:h:53,frame=len16",
        "udp-listen:53,frame=len16",
        "tcp:h:53,frame=len32",
        "tcp:h:53,frame",
        "tls:h:853,frame=len16",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn s3_objects_parse_with_their_options_and_round_trip() {
    assert_eq!(
        ok("s3://my-bucket/dir/a b+c.bin"),
        Endpoint::S3 {
            bucket: "my-bucket".into(),
            key: "dir/a b+c.bin".into(),
            opts: S3Opts::default(),
        }
    );
    let ep = ok(r"S3://b/a\,b,endpoint=http://127.0.0.1:9000,part-size=16M,parts=8");
    assert_eq!(
        ep,
        Endpoint::S3 {
            bucket: "b".into(),
            key: "a,b".into(),
            opts: S3Opts {
                endpoint: Some("http://127.0.0.1:9000".into()),
                part_size: Some(16 << 20),
                parts: Some(8),
                ..S3Opts::default()
            },
        }
    );
    assert_eq!(parse(&ep.to_string()).unwrap(), ep);
    let tls = ok("s3://b/k,endpoint=https://127.0.0.1:9443,cafile=/ca.pem,sni=localhost");
    let Endpoint::S3 { opts, .. } = &tls else {
        panic!("{tls:?}")
    };
    assert_eq!(
        opts.tls.cafile.as_deref(),
        Some(std::path::Path::new("/ca.pem"))
    );
    assert_eq!(opts.tls.sni.as_deref(), Some("localhost"));
    assert_eq!(parse(&tls.to_string()).unwrap(), tls);
    let Endpoint::S3 { opts, .. } = ok("s3://b/k,verify=0") else {
        unreachable!()
    };
    assert!(opts.tls.insecure);
    err("s3://b/k,verify=2", &["'verify' takes 0"]);
    assert_eq!(ok("s3://b/").to_string(), "s3://b/");
    assert_eq!(ep.scheme(), "s3");
}

#[test]
fn malformed_s3_says_what_was_expected() {
    err("s3:b/k", &["missing '//'", "s3://BUCKET/KEY"]);
    err("s3:///k", &["missing BUCKET"]);
    err("s3://b?x/k", &["not a bucket name"]);
    err("s3://b/k,part-size=1M", &["5 MiB to 5 GiB"]);
    err("s3://b/k,parts=0", &["parts=0", "from 1 to 64"]);
    err("s3://b/k,parts=65", &["from 1 to 64"]);
    err("s3://b/k,parts=2,parts=3", &["given twice"]);
    err("s3://b/k,endpoint=ftp://h", &["not an http"]);
    err(
        "s3://b/k,append",
        &["option 'append' is not an option of s3:", "\\,"],
    );
    err("s3://b/k,part-size=8M,part-size=9M", &["given twice"]);
}

#[test]
fn http_urls_parse_with_the_url_crate_and_keep_commas_that_are_no_option() {
    let Endpoint::Http { url, opts, .. } = ok("http://127.0.0.1:8080/a,b.txt?x=1,2") else {
        panic!("not http")
    };
    assert_eq!(url.as_str(), "http://127.0.0.1:8080/a,b.txt?x=1,2");
    assert_eq!(opts, HttpOpts::default());
    let Endpoint::Http { url, opts, .. } =
        ok("HTTPS://[::1]/k,header=X-A:1,header=X-B:two words,range=5-,cafile=ca.pem")
    else {
        panic!("not https")
    };
    assert_eq!(url.as_str(), "https://[::1]/k");
    assert_eq!(opts.headers.len(), 2);
    assert_eq!(
        opts.range,
        Some(ByteRange {
            start: 5,
            end: None
        })
    );
    assert!(opts.connect.tls.is_some());
    err("http:///x", &["missing HOST"]);
    err("http:/x", &["has no '//'"]);
    err("http://h:70000/", &["invalid port number"]);
    let bad = parse("http://h/,header=Bad Name:v").unwrap_err();
    assert!(bad.message.contains("is not a header name"), "{bad}");
    err("http://h/,tls", &["does not apply to http"]);
}

#[test]
fn http_secrets_never_show() {
    let shown = ok("http://u:pw@h/x,header=Authorization:Bearer SECRET").to_string();
    assert_eq!(shown, "http://u:***@h/x,header=Authorization:***");
    assert_eq!(
        redact("http://u:pw@h/x,header=Authorization:Bearer SECRET"),
        "http://u:***@h/x,header=***"
    );
    // A port out of range, a mistyped scheme (whose hint quotes the argument), a token
    // written where a header's name goes.
    for arg in [
        "http://u:pw@h:99999/x,header=Authorization:Bearer SECRET",
        "htp://u:pw@h/x,header=Authorization:Bearer SECRET",
        "http://h/x,header=Bearer SECRET:pw",
    ] {
        let e = parse(arg).unwrap_err();
        assert!(
            !e.to_string().contains("SECRET") && !e.to_string().contains("pw"),
            "{e}"
        );
    }
}

#[test]
fn pty_options_and_terminal_modes_parse_and_display_back() {
    for uri in [
        "exec:cat,pty",
        "sh:bash,pty,rows=40,cols=120",
        "pty:",
        "pty:/tmp/ttyV0",
        "-,raw,echo=0",
        "-,raw",
        "file:/dev/tty,raw,echo=0",
    ] {
        assert_eq!(ok(uri).to_string(), uri);
    }
    assert!(matches!(ok("-,RAW,ECHO=0"), Endpoint::Terminal { .. }));
    for bad in [
        "exec:cat,rows=3",
        "exec:cat,pty,rows=0",
        "tcp:h:1,pty",
        "-,pty",
        "-,echo=yes",
        "file:x,raw=1",
        "udp:h:1,raw",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}
