//! Terminals: a child on a pseudo-terminal of its own (`exec:…,pty`, `sh:…,pty`: a
//! session leader with a controlling tty, the window size asked for), `pty:LINK` opened by
//! another process (bytes as they are, both ways), and a terminal in raw mode that is put
//! back after every way a run ends (normal, error, SIGINT, SIGTERM, SIGHUP, SIGTSTP then
//! SIGCONT) and that a background process group sets without being stopped (SIGTTOU).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::rig::Rig;
use crate::util::{assert_bytes_eq, bin, data, json_report, wait_with_deadline, zerocat, DEADLINE};
use crate::ux::in_a_terminal;

fn script_missing() -> bool {
    let missing = std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err();
    if missing {
        eprintln!("SKIPPED: script (util-linux) is not installed");
    }
    missing
}

/// `pipe SRC -` with zerocat's stdout given to the test: what came out, and the report.
fn pipe_to_stdout(src: &str) -> (Vec<u8>, crate::rig::Finished) {
    let mut running = Rig::new().stdout_to_test().args(["pipe", src, "-"]).start();
    let mut out = Vec::new();
    running.take_stdout().read_to_end(&mut out).unwrap();
    (out, running.finish())
}

#[test]
fn a_pty_child_leads_its_session_on_a_terminal_of_the_size_asked() {
    let (out, run) = pipe_to_stdout("sh:tty,pty");
    run.assert_code(0, "sh:tty,pty");
    run.assert_final_path("splice", "sh:tty,pty");
    let text = String::from_utf8(out).unwrap();
    // The terminal's output processing turns \n into \r\n, as on any terminal.
    let name = text
        .strip_suffix("\r\n")
        .unwrap_or_else(|| panic!("{text:?}"));
    assert!(
        name.strip_prefix("/dev/pts/")
            .is_some_and(|n| n.parse::<u32>().is_ok()),
        "tty printed {text:?}"
    );

    let (out, run) = pipe_to_stdout("sh:stty size,pty,rows=33,cols=101");
    run.assert_code(0, "stty size");
    assert_eq!(out, b"33 101\r\n");
    let (out, _) = pipe_to_stdout("exec:stty size,pty");
    assert_eq!(out, b"24 80\r\n", "the default size");

    // A session of its own (sid = pid) whose controlling terminal is that pty (tty_nr).
    let (out, _) = pipe_to_stdout(r#"sh:echo $$ $(cut -d" " -f6-7 /proc/$$/stat),pty"#);
    let text = String::from_utf8(out).unwrap();
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(words.len(), 3, "{text:?}");
    assert_eq!(words[0], words[1], "not a session leader: {text:?}");
    assert_ne!(words[2], "0", "no controlling terminal: {text:?}");
}

#[test]
fn a_pty_child_reads_the_stream_as_typed_and_its_end_as_end_of_file() {
    // exec:cat on a terminal: the line comes back twice (the terminal's echo, then cat's
    // copy), and the end of the input is ^D, which ends cat: the run ends by itself.
    let mut rig = Rig::new().stdout_to_test();
    let src = rig.stdin(
        std::sync::Arc::new(b"hello\nno newline".to_vec()),
        crate::rig::Pace::Full,
    );
    let mut running = rig.args(["pipe", &src, "exec:cat,pty"]).start();
    let mut out = Vec::new();
    running.take_stdout().read_to_end(&mut out).unwrap();
    let run = running.finish();
    run.assert_code(0, "pipe - exec:cat,pty");
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("hello\r\n"), "{text:?}");
    assert_eq!(
        text.matches("hello\r\n").count(),
        2,
        "echo and cat: {text:?}"
    );
    assert_eq!(
        text.matches("no newline").count(),
        2,
        "the partial line too: {text:?}"
    );
}

#[test]
fn a_relay_serves_a_shell_on_a_pty_per_connection() {
    let relay = Rig::new().relay(&["--once", "tcp-listen:0", "sh:sh,pty,rows=40,cols=120"]);
    let mut client = TcpStream::connect(relay.addr()).unwrap();
    client.set_read_timeout(Some(DEADLINE)).unwrap();
    client.write_all(b"stty size; tty; exit\n").unwrap();
    let mut out = Vec::new();
    client.read_to_end(&mut out).unwrap();
    drop(client);
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("40 120\r\n"), "{text:?}");
    assert!(text.contains("/dev/pts/"), "{text:?}");
    let end = relay.finish();
    end.assert_code(0, "relay tcp-listen sh,pty");
    let r = end.report();
    assert_eq!(r["connections"][0]["ended"], "eof", "{r}");
    assert_eq!(r["bytes_b_to_a"], out.len() as u64, "{r}");
}

/// zerocat's "pty LINK -> /dev/pts/N" line, read from its stderr; the rest is kept.
fn pty_announced(child: &mut std::process::Child) -> (String, std::thread::JoinHandle<Vec<u8>>) {
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let started = Instant::now();
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "no pty line");
        assert!(started.elapsed() < DEADLINE);
        if let Some(rest) = line.trim_end().strip_prefix("zerocat: pty ") {
            let path = rest.rsplit(" -> ").next().unwrap().to_string();
            let rest = std::thread::spawn(move || {
                let mut buf = Vec::new();
                reader.read_to_end(&mut buf).unwrap();
                buf
            });
            return (path, rest);
        }
    }
}

#[test]
fn a_pty_link_is_a_raw_terminal_another_process_opens_both_ways() {
    // relay pty:LINK tcp:ECHO — a program opens LINK and talks through it to a TCP server
    // that echoes; bytes that a cooked terminal would change (\r, \n, ^C, ^D, ^Z, 0xff)
    // pass as they are.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut s, _) = server.accept().unwrap();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = s.read(&mut buf) {
            s.write_all(&buf[..n]).unwrap();
        }
    });
    let dir = crate::util::tempdir();
    let link = dir.path().join("ttyV0");
    let mut z = zerocat();
    z.args([
        "--stats",
        "json",
        "relay",
        &format!("pty:{}", link.display()),
        &format!("tcp:{addr}"),
    ])
    .stderr(Stdio::piped());
    let mut z = z.spawn().unwrap();
    let (announced, stderr) = pty_announced(&mut z);
    assert!(announced.starts_with("/dev/pts/"), "{announced}");
    assert_eq!(
        std::fs::read_link(&link).unwrap().to_str(),
        Some(announced.as_str())
    );
    let mut payload = b"line\r\nmore\n\x03\x04\x1a\x7f\xff".to_vec();
    payload.extend(data(20_000));
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags_noctty()
        .open(&link)
        .unwrap();
    tty.write_all(&payload).unwrap();
    let mut back = vec![0u8; payload.len()];
    let reader = {
        let mut tty = tty.try_clone().unwrap();
        std::thread::spawn(move || tty.read_exact(&mut back).map(|()| back))
    };
    let back = wait_for(reader, "the echo through the pty");
    assert_bytes_eq(&back, &payload, "pty link -> tcp -> pty link");
    drop(tty);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(z.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = z.wait().unwrap();
    let report = json_report(&stderr.join().unwrap());
    assert_eq!(status.code(), Some(130), "{report}");
    assert_eq!(report["bytes_a_to_b"], payload.len() as u64, "{report}");
    assert_eq!(report["bytes_b_to_a"], payload.len() as u64, "{report}");
    assert!(
        !link.exists() && std::fs::symlink_metadata(&link).is_err(),
        "LINK left behind"
    );
}

trait NoCtty {
    fn custom_flags_noctty(&mut self) -> &mut Self;
}

impl NoCtty for std::fs::OpenOptions {
    /// Opened without becoming the test's controlling terminal.
    fn custom_flags_noctty(&mut self) -> &mut Self {
        std::os::unix::fs::OpenOptionsExt::custom_flags(self, nix::libc::O_NOCTTY)
    }
}

fn wait_for<T: Send + 'static>(
    thread: std::thread::JoinHandle<std::io::Result<T>>,
    what: &str,
) -> T {
    let started = Instant::now();
    while !thread.is_finished() {
        assert!(started.elapsed() < DEADLINE, "{what}: never came");
        std::thread::sleep(Duration::from_millis(10));
    }
    thread
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Runs `body` (sh) in script's terminal with `Z` set to zerocat and the working directory
/// a fresh one; returns that directory (the script's files) and what script printed.
fn in_terminal(body: &str) -> (tempfile::TempDir, String) {
    let dir = crate::util::tempdir();
    std::fs::write(dir.path().join("test.sh"), body).unwrap();
    let mut cmd = in_a_terminal(&format!(
        "cd {} && Z={} sh ./test.sh",
        dir.path().display(),
        bin().display()
    ));
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let out = wait_with_deadline(cmd.spawn().unwrap(), DEADLINE);
    (dir, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn read(dir: &tempfile::TempDir, name: &str) -> String {
    std::fs::read_to_string(dir.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `stty -a`'s settings, without the line of the window size (a terminal's, not a mode).
fn settings(stty: &str) -> String {
    stty.lines()
        .filter(|l| !l.contains("rows"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn raw_mode_is_put_back_after_a_normal_end_and_an_error() {
    if script_missing() {
        return;
    }
    let (dir, shown) = in_terminal(
        r#"
stty -a > before
printf 'abc\n' > in
$Z pipe in -,raw,echo=0 > out 2>/dev/null; echo $? > rc.ok
stty -a > after.ok
$Z pipe missing -,raw,echo=0 2>/dev/null; echo $? > rc.err
stty -a > after.err
$Z --stats json pipe file:/dev/tty,raw,echo=0 - < /dev/null > /dev/null 2> err.tty &
sleep 0.5; kill -INT $!; wait $!
stty -a > after.tty
"#,
    );
    let before = settings(&read(&dir, "before"));
    assert!(
        before.contains(" icanon") && before.contains(" echo "),
        "{before}\n{shown}"
    );
    assert_eq!(read(&dir, "rc.ok").trim(), "0");
    assert_eq!(read(&dir, "out"), "abc\n");
    assert_eq!(
        settings(&read(&dir, "after.ok")),
        before,
        "after a normal end"
    );
    assert_eq!(read(&dir, "rc.err").trim(), "1");
    assert_eq!(settings(&read(&dir, "after.err")), before, "after an error");
    assert_eq!(
        settings(&read(&dir, "after.tty")),
        before,
        "file:/dev/tty,raw"
    );
}

#[test]
fn raw_mode_is_put_back_after_each_signal_and_while_stopped() {
    if script_missing() {
        return;
    }
    // A zerocat that waits (for a client that never comes) with the terminal raw, ended
    // by each signal in turn; SIGTSTP stops it with the terminal put back, SIGCONT makes
    // it raw again.
    // `set -m`: each job a process group of its own that SIGTSTP can stop (the shell's own
    // group, under script, is orphaned: the kernel discards stops there).
    let (dir, shown) = in_terminal(
        r#"
set -m
state() { cut -d' ' -f3 /proc/$1/stat; }
# zerocat's exit code from the subshell that waits for it (the shell's own `wait` would
# report the stop too); its pid from before its exec.
start() {
  rm -f err pid rc
  ( sh -c 'echo $$ > pid; exec "$Z" pipe tcp-listen:0 -,raw,echo=0 < /dev/tty 2> err'
    echo $? > rc ) &
  until [ -s pid ] && grep -q listening err 2>/dev/null; do sleep 0.02; done
  pid=$(cat pid)
}
ended() { until [ -s rc ]; do sleep 0.02; done; cat rc; }
stty -a > before
for sig in INT TERM HUP; do
  start
  stty -a > during.$sig
  kill -$sig $pid; ended > rc.$sig
  stty -a > after.$sig
done
start
kill -TSTP $pid
until [ "$(state $pid)" = T ]; do sleep 0.02; done
stty -a > stopped
kill -CONT $pid
until stty -a | grep -q -- -icanon; do sleep 0.02; done
stty -a > resumed
kill -INT $pid; ended > rc.resumed
stty -a > after.resumed
"#,
    );
    let before = settings(&read(&dir, "before"));
    assert!(before.contains(" icanon"), "{before}\n{shown}");
    for (sig, code) in [("INT", "130"), ("TERM", "130"), ("HUP", "129")] {
        let during = read(&dir, &format!("during.{sig}"));
        assert!(
            during.contains("-icanon") && during.contains("-echo "),
            "{sig}: {during}"
        );
        assert_eq!(read(&dir, &format!("rc.{sig}")).trim(), code, "SIG{sig}");
        assert_eq!(
            settings(&read(&dir, &format!("after.{sig}"))),
            before,
            "after SIG{sig}"
        );
    }
    assert_eq!(settings(&read(&dir, "stopped")), before, "while stopped");
    assert!(
        read(&dir, "resumed").contains("-icanon"),
        "raw again after SIGCONT"
    );
    assert_eq!(read(&dir, "rc.resumed").trim(), "130");
    assert_eq!(
        settings(&read(&dir, "after.resumed")),
        before,
        "after SIGCONT and SIGINT"
    );
}

#[test]
fn a_background_process_group_sets_raw_mode_without_being_stopped() {
    if script_missing() {
        return;
    }
    // `set -m`: the job gets a process group of its own, in the terminal's background,
    // where tcsetattr sends SIGTTOU (a stop: socat's exit 150 under `docker run -ti`).
    let (dir, shown) = in_terminal(
        r#"
set -m
stty -a > before
printf 'abc' > in
$Z pipe in -,raw,echo=0 < /dev/tty > out 2> err &
wait $!; echo $? > rc
stty -a > after
"#,
    );
    assert_eq!(
        read(&dir, "rc").trim(),
        "0",
        "{shown}\n{}",
        read(&dir, "err")
    );
    assert_eq!(read(&dir, "out"), "abc");
    assert_eq!(
        settings(&read(&dir, "after")),
        settings(&read(&dir, "before"))
    );
}

#[test]
fn pty_and_terminal_options_out_of_place_are_usage_errors() {
    for args in [
        vec!["pipe", "tcp:127.0.0.1:9,pty", "-"],
        vec!["pipe", "-", "file:x,pty"],
        vec!["pipe", "sh:true,rows=10", "-"],
        vec!["pipe", "sh:true,pty,rows=0", "-"],
        vec!["pipe", "sh:true,pty,cols=x", "-"],
        vec!["pipe", "-,raw,pty", "x"],
        vec!["pipe", "-,echo=2", "x"],
        vec!["pipe", "file:x,echo", "-"],
        vec!["relay", "udp:127.0.0.1:9,raw", "-"],
    ] {
        let out = crate::util::run({
            let mut c = zerocat();
            c.args(&args);
            c
        });
        let text = crate::util::stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
    }
}

/// SRC/DST take '-'-led values for `-,raw,echo=0`; a mistyped option in their place is still
/// a usage error naming it, not a file named `--bogus` created or read.
#[test]
fn a_mistyped_option_where_an_endpoint_goes_is_a_usage_error_that_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), b"x").unwrap();
    for args in [
        vec!["pipe", "a", "--bogus"],
        vec!["pipe", "-x", "a"],
        vec!["pipe", "a", "-x"],
        vec!["relay", "--bogus", "tcp:127.0.0.1:9"],
    ] {
        let out = crate::util::run({
            let mut c = zerocat();
            c.current_dir(dir.path()).args(&args);
            c
        });
        let text = crate::util::stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        let bad = args.iter().find(|a| a.starts_with('-')).unwrap();
        assert!(
            text.contains(&format!("unexpected argument '{bad}'")),
            "{args:?}: {text}"
        );
    }
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["a"]);
}
