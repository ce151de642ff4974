//! Every blocking wait ends on SIGINT/SIGTERM with 130 and the report: copy onto a FIFO
//! with no reader (its open blocks). tee with a stalled stdout reader is still open (see
//! issue 13's closing note).

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::util::{data, json_report, tempdir, wait_with_deadline, write_file, zerocat};

#[test]
fn copy_onto_a_fifo_with_no_reader_ends_on_sigint_with_130_and_the_report() {
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        let dir = tempdir();
        let src = write_file(dir.path(), "src", &data(10_000));
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let mut cmd = zerocat();
        cmd.args(["--stats", "json", "copy"])
            .arg(&src)
            .arg(&fifo)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let child = cmd.spawn().unwrap();
        // Long enough for zerocat to be blocked in the FIFO's open.
        std::thread::sleep(Duration::from_millis(500));
        kill(Pid::from_raw(child.id() as i32), signal).unwrap();
        let out = wait_with_deadline(child, Duration::from_secs(5));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{signal}: {stderr}");
        let report = json_report(&out.stderr);
        assert_eq!(
            report["bytes"], 0,
            "{signal}: nothing reached the FIFO: {stderr}"
        );
        assert_eq!(report["ended"], "signal", "{signal}: {stderr}");
    }
}
