//! `exec:`/`sh:` endpoints: a child's stdout as a source, its stdin as a sink, over real pipes.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::util::{
    assert_bytes_eq, data, json_report, run, stderr_text, tempdir, wait_with_deadline, write_file,
    zerocat,
};

#[test]
fn exec_source_round_trip_splices_and_waits_for_the_child() {
    let dir = tempdir();
    let payload = data(3 << 20);
    let input = write_file(dir.path(), "in.bin", &payload);
    let output = dir.path().join("out.bin");
    let marker = dir.path().join("child-done");
    // The child closes its stdout, then lives on a little: zerocat must still wait for it.
    let command = format!(
        "sh:cat {}; exec >&-; sleep 0.3; touch {}",
        input.display(),
        marker.display()
    );
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "pipe", &command]).arg(&output);
    let out = run(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(marker.exists(), "zerocat exited before its child");
    assert_bytes_eq(&std::fs::read(&output).unwrap(), &payload, "exec source");
    let report = json_report(&out.stderr);
    assert_eq!(report["src"]["kind"], "pipe", "{report}");
    assert_eq!(crate::util::final_path(&report), "splice", "{report}");
}

#[test]
fn exec_sink_gets_every_byte_on_its_stdin() {
    let dir = tempdir();
    let payload = data(2 << 20);
    let input = write_file(dir.path(), "in.bin", &payload);
    let output = dir.path().join("out.bin");
    let mut cmd = zerocat();
    cmd.args(["-v", "pipe"]).arg(&input).arg(format!(
        "exec:dd 'of={}' bs=64k status=none",
        output.display()
    ));
    let out = run(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("via splice"),
        "{}",
        stderr_text(&out)
    );
    assert_bytes_eq(&std::fs::read(&output).unwrap(), &payload, "exec sink");
}

#[test]
fn a_failing_child_fails_the_run_with_its_status() {
    for (command, words) in [
        ("sh:echo hi; exit 3", "exited with status 3"),
        ("sh:echo hi; kill -9 $$", "was killed by SIGKILL"),
    ] {
        let mut cmd = zerocat();
        cmd.args(["pipe", command, "-"]);
        let out = run(cmd);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{command}: {}",
            stderr_text(&out)
        );
        assert!(
            stderr_text(&out).contains(words),
            "{command}: {}",
            stderr_text(&out)
        );
        assert_eq!(
            out.stdout, b"hi\n",
            "{command}: the bytes before the failure"
        );
    }
}

#[test]
fn a_missing_program_is_exit_1_naming_it_before_any_byte() {
    let dir = tempdir();
    let output = dir.path().join("out.bin");
    let mut cmd = zerocat();
    cmd.args(["pipe", "exec:zerocat-no-such-program x"])
        .arg(&output);
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let text = stderr_text(&out);
    assert!(
        text.contains("zerocat-no-such-program") && text.contains("No such file"),
        "{text}"
    );
    assert!(!output.exists(), "the sink was opened");
}

#[test]
fn bad_commands_are_usage_errors_before_any_fd_opens() {
    let dir = tempdir();
    let output = dir.path().join("out.bin");
    for (arg, words) in [
        ("exec:", "no program"),
        ("sh:", "no command"),
        ("sh:  ", "no command"),
        ("exec:echo 'open", "unbalanced single quote"),
        ("exec:cat,pty", "'pty'"),
        ("exec:cat,bogus", "unknown option 'bogus'"),
    ] {
        let mut cmd = zerocat();
        cmd.args(["pipe", arg]).arg(&output);
        let out = run(cmd);
        assert_eq!(out.status.code(), Some(2), "{arg}: {}", stderr_text(&out));
        assert!(
            stderr_text(&out).contains(words),
            "{arg}: {}",
            stderr_text(&out)
        );
        assert!(!output.exists(), "{arg}: the sink was opened");
    }
}

#[test]
fn sigint_stops_the_child_and_reaps_it() {
    let dir = tempdir();
    let pidfile = dir.path().join("pid");
    let mut cmd = zerocat();
    cmd.args(["pipe"])
        .arg(format!("sh:echo $$ > {}; exec sleep 30", pidfile.display()))
        .arg(dir.path().join("out.bin"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let started = Instant::now();
    let pid = loop {
        if let Ok(text) = std::fs::read_to_string(&pidfile) {
            if text.ends_with('\n') {
                break text.trim().to_string();
            }
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no child pid");
        std::thread::sleep(Duration::from_millis(10));
    };
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = wait_with_deadline(child, Duration::from_secs(10));
    assert!(!out.status.success(), "{}", stderr_text(&out));
    // Reaped by zerocat (not a zombie left to init, not a sleeper left running).
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "child {pid} is still there"
    );
}
