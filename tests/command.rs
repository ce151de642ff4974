//! `exec:`/`sh:` endpoints: a child's stdout as a source, its stdin as a sink, over real pipes.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::rig::{dir_paths, Pace, Rig};

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
    assert_eq!(report["src"]["child"]["exit"], 0, "{report}");
    assert!(report["src"]["child"]["pid"].as_u64().is_some(), "{report}");
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
        cmd.args(["--stats", "json", "pipe", command, "-"]);
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
        let child = &json_report(&out.stderr)["src"]["child"];
        if words.contains("SIGKILL") {
            assert_eq!(child["signal"], "SIGKILL", "{child}");
            assert!(child["exit"].is_null(), "{child}");
        } else {
            assert_eq!(child["exit"], 3, "{child}");
        }
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
        ("exec:cat,rows=10", "'rows' and 'cols'"),
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

/// The children zerocat (`pid`) has not reaped yet, over all its threads.
fn children_of(pid: i32) -> Vec<String> {
    let mut all = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path().join("children");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        all.extend(text.split_whitespace().map(String::from));
    }
    all
}

/// Waits (bounded) until zerocat has reaped every child it started.
fn wait_until_reaped(pid: i32) {
    let started = Instant::now();
    while !children_of(pid).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "children left unreaped: {:?}",
            children_of(pid)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A client of an inetd-style relay: sends `payload`, half-closes, reads to the end.
fn converse(addr: &str, payload: Vec<u8>) -> Vec<u8> {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sending = std::thread::spawn(move || {
        writer.write_all(&payload).unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut got = Vec::new();
    (&stream).read_to_end(&mut got).unwrap();
    sending.join().unwrap();
    got
}

#[test]
fn relay_gives_each_of_50_concurrent_connections_its_own_child() {
    let relay = Rig::new().relay(&["tcp-listen:0,backlog=64", "sh:echo $$; exec cat"]);
    let clients: Vec<_> = (0..50usize)
        .map(|i| {
            let addr = relay.addr().to_string();
            std::thread::spawn(move || {
                // Past 64 KiB, so the bulk rule moves some directions to splice.
                let payload = data(200_000 + i * 1_000);
                let got = converse(&addr, payload.clone());
                let newline = got.iter().position(|&b| b == b'\n').expect("a pid line");
                let pid = String::from_utf8(got[..newline].to_vec()).unwrap();
                assert_bytes_eq(&got[newline + 1..], &payload, &format!("client {i}"));
                pid
            })
        })
        .collect();
    let pids: HashSet<String> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert_eq!(pids.len(), 50, "one child per connection: {pids:?}");
    // Every child is reaped while the relay goes on: no zombie waits for the end.
    wait_until_reaped(relay.pid().as_raw());
    let end = relay.stop();
    end.assert_code(130, "relay");
    let conns = end.connections();
    assert_eq!(conns.len(), 50);
    let mut logged = HashSet::new();
    for conn in conns {
        assert_eq!(conn["ended"], "eof", "{conn}");
        assert_eq!(conn["child"]["b"]["exit"], 0, "{conn}");
        logged.insert(conn["child"]["b"]["pid"].to_string());
    }
    assert_eq!(logged, pids, "the report names each connection's child");
    let spliced = conns
        .iter()
        .flat_map(|c| [&c["a_to_b"], &c["b_to_a"]])
        .any(|d| dir_paths(d).unwrap().iter().any(|p| p == "splice"));
    assert!(spliced, "no direction to or from a child was spliced");
}

#[test]
fn relay_between_stdio_and_a_command_moves_both_ways() {
    let payload = data(3 << 20);
    let mut rig = Rig::new();
    let side = rig.stdin(std::sync::Arc::new(payload.clone()), Pace::Full);
    rig.stdout_sink(Pace::Full);
    let end = rig
        .arg("relay")
        .args([side.as_str(), "exec:tr a-z A-Z"])
        .run();
    end.assert_code(0, "relay - exec:");
    end.assert_held(0, &payload.to_ascii_uppercase(), "through tr");
    let conn = &end.connections()[0];
    assert_eq!(conn["child"]["b"]["exit"], 0, "{conn}");
    assert_eq!(end.report()["bytes_b_to_a"].as_u64(), Some(3 << 20));
}

#[test]
fn a_command_that_fails_fails_its_connection_and_a_session_exits_1() {
    // Served by a listener: that connection is counted as failed, with the status.
    let dir = tempdir();
    let log = dir.path().join("conns.log");
    let relay = Rig::new()
        .args(["relay", "--log"])
        .arg(&log)
        .args(["tcp-listen:0", "sh:cat; exit 3"])
        .listen();
    let got = converse(relay.addr(), b"hello\n".to_vec());
    assert_eq!(got, b"hello\n", "the bytes before the exit are delivered");
    let end = relay.stop();
    end.assert_code(130, "relay");
    assert_eq!(end.report()["failed"], 1, "{}", end.report());
    let line = std::fs::read_to_string(&log).unwrap();
    let conn: serde_json::Value = serde_json::from_str(
        line.lines()
            .find(|l| l.contains("\"connection\""))
            .expect("a log line"),
    )
    .unwrap();
    assert_eq!(conn["ended"], "command-failed", "{conn}");
    assert_eq!(conn["child"]["b"]["exit"], 3, "{conn}");
    assert!(
        conn["error"]
            .as_str()
            .unwrap()
            .contains("exited with status 3"),
        "{conn}"
    );

    // One session: its end is the run's, exit 1 naming the status.
    let mut cmd = zerocat();
    cmd.args(["relay", "-", "sh:cat >/dev/null; kill -9 $$"])
        .stdin(Stdio::null());
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("was killed by SIGKILL"),
        "{}",
        stderr_text(&out)
    );
}

#[test]
fn a_relay_to_a_missing_program_fails_before_it_listens() {
    let mut cmd = zerocat();
    cmd.args(["relay", "tcp-listen:0", "exec:zerocat-no-such-program"]);
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let text = stderr_text(&out);
    assert!(
        text.contains("zerocat-no-such-program") && text.contains("ENOENT"),
        "{text}"
    );
    assert!(!text.contains("listening on"), "{text}");
}

/// Whether `pid` has ended: gone, or a zombie left to a parent that is not zerocat.
fn ended(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat[stat.rfind(')').unwrap() + 2..].starts_with('Z'),
    }
}

#[test]
fn a_signal_stops_a_relay_child_and_what_it_started() {
    // The shell ignores SIGTERM and starts a sleeper: SIGKILL to its process group after
    // the grace must end both.
    let relay = Rig::new().relay(&[
        "--grace",
        "200ms",
        "tcp-listen:0",
        "sh:trap '' TERM; sleep 30 & echo $!; wait",
    ]);
    let stream = TcpStream::connect(relay.addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&stream), &mut line).unwrap();
    let sleeper = line.trim().to_string();
    assert!(!ended(&sleeper), "the sleeper {sleeper} should be running");
    let zerocat = relay.pid().as_raw();
    let end = relay.stop();
    end.assert_code(130, "relay");
    let conn = &end.connections()[0];
    assert_eq!(conn["child"]["b"]["signal"], "SIGKILL", "{conn}");
    let started = Instant::now();
    while !ended(&sleeper) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{sleeper} outlived the relay"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!std::path::Path::new(&format!("/proc/{zerocat}")).exists());
}

#[test]
fn tee_feeds_commands_and_files_alike_and_waits_for_each_child() {
    let dir = tempdir();
    let payload = data(5 << 20);
    let input = write_file(dir.path(), "in.bin", &payload);
    let (gz, copy, plain) = (
        dir.path().join("out.gz"),
        dir.path().join("copy.bin"),
        dir.path().join("plain.bin"),
    );
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "tee"])
        .arg(&input)
        .arg(format!("sh:gzip -1 > {}", gz.display()))
        .arg(format!(
            "exec:dd 'of={}' bs=64k status=none",
            copy.display()
        ))
        .arg(&plain);
    let out = run(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let gunzipped = std::process::Command::new("gzip")
        .arg("-dc")
        .arg(&gz)
        .output()
        .unwrap();
    assert_bytes_eq(&gunzipped.stdout, &payload, "through gzip");
    assert_bytes_eq(&std::fs::read(&copy).unwrap(), &payload, "through dd");
    assert_bytes_eq(&std::fs::read(&plain).unwrap(), &payload, "the file");
    let report = json_report(&out.stderr);
    for i in 0..2 {
        let sink = &report["sinks"][i];
        assert_eq!(sink["kind"], "pipe", "{sink}");
        assert_eq!(sink["child"]["exit"], 0, "{sink}");
        assert_eq!(sink["paths"][0]["path"], "tee", "{sink}");
    }

    // A command as the source: its stdout fanned out; its failure fails the run.
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "tee"])
        .arg(format!("sh:cat {}; exit 5", input.display()))
        .arg(&plain)
        .arg("-");
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    assert_bytes_eq(&out.stdout, &payload, "stdout");
    assert_bytes_eq(&std::fs::read(&plain).unwrap(), &payload, "file");
    let report = json_report(&out.stderr);
    assert_eq!(report["src"]["child"]["exit"], 5, "{report}");
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("exited with status 5"),
        "{report}"
    );
}

#[test]
fn a_tee_sink_command_that_fails_is_a_failed_sink_the_others_still_get_every_byte() {
    let dir = tempdir();
    let payload = data(1 << 20);
    let input = write_file(dir.path(), "in.bin", &payload);
    let plain = dir.path().join("plain.bin");
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "tee"])
        .arg(&input)
        .arg("sh:cat >/dev/null; exit 4")
        .arg(&plain);
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    assert_bytes_eq(&std::fs::read(&plain).unwrap(), &payload, "the file");
    let report = json_report(&out.stderr);
    assert_eq!(report["sinks"][0]["ended"], "error", "{report}");
    assert_eq!(report["sinks"][0]["child"]["exit"], 4, "{report}");
    assert_eq!(report["sinks"][1]["ended"], "eof", "{report}");
}
