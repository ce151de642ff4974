//! Endpoints under hostile conditions: standard fds closed, directories, symlinks, sockets
//! that are files, blocking opens that must end on a signal, and the URI parser under
//! property tests.

use super::*;

// =============================================================================================
// Started with a standard fd closed
// =============================================================================================

/// Runs zerocat from `sh -c 'exec zerocat ARGS REDIRECTIONS'`, so the fds are closed by the
/// shell exactly as a user's `>&-` would.
fn run_with_closed(redirections: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new("sh");
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg("-c")
        .arg(format!("exec \"$0\" \"$@\" {redirections}"))
        .arg(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::util::wait_with_deadline(cmd.spawn().unwrap(), DEADLINE)
}

/// With fds 0-2 closed, the first files zerocat opens would get those numbers: the source
/// as fd 0, the sink as fd 2 — and the report would land in the sink. zerocat parks
/// /dev/null on closed standard fds first; a sink it opens is never fd 0, 1 or 2.
#[test]
fn closed_standard_fds_never_receive_data() {
    let payload = data(1 << 20);
    let dir = tempdir();
    let src = crate::util::write_file(dir.path(), "in.bin", &payload);
    let out = dir.path().join("out.bin");
    let (src_s, out_s) = (src.to_str().unwrap(), out.to_str().unwrap());
    for redirections in ["<&-", ">&-", "2>&-", "<&- 2>&-", "<&- >&- 2>&-"] {
        for via in ["auto", "userspace"] {
            let name = format!("pipe in out {redirections} via {via}");
            let run = run_with_closed(redirections, &["-v", "--via", via, "pipe", src_s, out_s]);
            assert_eq!(run.status.code(), Some(0), "{name}");
            assert_bytes_eq(&std::fs::read(&out).unwrap(), &payload, &name);
            assert_bytes_eq(&std::fs::read(&src).unwrap(), &payload, &name);
            std::fs::remove_file(&out).unwrap();
        }
    }
    // stdout closed, yet asked to write there: an error on '-', no file touched.
    let run = run_with_closed(">&-", &["pipe", src_s, "-"]);
    let stderr = crate::util::stderr_text(&run);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("'-'") && stderr.contains("(EBADF)"),
        "{stderr}"
    );
    assert_bytes_eq(&std::fs::read(&src).unwrap(), &payload, "source after >&-");
    // stdin closed, asked to read it: an error on '-'; the sink is created but gets nothing.
    let run = run_with_closed("<&-", &["pipe", "-", out_s]);
    let stderr = crate::util::stderr_text(&run);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot read from '-'"), "{stderr}");
    assert_eq!(std::fs::read(&out).unwrap().len(), 0);
    eprintln!("pipe with 0/1/2 closed | exact, or EBADF on the closed one | nothing misdirected");
}

// =============================================================================================
// Hostile paths: directories, symlinks, sockets that are files, FIFOs without a peer
// =============================================================================================

#[test]
fn directories_are_refused_on_either_side() {
    let dir = tempdir();
    let file = crate::util::write_file(dir.path(), "f", b"data");
    let d = dir.path().display().to_string();
    let f = file.display().to_string();
    for (src, dst) in [(&d, &f), (&f, &d)] {
        let mut cmd = crate::util::zerocat();
        cmd.args(["pipe", src, dst]);
        let out = crate::util::run(cmd);
        let stderr = crate::util::stderr_text(&out);
        assert_eq!(out.status.code(), Some(1), "{src} -> {dst}: {stderr}");
        assert!(stderr.contains("is a directory"), "{stderr}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"data");
}

/// A file sink follows symlinks like the shell's `>` and cp (DESIGN: "create/truncate,
/// like `>` and `cp`"); `excl` refuses anything that exists, a symlink included, even a dangling
/// one. The same-file check sees through symlinks and hard links, before truncating.
#[test]
fn symlinks_in_output_paths() {
    let payload = data(64 << 10);
    let dir = tempdir();
    let p = |name: &str| dir.path().join(name);
    let f = crate::util::write_file(dir.path(), "f", &payload);
    std::os::unix::fs::symlink(&f, p("link-to-f")).unwrap();
    std::fs::hard_link(&f, p("hard-f")).unwrap();
    std::os::unix::fs::symlink(p("link-to-f"), p("link-to-link")).unwrap();
    for dst in ["link-to-f", "hard-f", "link-to-link"] {
        let mut cmd = crate::util::zerocat();
        cmd.arg("pipe").arg(&f).arg(p(dst));
        let out = crate::util::run(cmd);
        let stderr = crate::util::stderr_text(&out);
        assert_eq!(out.status.code(), Some(1), "f -> {dst}: {stderr}");
        assert!(stderr.contains("same file"), "{stderr}");
        assert_bytes_eq(&std::fs::read(&f).unwrap(), &payload, dst);
    }
    // Through a symlink to another file: that file is written, the link stays a link.
    let other = crate::util::write_file(dir.path(), "other", b"old contents, longer than new");
    std::os::unix::fs::symlink(&other, p("link-to-other")).unwrap();
    let mut cmd = crate::util::zerocat();
    cmd.args(["--stats", "json", "pipe"])
        .arg(&f)
        .arg(p("link-to-other"));
    let out = crate::util::run(cmd);
    assert_eq!(out.status.code(), Some(0));
    assert_bytes_eq(
        &std::fs::read(&other).unwrap(),
        &payload,
        "through a symlink",
    );
    assert!(p("link-to-other").symlink_metadata().unwrap().is_symlink());
    assert_eq!(
        crate::util::json_report(&out.stderr)["bytes"].as_u64(),
        Some(payload.len() as u64)
    );
    // excl: refuses the symlink (EEXIST), dangling or not, and creates nothing.
    std::os::unix::fs::symlink(p("nowhere"), p("dangling")).unwrap();
    for link in ["link-to-other", "dangling"] {
        let mut cmd = crate::util::zerocat();
        cmd.arg("pipe")
            .arg(&f)
            .arg(format!("file:{},excl", p(link).display()));
        let out = crate::util::run(cmd);
        let stderr = crate::util::stderr_text(&out);
        assert_eq!(out.status.code(), Some(1), "excl {link}: {stderr}");
        assert!(stderr.contains("(EEXIST)"), "{stderr}");
    }
    assert!(
        !p("nowhere").exists(),
        "excl created the dangling link's target"
    );
    assert_bytes_eq(&std::fs::read(&other).unwrap(), &payload, "after excl");
}

/// A path where a unix socket is expected holds a regular file: unix-listen refuses to
/// replace it, unix: cannot connect; the file is never unlinked nor changed.
#[test]
fn a_unix_socket_path_that_is_a_regular_file_is_never_unlinked() {
    let dir = tempdir();
    let file = crate::util::write_file(dir.path(), "not-a-socket", b"precious");
    let src = crate::util::write_file(dir.path(), "src", b"data");
    for (a, b) in [
        (format!("unix-listen:{}", file.display()), "-".to_string()),
        (
            src.display().to_string(),
            format!("unix:{}", file.display()),
        ),
    ] {
        let mut cmd = crate::util::zerocat();
        cmd.args(["pipe", &a, &b]);
        let out = crate::util::run(cmd);
        let stderr = crate::util::stderr_text(&out);
        assert_eq!(out.status.code(), Some(1), "{a} {b}: {stderr}");
        assert!(stderr.contains(&*file.display().to_string()), "{stderr}");
        assert_eq!(std::fs::read(&file).unwrap(), b"precious", "{a} {b}");
    }
}
/// What zerocat is blocked in, from /proc/PID/syscall (its first field is the number).
fn blocked_in(pid: u32) -> Option<i64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/syscall")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Blocking opens — a FIFO with no reader (as sink) or no writer (as source), a listener
/// with no client — wait like the shell's `>` does (the kernel offers no O_NONBLOCK open
/// for a FIFO's writer without a reader: ENXIO). They must end on SIGINT/SIGTERM: exit 130.
#[test]
fn blocking_opens_end_on_sigint_and_sigterm() {
    if let Err(e) = std::fs::read_to_string("/proc/self/syscall") {
        eprintln!("SKIPPED: /proc/PID/syscall is unreadable here ({e}), cannot see the wait");
        return;
    }
    let dir = tempdir();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let src = crate::util::write_file(dir.path(), "src", b"data");
    let fifo_s = fifo.display().to_string();
    let src_s = src.display().to_string();
    let cases: [(&str, &str, i64); 3] = [
        (&src_s, &fifo_s, nix::libc::SYS_openat),
        (&fifo_s, "-", nix::libc::SYS_openat),
        ("tcp-listen:0", "-", nix::libc::SYS_accept4),
    ];
    for (a, b, syscall) in cases {
        for signal in [Signal::SIGINT, Signal::SIGTERM] {
            let name = format!("pipe {a} {b} {signal}");
            let mut cmd = crate::util::zerocat();
            cmd.args(["pipe", a, b])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let child = cmd.spawn().unwrap();
            let started = Instant::now();
            while blocked_in(child.id()) != Some(syscall) {
                assert!(started.elapsed() < DEADLINE, "{name}: never blocked");
                thread::sleep(Duration::from_millis(2));
            }
            kill(Pid::from_raw(child.id() as i32), signal).unwrap();
            let out = crate::util::wait_with_deadline(child, Duration::from_secs(10));
            let stderr = crate::util::stderr_text(&out);
            assert_eq!(out.status.code(), Some(130), "{name}: {stderr}");
            assert!(stderr.contains("interrupted"), "{name}: {stderr}");
            assert!(out.stdout.is_empty());
            eprintln!("{name} while blocked in open/accept | exit 130");
        }
    }
    assert!(fifo.exists());
}

// =============================================================================================
// Hostile input: the URI parser, property-based
// =============================================================================================

mod uri_properties {
    use std::net::Ipv6Addr;
    use std::path::PathBuf;

    use proptest::prelude::*;
    use zerocat::endpoint::proxy::Version;
    use zerocat::endpoint::{parse, ConnectOpts, Endpoint, FileOpts, ListenOpts, UnixAddr};

    /// If `arg` parses, its display is canonical: it parses back to the same endpoint and
    /// displays the same again.
    fn round_trips(arg: &str) -> Result<(), TestCaseError> {
        if let Ok(endpoint) = parse(arg) {
            let shown = endpoint.to_string();
            let again = parse(&shown);
            prop_assert_eq!(
                again.as_ref(),
                Ok(&endpoint),
                "{:?} displayed as {:?}",
                arg,
                shown
            );
            prop_assert_eq!(again.unwrap().to_string(), shown);
        }
        Ok(())
    }

    /// Scheme words (and near misses) followed by URI-ish text: reaches the option, port,
    /// bracket and length checks far more often than arbitrary strings do.
    fn uri_like() -> impl Strategy<Value = String> {
        let words = prop::sample::select(vec![
            "fd",
            "file",
            "FILE",
            "tcp",
            "Tcp",
            "tcp-listen",
            "tcp-l",
            "unix",
            "unix-listen",
            "unix-l",
            "tpc",
            "x",
            "fd2",
            "a+b.c-d",
        ]);
        (words, "[a-z0-9:\\[\\]@,=./ %-]{0,40}").prop_map(|(w, rest)| format!("{w}:{rest}"))
    }

    fn host() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9][a-z0-9.-]{0,20}",
            any::<[u16; 8]>().prop_map(|s| Ipv6Addr::from(s).to_string()),
            any::<[u8; 4]>().prop_map(|o| std::net::Ipv4Addr::from(o).to_string()),
        ]
    }

    /// A path with no comma (the option separator) and no leading `@` (abstract names).
    fn plain_path() -> impl Strategy<Value = PathBuf> {
        "[^,@\u{0}][^,\u{0}]{0,40}".prop_map(PathBuf::from)
    }

    /// Connector options (`retry=N`, `interval=DUR`) as the relay added them.
    fn connect_opts() -> impl Strategy<Value = ConnectOpts> {
        (0u32..20, proptest::option::of(1u64..100_000)).prop_map(|(retry, ms)| ConnectOpts {
            retry,
            interval: ms.map(std::time::Duration::from_millis),
            proxy: None,
            via: None,
            mptcp: false,
            tls: None,
            ..ConnectOpts::default()
        })
    }

    /// Endpoints built directly, every variant and option: their display must parse back.
    fn endpoint() -> impl Strategy<Value = Endpoint> {
        let mode = proptest::option::of(0u32..=0o7777);
        let backlog = proptest::option::of(1i32..=i32::MAX);
        let unix_addr = prop_oneof![
            "[a-z0-9/._-]{1,100}".prop_map(|p| UnixAddr::Path(p.into())),
            "[a-z0-9 /._@-]{1,100}".prop_map(|n| UnixAddr::Abstract(n.into_bytes())),
        ];
        prop_oneof![
            Just(Endpoint::Stdio),
            (0..=i32::MAX).prop_map(Endpoint::Fd),
            (plain_path(), any::<bool>(), any::<bool>(), mode.clone()).prop_map(
                |(path, append, excl, mode)| Endpoint::File {
                    path,
                    opts: FileOpts { append, excl, mode },
                }
            ),
            "[^\u{0}]{1,30}".prop_map(|p| Endpoint::File {
                path: PathBuf::from(p),
                opts: FileOpts::default(),
            }),
            (
                host(),
                1u16..,
                connect_opts(),
                proptest::option::of(prop_oneof![Just(Version::V1), Just(Version::V2)]),
                any::<bool>()
            )
                .prop_map(|(host, port, connect, proxy, mptcp)| Endpoint::Tcp {
                    host,
                    port,
                    connect: ConnectOpts {
                        proxy,
                        mptcp,
                        ..connect
                    }
                }),
            (
                proptest::option::of(host()),
                any::<u16>(),
                backlog.clone(),
                (
                    any::<bool>(),
                    proptest::option::of(any::<bool>()),
                    any::<bool>(),
                    any::<bool>()
                )
            )
                .prop_map(
                    |(host, port, backlog, (reuseport, ipv6only, proxy, mptcp))| {
                        // ipv6only only where the host may be IPv6.
                        let v4 = host
                            .as_deref()
                            .is_none_or(|h| h.parse::<std::net::Ipv4Addr>().is_ok());
                        Endpoint::TcpListen {
                            host,
                            port,
                            backlog,
                            listen: ListenOpts {
                                reuseport,
                                ipv6only: ipv6only.filter(|_| !v4),
                                proxy,
                                mptcp,
                                tls: None,
                                ..ListenOpts::default()
                            },
                        }
                    }
                ),
            (proptest::option::of("[a-zA-Z0-9_.-]{1,20}"), any::<bool>()).prop_map(
                |(name, proxy)| Endpoint::Systemd {
                    name,
                    proxy,
                    tls: None,
                }
            ),
            (unix_addr.clone(), connect_opts())
                .prop_map(|(addr, connect)| Endpoint::Unix { addr, connect }),
            (unix_addr, mode, backlog).prop_map(|(addr, mode, backlog)| {
                let mode = mode.filter(|_| matches!(addr, UnixAddr::Path(_)));
                Endpoint::UnixListen {
                    addr,
                    mode,
                    backlog,
                }
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn arbitrary_strings_never_panic_and_round_trip(arg in any::<String>()) {
            round_trips(&arg)?;
        }

        #[test]
        fn uri_like_strings_never_panic_and_round_trip(arg in uri_like()) {
            round_trips(&arg)?;
        }

        #[test]
        fn every_endpoint_displays_as_a_uri_that_parses_back(e in endpoint()) {
            // A file path with a comma, or one that looks like a URI, may not be sayable
            // as a bare word; display picks a form that parses back whenever one exists.
            if let Endpoint::File { path, opts } = &e {
                let text = path.to_string_lossy();
                prop_assume!(!(text.contains(',') && (*opts != FileOpts::default()
                    || parse(&text).as_ref() != Ok(&e))));
            }
            let shown = e.to_string();
            prop_assert_eq!(parse(&shown), Ok(e.clone()), "displayed as {:?}", shown);
        }
    }
}
