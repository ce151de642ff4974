//! Command line and endpoint options: mode=, options that do not fit a source, exact --limit/--size, single-valued options given twice.

use crate::util::*;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Duration;

fn mode_of(path: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// zerocat run by `sh -c 'umask 077; exec zerocat ARGS'`.
fn zerocat_under_umask_077(args: &[&str]) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("umask 077; exec \"$@\"")
        .arg("sh")
        .arg(bin())
        .args(args);
    cmd
}

#[test]
fn file_mode_is_exact_for_a_created_file_and_leaves_an_existing_files_mode_alone() {
    let dir = tempdir();
    let payload = data(10_000);
    let src = write_file(dir.path(), "src", &payload);
    let created = dir.path().join("created");
    let out = run(zerocat_under_umask_077(&[
        "--stats",
        "json",
        "pipe",
        src.to_str().unwrap(),
        &format!("file:{},mode=0644", created.display()),
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(json_report(&out.stderr)["bytes"], 10_000);
    assert_bytes_eq(&std::fs::read(&created).unwrap(), &payload, "created file");
    assert_eq!(mode_of(&created), 0o644, "mode= under umask 077");

    // An existing file keeps its mode (as cp and `>` do): mode= applies to a file zerocat creates.
    let existing = write_file(dir.path(), "existing", b"old contents, longer than nothing");
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = run(zerocat_under_umask_077(&[
        "pipe",
        src.to_str().unwrap(),
        &format!("file:{},mode=0644", existing.display()),
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_bytes_eq(
        &std::fs::read(&existing).unwrap(),
        &payload,
        "existing file",
    );
    assert_eq!(
        mode_of(&existing),
        0o600,
        "an existing file's mode is left alone"
    );
}

#[test]
fn unix_listen_mode_is_exact_under_umask_077_and_never_chmods_by_path() {
    let dir = tempdir();
    let sock = dir.path().join("s.sock");
    let out_path = dir.path().join("out");
    let trace = dir.path().join("trace");
    let have_strace = !strace_missing();
    let endpoint = format!("unix-listen:{},mode=0666", sock.display());
    let mut args: Vec<OsString> = Vec::new();
    if have_strace {
        args.extend(strace_of("chmod,fchmodat", &trace));
    } else {
        eprintln!("strace is not installed: not checking that no chmod by path happens");
    }
    args.push(bin().into());
    args.extend(["pipe".into(), endpoint.into(), out_path.clone().into()]);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("umask 077; exec \"$@\"")
        .arg("sh")
        .args(&args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (_addr, rest) = listening_addr(&mut child);
    assert_eq!(mode_of(&sock), 0o666, "socket file mode under umask 077");
    let payload = data(50_000);
    {
        // zerocat listens: the test is the client.
        let mut client = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        std::io::Write::write_all(&mut client, &payload).unwrap();
    }
    let out = wait_with_deadline(child, Duration::from_secs(5));
    let stderr = String::from_utf8_lossy(&rest.join().unwrap()).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("unix -> file") || stderr.contains("->"),
        "{stderr}"
    );
    assert_bytes_eq(
        &std::fs::read(&out_path).unwrap(),
        &payload,
        "relayed bytes",
    );
    if have_strace {
        let calls = std::fs::read_to_string(&trace).unwrap();
        let sock_name = sock.display().to_string();
        assert!(
            !calls.lines().any(|l| l.contains(&sock_name)),
            "zerocat chmods the socket by path:\n{calls}"
        );
    }
}

fn usage_error(args: &[&str], names: &[&str]) {
    let out = run({
        let mut cmd = zerocat();
        cmd.args(args);
        cmd
    });
    let stderr = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    for name in names {
        assert!(stderr.contains(name), "{args:?}: '{name}' not in: {stderr}");
    }
}

#[test]
fn huge_durations_are_usage_errors_naming_the_option_and_the_maximum() {
    usage_error(
        &[
            "relay",
            "--idle-timeout",
            "5000000000000000h",
            "tcp-listen:0",
            "tcp:127.0.0.1:1",
        ],
        &["--idle-timeout", "at most"],
    );
    usage_error(
        &[
            "relay",
            "--connect-timeout",
            "5000000000000000h",
            "tcp-listen:0",
            "tcp:127.0.0.1:1",
        ],
        &["--connect-timeout", "at most"],
    );
    usage_error(
        &[
            "relay",
            "tcp-listen:0",
            "tcp:127.0.0.1:1,retry=1,interval=5000000000000000h",
        ],
        &["interval", "at most"],
    );
    usage_error(
        &[
            "relay",
            "--idle-timeout",
            "0",
            "tcp-listen:0",
            "tcp:127.0.0.1:1",
        ],
        &["--idle-timeout", "above 0"],
    );
}

#[test]
fn a_normal_idle_timeout_still_ends_an_idle_connection() {
    // A sink that keeps the connection open and idle; the relay's timeout ends it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let sink_addr = listener.local_addr().unwrap().to_string();
    let sink = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        let _ = std::io::Read::read_to_end(&mut conn, &mut got); // EOF or reset, either ends it
        got
    });
    let mut child = zerocat()
        .args([
            "--stats",
            "json",
            "relay",
            "--once",
            "--idle-timeout",
            "300ms",
        ])
        .args(["--connect-timeout", "2s", "tcp-listen:0"])
        .arg(format!("tcp:{sink_addr},retry=1,interval=100ms"))
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (addr, rest) = listening_addr(&mut child);
    let mut client = std::net::TcpStream::connect(&addr).unwrap();
    std::io::Write::write_all(&mut client, b"hello").unwrap();
    let out = wait_with_deadline(child, Duration::from_secs(5));
    let stderr = rest.join().unwrap();
    drop(client);
    assert_eq!(sink.join().unwrap(), b"hello");
    let report = json_report(&stderr);
    assert!(
        report.to_string().contains("idle"),
        "exit {:?}, report: {report}",
        out.status.code()
    );
}

#[test]
fn options_that_do_not_apply_to_a_source_are_usage_errors_before_any_open() {
    let dir = tempdir();
    let missing = dir.path().join("missing");
    let out = dir.path().join("out");
    let (m, o) = (missing.display().to_string(), out.display().to_string());
    for option in ["excl", "mode=0600", "append"] {
        let name = option.split('=').next().unwrap();
        let src = format!("file:{m},{option}");
        usage_error(&["pipe", &src, &o], &[name, &src]);
        usage_error(&["tee", &src, &o], &[name, &src]);
        usage_error(&["copy", &src, &o], &[name, &src]);
        assert!(!out.exists(), "no sink was opened for {src}");
    }
    // On a sink they stay fine.
    let src = write_file(dir.path(), "src", b"abc");
    let r = run({
        let mut cmd = zerocat();
        cmd.args([
            "-q",
            "pipe",
            src.to_str().unwrap(),
            &format!("file:{o},excl,mode=0600"),
        ]);
        cmd
    });
    assert_eq!(r.status.code(), Some(0), "{}", stderr_text(&r));
    assert_eq!(std::fs::read(&out).unwrap(), b"abc");
}

#[test]
fn single_valued_options_given_twice_take_the_last() {
    let dir = tempdir();
    let payload = data(100_000);
    let src = write_file(dir.path(), "src", &payload);
    let dst = dir.path().join("dst");
    let out = run({
        let mut cmd = zerocat();
        cmd.args([
            "--stats",
            "text",
            "--stats",
            "json",
            "--via",
            "splice",
            "--via",
            "userspace",
        ])
        .args(["pipe", src.to_str().unwrap(), dst.to_str().unwrap()]);
        cmd
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let report = json_report(&out.stderr);
    assert_eq!(report["bytes"], 100_000);
    assert_eq!(final_path(&report), "userspace");
    assert_bytes_eq(&std::fs::read(&dst).unwrap(), &payload, "dst");
}
