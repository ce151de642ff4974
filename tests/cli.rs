//! The command line: usage errors (exit 2, before any fd is opened) and runtime errors
//! (exit 1) with messages that name the endpoint.

use std::net::TcpListener;

use crate::util::*;

/// Runs `zerocat pipe ARGS…` in a fresh dir and returns (exit code, stderr).
fn pipe(args: &[&str]) -> (Option<i32>, String, tempfile::TempDir) {
    let dir = tempdir();
    let mut cmd = zerocat();
    cmd.current_dir(dir.path()).arg("pipe").args(args);
    let out = run(cmd);
    (out.status.code(), stderr_text(&out), dir)
}

#[test]
fn malformed_uris_are_usage_errors_that_create_nothing() {
    let long_path = format!("unix:/tmp/{}", "x".repeat(110));
    let cases: &[(&str, &str)] = &[
        ("tcp:", "tcp:HOST:PORT"),
        ("tcp:host", "tcp:HOST:PORT"),
        ("tcp::80", "tcp:HOST:PORT"),
        ("tcp:h:99999", "port"),
        ("tcp:h:0", "port"),
        ("unix:", "unix:"),
        ("bogus:x", "unknown scheme"),
        ("tpc:host:80", "tcp"),
        ("file:x,backlog=3", "backlog"),
        ("tcp:h:1,append", "append"),
        ("fd:x", "fd:"),
        ("tcp-listen:70000", "port"),
        (&long_path, "108"),
    ];
    for (arg, hint) in cases {
        let (code, err, dir) = pipe(&["-", arg]);
        assert_eq!(code, Some(2), "{arg}: {err}");
        assert!(
            err.contains(arg) || err.contains(&arg[..arg.len().min(20)]),
            "{arg}: message names it: {err}"
        );
        assert!(
            err.to_lowercase().contains(&hint.to_lowercase()),
            "{arg}: expected hint {hint:?}: {err}"
        );
        assert!(err.contains("[DST]"), "{arg}: names the position: {err}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{arg}: no file created"
        );
    }
}

#[test]
fn runtime_errors_name_the_endpoint() {
    let (code, err, _d) = pipe(&["missing.bin", "-"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("missing.bin") && err.contains("No such file"),
        "{err}"
    );

    let (code, err, _d) = pipe(&["/", "-"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("directory"), "{err}");

    let dir = tempdir();
    let f = write_file(dir.path(), "f", b"x");
    let (code, err, _d) = pipe(&[f.to_str().unwrap(), dir.path().to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("directory"), "{err}");

    // A port nobody listens on: bind one, note it, close it.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, err, _d) = pipe(&[&format!("tcp:127.0.0.1:{port}"), "-"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.contains("refused"),
        "{err}"
    );
}

#[test]
fn permission_denied_names_the_file() {
    use std::os::unix::process::CommandExt;
    let dir = tempdir();
    let f = write_file(dir.path(), "secret", b"x");
    std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let mut cmd = zerocat();
    cmd.arg("pipe").arg(&f).arg("-");
    if nix::unistd::geteuid().is_root() {
        // root reads through mode 000: run as nobody, as a user would.
        // SAFETY: setgid/setuid are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setgid(nix::unistd::Gid::from_raw(65534))?;
                nix::unistd::setuid(nix::unistd::Uid::from_raw(65534))?;
                Ok(())
            });
        }
    }
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("secret") && err.contains("Permission denied"),
        "{err}"
    );
}

#[test]
fn unknown_via_is_a_usage_error() {
    let (code, err, _d) = pipe(&["--via", "carrier-pigeon", "-", "-"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("carrier-pigeon") && err.contains("userspace"),
        "{err}"
    );
}
