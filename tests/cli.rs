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
    // Root reads through mode 000: as root, run zerocat as nobody, as a user would.
    let nobody = match nix::unistd::geteuid().is_root() {
        true => match crate::util::AsNobody::new() {
            Some(nobody) => Some(nobody),
            None => return,
        },
        false => None,
    };
    let dir = tempdir();
    let dir = nobody.as_ref().map_or(dir.path(), |nobody| nobody.path());
    let f = write_file(dir, "secret", b"x");
    std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let mut cmd = nobody
        .as_ref()
        .map_or_else(zerocat, |nobody| nobody.zerocat());
    cmd.arg("pipe").arg(&f).arg("-");
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

/// Issue 29 item 7: what socat and nc users type gets a hint, not a file of that name, a
/// resolver lookup of `//host`, or a bare "not an option".
#[test]
fn socat_and_nc_habits_get_hints_not_files_or_lookups() {
    let dir = crate::util::tempdir();
    for (arg, says) in [
        (
            "tcp://127.0.0.1:9",
            "'tcp://' is URL style; write tcp:127.0.0.1:9",
        ),
        ("udp://127.0.0.1:9", "'udp://' is URL style"),
        ("tcp:9000", "missing HOST: '9000' is only a port"),
        (
            "tcp-listen:0,fork",
            "option 'fork' is not needed: relay serves every connection",
        ),
        ("STDIO", "socat's STDIO is '-' here"),
        ("STDOUT", "socat's STDOUT is '-' here"),
    ] {
        let out = zerocat()
            .current_dir(dir.path())
            .args(["pipe", "/dev/null", arg])
            .output()
            .unwrap();
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{arg}: {err}");
        assert!(err.contains(says), "{arg}: {err}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file was created"
    );
    // socat's `reuseaddr` is accepted as what zerocat's listeners always do.
    let out = zerocat()
        .args(["--explain", "pipe", "tcp-listen:0,reuseaddr", "/dev/null"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    // A lower-case `stdout` is a file name like any other.
    let out = zerocat()
        .current_dir(dir.path())
        .args(["pipe", "/dev/null", "stdout"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert!(dir.path().join("stdout").is_file());
}

/// Issue 42 item 5: netcat's command lines typed at zerocat (`zerocat -l 9000`, `zerocat
/// HOST PORT`) got clap's generic "unexpected argument" / "unrecognized subcommand": they
/// get the zerocat spelling of the same thing, as a usage error that opens nothing.
#[test]
fn netcat_command_lines_get_the_zerocat_spelling() {
    let dir = crate::util::tempdir();
    for (args, says) in [
        (&["-l", "9000"][..], "zerocat pipe tcp-listen:9000 -"),
        (&["-l", "9000"], "zerocat relay tcp-listen:9000 -"),
        (&["-lp", "9000"], "zerocat pipe tcp-listen:9000 -"),
        (&["-l", "-p", "9000"], "zerocat pipe tcp-listen:9000 -"),
        (&["-l", "0.0.0.0", "9000"], "tcp-listen:0.0.0.0:9000"),
        (&["-u", "-l", "5000"], "zerocat pipe udp-listen:5000 -"),
        (&["localhost", "9000"], "zerocat relay - tcp:localhost:9000"),
        (
            &["-v", "example.com", "80"],
            "zerocat relay - tcp:example.com:80",
        ),
        (
            &["-u", "127.0.0.1", "5000"],
            "zerocat pipe - udp:127.0.0.1:5000",
        ),
        (&["-l"], "zerocat pipe tcp-listen:PORT -"),
    ] {
        let out = zerocat()
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap();
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("listening on"), "{args:?} listened: {err}");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // What is not a netcat line keeps clap's own error.
    let out = zerocat().arg("bogus").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_text(&out).contains("unrecognized subcommand 'bogus'"));
}

/// Issue 29 item 8: the short flags cp, tee and pv users type: `copy -R`, `-a`, `-u`,
/// `-t DIR`, `tee -a`, `-L RATE` (each was "unexpected argument", exit 2).
#[test]
fn short_flags_people_type_from_cp_tee_and_pv() {
    use std::os::unix::fs::MetadataExt;
    let dir = crate::util::tempdir();
    let d = dir.path();
    let want = data(5000);
    std::fs::create_dir_all(d.join("src/sub")).unwrap();
    let f = write_file(&d.join("src/sub"), "f", &want);
    let ok = |args: &[&str]| {
        let out = zerocat().current_dir(d).args(args).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr_text(&out)
        );
        out
    };
    ok(&["copy", "-R", "src", "r"]);
    assert_bytes_eq(&std::fs::read(d.join("r/sub/f")).unwrap(), &want, "-R");
    // -a: a tree, with times kept (-r and --preserve).
    let old = nix::sys::time::TimeSpec::new(1_000_000_000, 0);
    nix::sys::stat::utimensat(
        None,
        &f,
        &old,
        &old,
        nix::sys::stat::UtimensatFlags::FollowSymlink,
    )
    .unwrap();
    ok(&["copy", "-a", "src", "a"]);
    let copied = std::fs::metadata(d.join("a/sub/f")).unwrap();
    assert_eq!(copied.mtime(), 1_000_000_000, "-a keeps the time");
    assert_bytes_eq(&std::fs::read(d.join("a/sub/f")).unwrap(), &want, "-a");
    // -u: a newer destination is kept.
    std::fs::write(d.join("newer"), b"keep").unwrap();
    ok(&["copy", "-u", "src/sub/f", "newer"]);
    assert_eq!(std::fs::read(d.join("newer")).unwrap(), b"keep");
    // -t DIR SRC...
    std::fs::create_dir(d.join("t")).unwrap();
    write_file(d, "g", b"g");
    ok(&["copy", "-t", "t", "src/sub/f", "g"]);
    assert_bytes_eq(&std::fs::read(d.join("t/f")).unwrap(), &want, "-t");
    assert_eq!(std::fs::read(d.join("t/g")).unwrap(), b"g");
    // tee -a appends; -L paces (its plan says so).
    std::fs::write(d.join("log"), b"before\n").unwrap();
    ok(&["tee", "-a", "src/sub/f", "log"]);
    let mut expect = b"before\n".to_vec();
    expect.extend_from_slice(&want);
    assert_bytes_eq(&std::fs::read(d.join("log")).unwrap(), &expect, "tee -a");
    let out = ok(&["-v", "-L", "1M", "pipe", "src/sub/f", "paced"]);
    assert!(
        stderr_text(&out).contains("1.00 MiB/s"),
        "{}",
        stderr_text(&out)
    );
    assert_bytes_eq(&std::fs::read(d.join("paced")).unwrap(), &want, "-L");
}

/// Issue 29 item 9: messages name the errno ("(ENOENT)", not "(os error 2)"), and a copy
/// where the filesystem has no reflink (the ordinary ext4 or tmpfs case) says so in words
/// rather than as "reflink -> copy_file_range (EOPNOTSUPP)".
#[test]
fn errors_name_the_errno_and_a_copy_without_reflink_reads_as_ordinary() {
    let dir = crate::util::tempdir();
    let missing = dir.path().join("missing");
    let out = zerocat()
        .arg("pipe")
        .arg(&missing)
        .arg("/dev/null")
        .output()
        .unwrap();
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("No such file or directory (ENOENT)"), "{err}");
    assert!(!err.contains("os error"), "{err}");
    let out = zerocat()
        .args(["--stats", "json", "pipe", "-", "tcp:127.0.0.1:1"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        stderr_text(&out).contains("(ECONNREFUSED)"),
        "{}",
        stderr_text(&out)
    );

    let want = data(100_000);
    let src = write_file(dir.path(), "a", &want);
    let out = zerocat()
        .arg("copy")
        .arg(&src)
        .arg(dir.path().join("b"))
        .output()
        .unwrap();
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_bytes_eq(&std::fs::read(dir.path().join("b")).unwrap(), &want, "copy");
    assert!(
        err.contains("via reflink") || err.contains("(reflink unsupported here)"),
        "{err}"
    );
    assert!(
        !err.contains("EOPNOTSUPP") && !err.contains("reflink ->"),
        "{err}"
    );
}

/// Issue 29 item 5 (and issue 26 item 14): `--stats json` is one JSON object, the last
/// thing on stderr — also for a run that failed before any byte moved, and for a copy
/// with several failed entries; `-q` does not silence it; `--stats-fd N` sends it to N.
#[test]
fn stats_json_is_one_object_last_on_stderr_whatever_happened() {
    let dir = crate::util::tempdir();
    let last_json = |err: &str| -> serde_json::Value {
        let last = err.lines().last().unwrap_or_default();
        serde_json::from_str(last).unwrap_or_else(|e| panic!("last line not JSON ({e}): {err}"))
    };
    // A failure before any byte moved.
    let out = zerocat()
        .args(["--stats", "json", "pipe"])
        .arg(dir.path().join("missing"))
        .arg("/dev/null")
        .output()
        .unwrap();
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let report = last_json(&err);
    assert_eq!(report["command"], "pipe");
    assert_eq!(report["ended"], "error");
    assert!(
        report["error"].as_str().unwrap().contains("(ENOENT)"),
        "{err}"
    );
    // A copy with two failed entries: the JSON after both messages.
    std::fs::create_dir(dir.path().join("into")).unwrap();
    let out = zerocat()
        .args(["--stats", "json", "copy"])
        .arg(dir.path().join("m1"))
        .arg(dir.path().join("m2"))
        .arg(dir.path().join("into"))
        .output()
        .unwrap();
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(last_json(&err)["failed"], 2, "{err}");
    // -q keeps an explicit --stats json, and nothing else.
    let want = data(10_000);
    let src = write_file(dir.path(), "src", &want);
    let out = zerocat()
        .args(["-q", "--stats", "json", "pipe"])
        .arg(&src)
        .arg(dir.path().join("dst"))
        .output()
        .unwrap();
    let err = stderr_text(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(last_json(&err)["bytes"], want.len());
    assert_bytes_eq(
        &std::fs::read(dir.path().join("dst")).unwrap(),
        &want,
        "-q pipe",
    );
    // --stats-fd 3: the object there, not on stderr.
    let stats = std::fs::File::create(dir.path().join("stats")).unwrap();
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "--stats-fd", "3", "pipe"])
        .arg(&src)
        .arg(dir.path().join("dst2"));
    crate::rig::share_as_fd3(&mut cmd, std::os::fd::AsRawFd::as_raw_fd(&stats));
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert!(!stderr_text(&out).contains('{'), "{}", stderr_text(&out));
    let written = std::fs::read_to_string(dir.path().join("stats")).unwrap();
    assert_eq!(last_json(&written)["bytes"], want.len(), "{written}");
}

/// `-j 100000` and `--workers 100000` aborted (SIGABRT when thread spawning failed; the relay
/// hung after the panic): a usage error above 256, named in --help (issue 26 item 11).
#[test]
fn thread_counts_past_the_maximum_are_usage_errors() {
    let dir = tempdir();
    let src = dir.path().join("tree");
    std::fs::create_dir(&src).unwrap();
    write_file(&src, "f", b"x");
    for args in [
        vec!["copy", "-r", "-j", "100000"],
        vec![
            "relay",
            "--workers",
            "100000",
            "tcp-listen:0",
            "tcp:127.0.0.1:9",
        ],
    ] {
        let mut cmd = zerocat();
        cmd.args(&args);
        if args[0] == "copy" {
            cmd.arg(&src).arg(dir.path().join("out"));
        }
        let out = run(cmd);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr_text(&out)
        );
        assert!(
            stderr_text(&out).contains("at most 256"),
            "{}",
            stderr_text(&out)
        );
        assert!(
            !stderr_text(&out).contains("listening"),
            "{}",
            stderr_text(&out)
        );
    }
}

/// Issue 42 item 1: `--version`, `-V` and `version` print the crate's version, one line.
#[test]
fn version_is_the_crates_version_on_one_line() {
    for args in [&["--version"][..], &["-V"], &["version"]] {
        let out = zerocat().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("zerocat {}\n", env!("CARGO_PKG_VERSION")),
            "{args:?}"
        );
    }
}

/// Issue 42 item 1: `version --verbose` (or `-V -v`) adds the commit, the kernel and what
/// the kernel offers, a well-formed `name: value` line each, so a bug report says what ran.
#[test]
fn verbose_version_names_the_commit_the_kernel_and_what_it_offers() {
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let offers = [
        "copy_file_range across filesystems",
        "kTLS (tls ULP)",
        "MPTCP",
        "UDP GSO",
        "io_uring",
    ];
    for args in [
        &["version", "--verbose"][..],
        &["version", "-v"],
        &["-V", "-v"],
        &["-v", "--version"],
    ] {
        let out = zerocat().args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {text}");
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(format!("zerocat {}", env!("CARGO_PKG_VERSION")).as_str())
        );
        let fields: Vec<(&str, &str)> = lines
            .map(|l| {
                l.split_once(": ")
                    .unwrap_or_else(|| panic!("{args:?}: {l:?}"))
            })
            .collect();
        let names: Vec<&str> = fields.iter().map(|(n, _)| *n).collect();
        let mut expected = vec!["commit", "kernel"];
        expected.extend(offers);
        assert_eq!(names, expected, "{args:?}: {text}");
        let commit = fields[0].1;
        assert!(
            commit == "unknown"
                || (commit.len() >= 7 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
            "{text}"
        );
        if let Some(head) = &head {
            assert_eq!(commit, head, "built from a checkout: its commit");
        }
        assert!(fields[1].1.starts_with("Linux "), "{text}");
        for (name, value) in &fields[2..] {
            let why = |word: &str| {
                value
                    .strip_prefix(word)
                    .is_some_and(|rest| rest.starts_with(" (") && rest.ends_with(')'))
            };
            assert!(
                *value == "yes" || why("no") || why("unknown"),
                "{name}: {value:?}"
            );
        }
    }
}
