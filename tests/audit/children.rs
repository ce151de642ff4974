//! What an `exec:`/`sh:` child inherits from zerocat (issue 37 items 2, 3 and 5): only fds
//! 0-2 (an `fd:N` zerocat took is not passed on: a relay's handler holding the listener
//! accepted the other clients), the signal state a shell gives a command (nothing blocked,
//! nothing ignored that zerocat's parent did not ignore), and none of zerocat's secrets
//! (`ZEROCAT_PROXY_AUTH`); nor does any message show a `proxy-auth=` password.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::rig::{Rig, Running};
use crate::util::{data, run, stderr_text, tempdir, write_file, zerocat, DEADLINE};

/// Bit N-1 of /proc's SigIgn/SigBlk for signal N.
fn bit(signal: Signal) -> u64 {
    1 << (signal as u32 - 1)
}

/// A hex mask field of /proc/PID/status (`SigBlk:`, `SigIgn:`).
fn mask(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"));
    u64::from_str_radix(hex.trim(), 16).unwrap()
}

/// The children of every thread of `pid` (a relay's workers spawn from their own thread).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// The `count` children of zerocat that run `program` (after their exec), waited for.
fn await_children(run: &Running, program: &str, count: usize) -> Vec<i32> {
    let started = Instant::now();
    loop {
        let mut found: Vec<i32> = children_of(run.pid().as_raw())
            .into_iter()
            .filter(|c| {
                std::fs::read_to_string(format!("/proc/{c}/comm"))
                    .is_ok_and(|comm| comm.trim() == program)
            })
            .collect();
        if found.len() >= count {
            found.sort();
            return found;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "zerocat never ran {count} × {program}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The child holds fds 0, 1 and 2 only, blocks no signal and ignores none that the test
/// (zerocat's parent, whose SIGPIPE is Rust's own and is reset for zerocat) did not.
fn assert_starts_clean(child: i32, what: &str) {
    // Right after the exec, the dynamic loader may still hold a library open (seen under
    // load: `3 -> …/libc.so.6`); it closes it once mapped. Wait for that, bounded; zerocat
    // itself never holds a shared object as an fd, so nothing it leaks is waited away.
    let started = Instant::now();
    let mut fds = loop {
        let fds: Vec<(i32, String)> = std::fs::read_dir(format!("/proc/{child}/fd"))
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let fd = e.file_name().to_str()?.parse().ok()?;
                let target = std::fs::read_link(e.path()).ok()?;
                Some((fd, target.display().to_string()))
            })
            .collect();
        let loading = fds.iter().any(|(_, t)| t.contains(".so"));
        if !loading || started.elapsed() > DEADLINE {
            break fds.into_iter().map(|(fd, _)| fd).collect::<Vec<i32>>();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    fds.sort();
    // What the test itself was given and zerocat too (the test's runner's own fds, not
    // close-on-exec): zerocat passes on what it did not take, as a shell does.
    let passed_through = open_without_cloexec();
    fds.retain(|fd| !passed_through.contains(fd));
    let described: Vec<String> = fds
        .iter()
        .map(|fd| {
            let target = std::fs::read_link(format!("/proc/{child}/fd/{fd}"));
            format!(
                "{fd} -> {}",
                target.map_or("?".into(), |t| t.display().to_string())
            )
        })
        .collect();
    assert_eq!(fds, [0, 1, 2], "{what}: the child holds {described:?}");
    let blocked = mask(child, "SigBlk:");
    assert_eq!(
        blocked, 0,
        "{what}: the child starts with SigBlk {blocked:x}"
    );
    let ours = std::process::id() as i32;
    let inherited = mask(ours, "SigIgn:") & !bit(Signal::SIGPIPE);
    // The classic signals: 32 and up are glibc's (and ignored by some runners).
    let ignored = mask(child, "SigIgn:") & 0x7fff_ffff;
    assert_eq!(
        ignored & !inherited,
        0,
        "{what}: the child starts with SigIgn {ignored:x} (the test ignores {inherited:x})"
    );
}

/// The test's own fds above 2 that a child of it inherits (not close-on-exec).
fn open_without_cloexec() -> Vec<i32> {
    const O_CLOEXEC: u32 = 0o2000000;
    let Ok(entries) = std::fs::read_dir("/proc/self/fdinfo") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let fd: i32 = e.file_name().to_str()?.parse().ok()?;
            let info = std::fs::read_to_string(e.path()).ok()?;
            let flags = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
            let flags = u32::from_str_radix(flags.trim(), 8).ok()?;
            (fd > 2 && flags & O_CLOEXEC == 0).then_some(fd)
        })
        .collect()
}

/// Connects to a relay's `addr` and keeps the connection open.
fn client(addr: &str) -> TcpStream {
    TcpStream::connect(addr).unwrap()
}

#[test]
fn pipe_and_tee_children_get_only_stdio_and_a_clean_signal_state() {
    let dir = tempdir();
    // More than a grown pipe holds: zerocat is still writing to the child when stopped.
    let size = 8 << 20;
    let input = write_file(dir.path(), "in.bin", &data(size));
    let input = input.to_str().unwrap().to_string();
    // A connected socket as fd:3 (the child must not see it), a file, a TCP source.
    let (ours, theirs) = UnixStream::pair().unwrap();
    let (tcp, _server) = crate::util::tcp_source(data(size));
    let unix = dir.path().join("src.sock");
    let _unix_server = crate::util::unix_source(&unix, data(size));
    let cases: Vec<(&str, Rig)> = vec![
        (
            "pipe fd:3 exec:",
            Rig::new()
                .fd3(theirs.as_raw_fd())
                .args(["pipe", "fd:3", "exec:sleep 30"]),
        ),
        (
            "pipe FILE exec:",
            Rig::new().args(["pipe", &input, "exec:sleep 30"]),
        ),
        (
            "pipe tcp: exec:",
            Rig::new().args(["pipe", &format!("tcp:{tcp}"), "exec:sleep 30"]),
        ),
        (
            "pipe unix: exec:",
            Rig::new().args(["pipe", &format!("unix:{}", unix.display()), "exec:sleep 30"]),
        ),
        (
            "pipe exec: FILE",
            Rig::new().args([
                "pipe",
                "exec:sleep 30",
                dir.path().join("o").to_str().unwrap(),
            ]),
        ),
        (
            "tee FILE FILE exec:",
            Rig::new().args([
                "tee",
                &input,
                dir.path().join("t").to_str().unwrap(),
                "exec:sleep 30",
            ]),
        ),
    ];
    let mut feeder = ours.try_clone().unwrap();
    std::thread::spawn(move || {
        let _ = feeder.write_all(&data(size));
    });
    for (what, rig) in cases {
        let running = rig.start();
        let child = await_children(&running, "sleep", 1)[0];
        assert_starts_clean(child, what);
        running.signal(Signal::SIGTERM);
        let finished = running.finish();
        assert_eq!(finished.code(), Some(130), "{what}: {}", finished.stderr);
    }
    drop(ours);
}

#[test]
fn relay_children_get_only_stdio_and_a_clean_signal_state_under_any_workers() {
    for workers in ["1", "3"] {
        let running = Rig::new().relay(&[
            "--workers",
            workers,
            "tcp-listen:127.0.0.1:0",
            "exec:sleep 30",
        ]);
        // Two connections open at once: neither child holds the other's socket.
        let _a = client(running.addr());
        await_children(&running, "sleep", 1);
        let _b = client(running.addr());
        for child in await_children(&running, "sleep", 2) {
            assert_starts_clean(child, &format!("relay --workers {workers} tcp-listen:"));
        }
        let finished = running.stop();
        let connections = crate::rig::connections(finished.report());
        assert_eq!(connections.len(), 2, "{}", finished.stderr);
        for conn in connections {
            // Stopped by the SIGTERM they no longer block, not SIGKILL after the grace.
            assert_eq!(conn["child"]["b"]["signal"], "SIGTERM", "{conn}");
        }
    }
}

#[test]
fn an_inherited_listener_is_not_a_relay_childs_to_accept_on() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let running = Rig::new()
        .fd3(listener.as_raw_fd())
        .args(["relay", "fd:3", "exec:sleep 30"])
        .start();
    let _a = client(&addr);
    let child = await_children(&running, "sleep", 1)[0];
    assert_starts_clean(child, "relay fd:3 (a listening socket) exec:");
    drop(listener);
    running.stop();
}

#[test]
fn at_a_relays_stop_its_child_dies_by_sigterm_and_takes_its_background_job_along() {
    let dir = tempdir();
    let pidfile = dir.path().join("grandchild.pid");
    let script = format!(
        "sh:sleep 30 & echo $! > {}; exec sleep 31",
        pidfile.display()
    );
    // The connection is cut after the grace, its child then gets SIGTERM, and SIGKILL
    // after the grace again: only one that sleeps through SIGTERM dies by SIGKILL.
    let running = Rig::new().relay(&["--grace", "2s", "tcp-listen:127.0.0.1:0", &script]);
    let _conn = client(running.addr());
    let grandchild = wait_for_pid(&pidfile);
    let finished = running.stop();
    let report = finished.report();
    let conn = &crate::rig::connections(report)[0];
    assert_eq!(
        conn["child"]["b"]["signal"], "SIGTERM",
        "the child was killed otherwise: {report}"
    );
    let gone = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{grandchild}")).exists() && !is_zombie(grandchild) {
        assert!(
            Instant::now() < gone,
            "the child's background job ({grandchild}) outlived the relay"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_for_pid(path: &Path) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(started.elapsed() < DEADLINE, "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_or(true, |s| s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
}

#[test]
fn a_child_past_its_file_size_limit_dies_by_sigxfsz_as_under_sh() {
    let dir = tempdir();
    let input = write_file(dir.path(), "in.bin", &data(64 << 10));
    let out = dir.path().join("out.bin");
    // dash counts ulimit -f in 512-byte blocks: 8 KiB at most.
    let sink = format!("sh:ulimit -f 16; exec cat > {}", out.display());
    let finished = Rig::new()
        .args(["pipe", input.to_str().unwrap(), &sink])
        .run();
    assert_eq!(finished.code(), Some(1), "{}", finished.stderr);
    assert!(
        finished.stderr.contains("killed by SIGXFSZ"),
        "the child did not die of SIGXFSZ: {}",
        finished.stderr
    );
}

const PASSWORD: &str = "s3cr3tpw";

#[test]
fn the_proxy_password_is_not_in_a_childs_environment() {
    let dir = tempdir();
    let out = dir.path().join("env.txt");
    let mut cmd = zerocat();
    cmd.env("ZEROCAT_PROXY_AUTH", format!("user:{PASSWORD}"))
        .env("KEPT", "yes")
        .args(["pipe", "exec:env"])
        .arg(&out);
    let piped = run(cmd);
    assert!(piped.status.success(), "{}", stderr_text(&piped));
    let env = std::fs::read_to_string(&out).unwrap();
    assert!(env.contains("KEPT=yes"), "{env}");
    assert!(
        !env.contains("ZEROCAT_PROXY_AUTH") && !env.contains(PASSWORD),
        "{env}"
    );

    // A relay's client reads its handler's environment.
    let mut relay = zerocat();
    relay
        .env("ZEROCAT_PROXY_AUTH", format!("user:{PASSWORD}"))
        .args(["relay", "--once", "tcp-listen:127.0.0.1:0", "exec:env"])
        .stderr(std::process::Stdio::piped());
    let mut child = relay.spawn().unwrap();
    let (addr, stderr) = crate::util::listening_addr(&mut child);
    let mut conn = client(&addr);
    conn.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = String::new();
    conn.read_to_string(&mut got).unwrap();
    let status = crate::util::wait_with_deadline(child, DEADLINE).status;
    let _ = stderr.join();
    assert!(status.success());
    assert!(got.contains("PATH="), "{got}");
    assert!(
        !got.contains("ZEROCAT_PROXY_AUTH") && !got.contains(PASSWORD),
        "{got}"
    );
}

/// The AWS keys an s3:// end signs with are not a child's either (issue 39).
#[test]
fn the_aws_keys_are_not_in_a_childs_environment() {
    let dir = tempdir();
    let out = dir.path().join("env.txt");
    let mut cmd = zerocat();
    cmd.env("AWS_ACCESS_KEY_ID", "AKIAKEYID")
        .env("AWS_SECRET_ACCESS_KEY", PASSWORD)
        .env("AWS_SESSION_TOKEN", "t0k3n")
        .env("AWS_REGION", "eu-west-1")
        .args(["pipe", "exec:env"])
        .arg(&out);
    let piped = run(cmd);
    assert!(piped.status.success(), "{}", stderr_text(&piped));
    let env = std::fs::read_to_string(&out).unwrap();
    assert!(env.contains("AWS_REGION=eu-west-1"), "{env}");
    for secret in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        PASSWORD,
        "t0k3n",
    ] {
        assert!(!env.contains(secret), "{secret} in {env}");
    }
}

/// zerocat run with `argv`, and all it printed (stdout, then stderr).
fn run_showing(argv: &[&str]) -> (std::process::Output, String) {
    let mut cmd = zerocat();
    cmd.args(argv);
    let out = run(cmd);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        stderr_text(&out)
    );
    (out, text)
}

#[test]
fn no_usage_error_shows_a_proxy_auth_password() {
    let proxy = "tcp:127.0.0.1:9,socks5=127.0.0.1:1";
    let bad = [
        format!("{proxy},proxy-auth=user:{PASSWORD},x{PASSWORD}"),
        format!("{proxy},proxy-auth=user{PASSWORD}"),
        format!("{proxy},proxy-auth=user:{PASSWORD},proxy-auth=u:{PASSWORD}"),
        format!("{proxy},proxy-auth=user:{PASSWORD},bogus"),
        format!("{proxy},proxy-auth=user:{PASSWORD},tls"),
        format!("tcp:127.0.0.1:9,proxy-auth=user:{PASSWORD}"),
    ];
    for arg in &bad {
        for argv in [
            vec!["pipe", "/dev/null", arg],
            vec!["pipe", arg, "/dev/null"],
            vec!["tee", "/dev/null", arg],
            vec!["relay", "tcp-listen:127.0.0.1:0", arg],
            vec!["copy", arg, "/dev/null"],
        ] {
            let (out, text) = run_showing(&argv);
            assert_eq!(out.status.code(), Some(2), "{argv:?}: {text}");
            assert!(text.contains("proxy-auth"), "{argv:?}: {text}");
            assert!(
                !text.contains(PASSWORD),
                "{argv:?} shows the password: {text}"
            );
        }
    }
}

#[test]
fn no_plan_report_or_failure_shows_a_proxy_auth_password() {
    // `\,` is a comma of the password: the endpoint parses, the connection fails.
    let arg = format!(r"tcp:127.0.0.1:9,socks5=127.0.0.1:1,proxy-auth=user:{PASSWORD}\,x");
    for argv in [
        vec!["--explain", "pipe", "/dev/null", &arg],
        vec!["-v", "pipe", "/dev/null", &arg],
        vec!["--stats", "json", "pipe", "/dev/null", &arg],
        vec!["-v", "--stats", "json", "relay", "--once", "-", &arg],
    ] {
        let (_, text) = run_showing(&argv);
        assert!(text.contains("socks5"), "{argv:?}: {text}");
        assert!(
            !text.contains(PASSWORD),
            "{argv:?} shows the password: {text}"
        );
    }
}

#[test]
fn a_stop_while_pipe_waits_for_its_child_reaches_the_child() {
    // The transfer is over (the child's stdin took every byte), zerocat waits for the
    // child: SIGTERM then must not wait out its 30 s.
    let dir = tempdir();
    let input = write_file(dir.path(), "in.bin", &data(1000));
    let running = Rig::new()
        .args(["pipe", input.to_str().unwrap(), "exec:sleep 30"])
        .start();
    await_children(&running, "sleep", 1);
    // The bytes are in the child's pipe before the signal: the transfer ended.
    std::thread::sleep(Duration::from_millis(200));
    running.signal(Signal::SIGTERM);
    let finished = running.finish();
    let report = finished.report();
    assert_eq!(report["dst"]["child"]["signal"], "SIGTERM", "{report}");
    assert_eq!(report["bytes"], 1000, "{report}");
}
