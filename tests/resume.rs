//! Issue 38 items 4-5: an http body cut short (FIN, RST, a stall, a chunked stream cut)
//! resumes with `Range` + `If-Range` into the same sink — a file, a pipe, tee's two sinks —
//! and never mixes two versions of the object; `copy --resume URL FILE` continues a partial
//! file across runs; `copy -j N URL FILE` fetches ranges at once into a file that appears
//! whole or not at all. The server is the tests' own fault server (tests/http_fault.rs).

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::http_fault::{CutProxy, Fault, FaultServer, Manner, Object, CHUNK};
use crate::rig::{Finished, Pace, Rig};
use crate::util::{assert_bytes_eq, bin, data, json_report, wait_with_deadline, DEADLINE};

/// Short waits: a test's reconnections go at once, then after 10 ms, 20 ms...
const FAST: [&str; 2] = ["--retry-wait", "10ms"];

/// The object of most tests: big enough that a cut falls in the middle of the body.
fn object() -> Vec<u8> {
    data(3 * 1024 * 1024 + 17)
}

/// The http block of the run's source.
fn http_of(report: &Value) -> &Value {
    let http = &report["src"]["http"];
    assert!(http.is_object(), "no http block in {report}");
    http
}

/// The resumes the report lists: (offset, cause).
fn resumes(report: &Value) -> Vec<(u64, String)> {
    http_of(report)["resumes"]
        .as_array()
        .unwrap_or_else(|| panic!("no resumes array in {report}"))
        .iter()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap(),
                r["cause"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Every request after the first asked `Range: bytes=OFFSET-` with If-Range `validator`, at
/// the offsets the report says.
#[track_caller]
fn assert_resumed_with(srv: &FaultServer, run: &Finished, validator: &str) {
    let asked: Vec<_> = srv.requests()[1..]
        .iter()
        .map(|r| {
            assert_eq!(r.header("If-Range"), Some(validator), "{r:?}");
            r.header("Range").unwrap_or("(none)").to_string()
        })
        .collect();
    let said: Vec<_> = resumes(run.report())
        .iter()
        .map(|(offset, _)| format!("bytes={offset}-"))
        .collect();
    assert_eq!(asked, said, "{}", run.report());
}

fn run_into_file(srv: &FaultServer, extra: &[&str]) -> Finished {
    let mut rig = Rig::new()
        .arg("pipe")
        .args(FAST)
        .args(extra.iter().copied());
    let out = rig.path("out.bin");
    let sink = rig.file_sink(out);
    rig.args([srv.url("obj"), sink]).run()
}

#[test]
fn a_body_cut_by_a_fin_or_an_rst_resumes_into_the_same_file() {
    let body = object();
    for (fault, cause) in [
        (Fault::CutFin(1_000_000), "closed early"),
        (Fault::CutRst(1_000_000), "reset"),
    ] {
        let srv = FaultServer::start(
            Object::with_etag(body.clone(), "v1"),
            vec![fault, Fault::CutFin(1_500_000)],
        );
        let run = run_into_file(&srv, &[]);
        run.assert_code(0, cause);
        run.assert_held(0, &body, cause);
        run.assert_final_path("splice", cause);
        let resumes = resumes(run.report());
        assert_eq!(resumes.len(), 2, "{}", run.report());
        assert_eq!(resumes[0].1, cause, "{}", run.report());
        // An RST drops what the server had queued: the resume starts where the bytes
        // stopped, at most where the server cut.
        assert!(resumes[0].0 <= 1_000_000 && resumes[0].0 > 0, "{resumes:?}");
        assert_eq!(
            resumes[1],
            (resumes[0].0 + 1_500_000, "closed early".into())
        );
        assert_resumed_with(&srv, &run, "\"v1\"");
    }
}

#[test]
fn a_stalled_body_resumes_after_the_idle_timeout() {
    let body = object();
    let srv = FaultServer::start(
        Object::with_etag(body.clone(), "v1"),
        vec![Fault::Stall(700_000)],
    );
    let run = run_into_file(&srv, &["--idle-timeout", "300ms"]);
    run.assert_code(0, "a stall");
    run.assert_held(0, &body, "a stall");
    assert_eq!(resumes(run.report()), [(700_000, "idle".to_string())]);
    assert_resumed_with(&srv, &run, "\"v1\"");
}

/// A body that stalls twice in a row (the second answer sends nothing at all): each stall
/// is a cut the pump resumes, never the run's end — pipe's own `--idle-timeout` watch does
/// not arm on an http(s) source, whose quiet is the pump's to judge (with the watch armed,
/// it stopped the run during the second stall: exit 1, "interrupted while waiting to
/// resume at 700000").
#[test]
fn two_stalls_in_a_row_are_both_resumed_not_the_end_of_the_run() {
    let body = object();
    let srv = FaultServer::start(
        Object::with_etag(body.clone(), "v1"),
        vec![Fault::Stall(700_000), Fault::Stall(0)],
    );
    let run = run_into_file(&srv, &["--idle-timeout", "300ms"]);
    run.assert_code(0, "two stalls");
    run.assert_held(0, &body, "two stalls");
    assert_eq!(
        resumes(run.report()),
        [(700_000, "idle".to_string()), (700_000, "idle".to_string())]
    );
}

#[test]
fn a_chunked_body_cut_before_its_last_chunk_resumes() {
    let body = object();
    let srv = FaultServer::start_with(
        Object::with_etag(body.clone(), "v1"),
        vec![Fault::CutFin(5 * CHUNK as u64 + 100)],
        Manner {
            chunked: true,
            ..Manner::default()
        },
    );
    let run = run_into_file(&srv, &[]);
    run.assert_code(0, "a chunked cut");
    run.assert_held(0, &body, "a chunked cut");
    let resumes = resumes(run.report());
    assert_eq!(resumes.len(), 1, "{}", run.report());
    assert_eq!(resumes[0].1, "chunked body cut");
    assert_resumed_with(&srv, &run, "\"v1\"");
}

#[test]
fn a_last_modified_serves_as_validator_when_there_is_no_etag() {
    let body = object();
    let srv = FaultServer::start(
        Object::with_last_modified(body.clone()),
        vec![Fault::CutFin(123_457)],
    );
    let run = run_into_file(&srv, &[]);
    run.assert_code(0, "Last-Modified");
    run.assert_held(0, &body, "Last-Modified");
    assert_resumed_with(&srv, &run, &srv.object().last_modified.unwrap());
}

#[test]
fn a_resumed_body_reaches_sha256sum_through_a_pipe() {
    let body = object();
    let srv = FaultServer::start(
        Object::with_etag(body.clone(), "v1"),
        vec![Fault::CutRst(600_000), Fault::CutFin(900_000)],
    );
    let script = format!(
        "'{}' --stats json pipe --retry-wait 10ms '{}' - | sha256sum",
        bin().display(),
        srv.url("obj")
    );
    let child = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_with_deadline(child, DEADLINE);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = ring::digest::digest(&ring::digest::SHA256, &body);
    let want: String = want.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let got = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        got.split_whitespace().next(),
        Some(want.as_str()),
        "sha256sum said {got}"
    );
    let report = json_report(&out.stderr);
    assert_eq!(resumes(&report).len(), 2, "{report}");
    assert_eq!(
        report["bytes"].as_u64(),
        Some(body.len() as u64),
        "{report}"
    );
}

#[test]
fn a_resumed_body_reaches_both_sinks_of_tee() {
    let body = object();
    let srv = FaultServer::start(
        Object::with_etag(body.clone(), "v1"),
        vec![Fault::CutRst(1_500_000)],
    );
    let mut rig = Rig::new().arg("tee").args(FAST);
    let a = rig.path("a.bin");
    let a = rig.file_sink(a);
    let b = rig.stdout_sink(Pace::Full);
    let run = rig.args([srv.url("obj"), a, b]).run();
    run.assert_code(0, "tee");
    run.assert_held(0, &body, "tee file");
    run.assert_held(1, &body, "tee stdout");
    run.assert_final_path("tee", "tee");
    let resumes = resumes(run.report());
    assert_eq!(resumes.len(), 1, "{}", run.report());
    assert!(resumes[0].0 > 0 && resumes[0].0 <= 1_500_000, "{resumes:?}");
    assert_resumed_with(&srv, &run, "\"v1\"");
}

/// The sink holds a prefix of `v1` and nothing of `v2`: the bytes of two versions never met.
#[track_caller]
fn assert_only_a_prefix_of(held: &[u8], v1: &[u8], what: &str) {
    assert!(
        held.len() < v1.len(),
        "{what}: {} bytes, the whole object",
        held.len()
    );
    assert_bytes_eq(held, &v1[..held.len()], what);
}

#[test]
fn an_object_replaced_after_a_cut_is_refused_never_appended() {
    let v1 = object();
    let v2 = data(3 * 1024 * 1024 + 18);
    // The server honours If-Range: the new version comes back as a 200.
    let srv = FaultServer::start(
        Object::with_etag(v1.clone(), "v1"),
        vec![
            Fault::CutFin(800_000),
            Fault::Replace(Object::with_etag(v2.clone(), "v2")),
        ],
    );
    let run = run_into_file(&srv, &[]);
    run.assert_code(1, "replaced");
    assert!(
        run.stderr.contains("the object changed after 800000 bytes"),
        "{}",
        run.stderr
    );
    assert_only_a_prefix_of(run.held(0).unwrap(), &v1, "replaced");
    assert_eq!(run.held(0).unwrap().len(), 800_000);

    // A server that ignores If-Range sends the new version's bytes as a 206: its ETag
    // gives it away.
    let srv = FaultServer::start_with(
        Object::with_etag(v1.clone(), "v1"),
        vec![
            Fault::CutFin(800_000),
            Fault::Replace(Object::with_etag(v2.clone(), "v2")),
        ],
        Manner {
            ignore_if_range: true,
            ..Manner::default()
        },
    );
    let run = run_into_file(&srv, &[]);
    run.assert_code(1, "replaced, If-Range ignored");
    assert!(
        run.stderr.contains("the object changed after 800000 bytes"),
        "{}",
        run.stderr
    );
    assert_only_a_prefix_of(run.held(0).unwrap(), &v1, "replaced, If-Range ignored");
}

#[test]
fn a_server_without_ranges_or_validators_gets_no_blind_resume() {
    let body = object();
    let srv = FaultServer::start_with(
        Object::with_etag(body.clone(), "v1"),
        vec![Fault::CutFin(500_000)],
        Manner {
            no_ranges: true,
            ..Manner::default()
        },
    );
    let run = run_into_file(&srv, &[]);
    run.assert_code(1, "no ranges");
    assert!(
        run.stderr.contains("the object changed after 500000 bytes"),
        "{}",
        run.stderr
    );
    assert_only_a_prefix_of(run.held(0).unwrap(), &body, "no ranges");

    let srv = FaultServer::start(Object::bare(body.clone()), vec![Fault::CutFin(500_000)]);
    let run = run_into_file(&srv, &[]);
    run.assert_code(1, "no validator");
    assert_eq!(
        srv.requests().len(),
        1,
        "no second request without a validator"
    );
    assert_only_a_prefix_of(run.held(0).unwrap(), &body, "no validator");
    let http = http_of(run.report());
    assert_eq!(http["resumes"].as_array().map(Vec::len), Some(0), "{http}");
}

/// python's http.server on 127.0.0.1 serving a directory of the test's: HTTP/1.0 answers
/// with Content-Length and Last-Modified, and no Range support (every GET is a 200 of the
/// whole file). Killed when dropped.
struct PythonHttp {
    child: std::process::Child,
    addr: String,
    dir: tempfile::TempDir,
}

impl PythonHttp {
    /// None (SKIPPED printed) without python3.
    fn start() -> Option<PythonHttp> {
        let dir = crate::util::tempdir();
        let port = crate::util::free_port();
        let child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .arg("--directory")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(child) = child else {
            eprintln!("SKIPPED: python3 is not installed (apt-get install python3)");
            return None;
        };
        let addr = format!("127.0.0.1:{port}");
        drop(crate::util::connect_retrying(&addr));
        Some(PythonHttp { child, addr, dir })
    }

    /// Serves `body` as /NAME, last modified at `modified`.
    fn serve(&self, name: &str, body: &[u8], modified: std::time::SystemTime) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(modified).unwrap();
    }
}

impl Drop for PythonHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real server without Range support (python's http.server), its answers cut by a proxy
/// of the test's own: a GET is spliced whole; a cut body asks `Range` with If-Range its
/// Last-Modified, gets a 200 of the whole file, and stops — the second answer is never
/// spliced after the first part; and a file whose Last-Modified is not before its answer's
/// Date (here: set in the future; one written in the same second is the same case) gives
/// no validator at all: no second request, no blind resume.
#[test]
fn python_http_server_ignores_ranges_so_a_cut_body_is_never_continued_blindly() {
    let Some(python) = PythonHttp::start() else {
        return;
    };
    let body = object();
    let (now, hour) = (std::time::SystemTime::now(), Duration::from_secs(3600));
    python.serve("old.bin", &body, now - hour);
    python.serve("new.bin", &body, now + hour);

    let whole = CutProxy::start(&python.addr, vec![]);
    let mut rig = Rig::new().arg("pipe");
    let sink = rig.stdout_sink(Pace::Full);
    let run = rig
        .args([format!("http://{}/old.bin", whole.addr()), sink])
        .run();
    run.assert_code(0, "python, whole");
    run.assert_held(0, &body, "python, whole");
    run.assert_final_path("splice", "python, whole");
    assert_eq!(http_of(run.report())["status"], 200);

    let cut = CutProxy::start(&python.addr, vec![700_000]);
    let url = format!("http://{}/old.bin", cut.addr());
    let mut rig = Rig::new().arg("pipe").args(FAST);
    let sink = rig.stdout_sink(Pace::Full);
    let run = rig.args([url.clone(), sink]).run();
    run.assert_code(1, "python, cut");
    assert!(
        run.stderr.contains("the object changed after") && run.stderr.contains(&url),
        "{}",
        run.stderr
    );
    assert_only_a_prefix_of(run.held(0).unwrap(), &body, "python, cut");
    assert!(run.held(0).unwrap().len() > 600_000, "the first part came");
    assert_eq!(
        cut.connections(),
        2,
        "one resume asked, then the run stopped"
    );

    let cut = CutProxy::start(&python.addr, vec![700_000]);
    let mut rig = Rig::new().arg("pipe").args(FAST);
    let sink = rig.stdout_sink(Pace::Full);
    let run = rig
        .args([format!("http://{}/new.bin", cut.addr()), sink])
        .run();
    run.assert_code(1, "python, no validator");
    assert_only_a_prefix_of(run.held(0).unwrap(), &body, "python, no validator");
    assert_eq!(
        cut.connections(),
        1,
        "no second request without a validator"
    );
    let http = http_of(run.report());
    assert_eq!(http["resumes"].as_array().map(Vec::len), Some(0), "{http}");
    assert!(http["resume_off"].is_string(), "{http}");
}

#[test]
fn a_wrong_content_range_is_refused() {
    let body = object();
    let srv = FaultServer::start(
        Object::with_etag(body.clone(), "v1"),
        vec![Fault::CutFin(400_000), Fault::WrongContentRange(5)],
    );
    let run = run_into_file(&srv, &[]);
    run.assert_code(1, "wrong Content-Range");
    assert!(run.stderr.contains("Content-Range"), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("{}:", srv.url("obj"))),
        "names the URL: {}",
        run.stderr
    );
    assert_only_a_prefix_of(run.held(0).unwrap(), &body, "wrong Content-Range");
    assert_eq!(run.held(0).unwrap().len(), 400_000);
}

#[test]
fn retries_run_out_after_n_attempts_in_a_row() {
    let body = object();
    // Every attempt after the first cut is cut before its first byte.
    let mut script = vec![Fault::CutFin(100_000)];
    script.extend((0..10).map(|_| Fault::CutRst(0)));
    let srv = FaultServer::start(Object::with_etag(body.clone(), "v1"), script);
    let run = run_into_file(&srv, &["--retries", "3"]);
    run.assert_code(1, "retries");
    assert!(run.stderr.contains("3 attempt(s)"), "{}", run.stderr);
    assert_eq!(srv.requests().len(), 1 + 3);
    assert_only_a_prefix_of(run.held(0).unwrap(), &body, "retries");
}

/// A server that breaks every connection after a few bytes is not hammered: a resumed
/// connection cut before it carried 1 MiB, within --retry-wait, is one more failed attempt,
/// so the waits double and --retries ends the run. Seen before the rule: each 1,000 bytes
/// counted as progress, the reconnections went at once and without end (exit 0 after 41
/// requests, one per cut, until the script ran out).
#[test]
fn a_server_that_cuts_every_connection_early_is_not_hammered() {
    let body = object();
    let script = (0..40).map(|_| Fault::CutFin(1_000)).collect();
    let srv = FaultServer::start(Object::with_etag(body.clone(), "v1"), script);
    let mut rig = Rig::new()
        .arg("pipe")
        .args(["--retries", "2", "--retry-wait", "1s"]);
    let out = rig.path("out.bin");
    let sink = rig.file_sink(out);
    let run = rig.args([srv.url("obj"), sink]).run();
    run.assert_code(1, "early cuts");
    assert!(
        run.stderr.contains("2 attempt(s) in a row"),
        "{}",
        run.stderr
    );
    // The first answer and two resumes, each cut after its 1,000 bytes; each resume took
    // one reconnection (the second after a wait), not the count in a row.
    assert_eq!(srv.requests().len(), 3, "{}", run.stderr);
    assert_bytes_eq(run.held(0).unwrap(), &body[..3_000], "early cuts");
    let attempts: Vec<u64> = http_of(run.report())["resumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["attempts"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 1], "{}", run.report());
}

// ---- copy --resume URL FILE: across runs ----

fn copy(args: &[&str]) -> Finished {
    Rig::new()
        .arg("copy")
        .args(FAST)
        .args(args.iter().copied())
        .run()
}

#[test]
fn copy_resume_continues_a_partial_file_and_restarts_a_changed_object() {
    let v1 = object();
    let dir = crate::util::tempdir();
    let file = dir.path().join("obj.bin");
    let path = file.display().to_string();

    // A first run cut, with no retries: a partial file and its validator.
    let srv = FaultServer::start(
        Object::with_etag(v1.clone(), "v1"),
        vec![Fault::CutFin(1_000_000)],
    );
    let run = copy(&["--resume", "--retries", "0", &srv.url("obj"), &path]);
    run.assert_code(1, "first run");
    let partial = std::fs::read(&file).unwrap();
    assert_eq!(partial.len(), 1_000_000);
    assert_bytes_eq(&partial, &v1[..1_000_000], "partial");
    let kept = http_of(run.report())["validator_kept"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        kept.starts_with("xattr") || kept.starts_with("sidecar"),
        "{kept}"
    );

    // The second continues it: Range from its length, If-Range its validator.
    let run = copy(&["--resume", &srv.url("obj"), &path]);
    run.assert_code(0, "resumed");
    assert_bytes_eq(&std::fs::read(&file).unwrap(), &v1, "resumed");
    let last = srv.requests().pop().unwrap();
    assert_eq!(last.header("Range"), Some("bytes=1000000-"));
    assert_eq!(last.header("If-Range"), Some("\"v1\""));
    assert_eq!(
        http_of(run.report())["resumed_from"],
        1_000_000,
        "{}",
        run.report()
    );
    assert_eq!(run.report_bytes(), v1.len() as u64 - 1_000_000);

    // The object changes; the file, cut again, is fetched whole, not appended to.
    std::fs::write(&file, &v1[..700_000]).unwrap();
    let v2 = data(2 * 1024 * 1024 + 5);
    let srv2 = FaultServer::start(Object::with_etag(v2.clone(), "v2"), vec![]);
    // The kept validator is still v1's (the write above kept the xattr / sidecar).
    let run = copy(&["--resume", &srv2.url("obj"), &path]);
    run.assert_code(0, "restarted");
    assert_bytes_eq(&std::fs::read(&file).unwrap(), &v2, "restarted");
    assert_eq!(http_of(run.report())["resumed_from"], 0, "{}", run.report());
    assert_eq!(srv2.requests()[0].header("If-Range"), Some("\"v1\""));
}

// ---- copy -j N URL FILE ----

#[test]
fn copy_j_fetches_ranges_at_once_and_resumes_each_on_its_own() {
    let body = data(9 * 1024 * 1024 + 3);
    // The probe, then four ranges: the first two answered cut (whichever ranges they are).
    let srv = FaultServer::start(
        Object::with_etag(body.clone(), "v1"),
        vec![Fault::None, Fault::CutRst(300_000), Fault::CutFin(500_000)],
    );
    let dir = crate::util::tempdir();
    let file = dir.path().join("obj.bin");
    let run = copy(&["-j", "4", &srv.url("obj"), &file.display().to_string()]);
    run.assert_code(0, "-j 4");
    assert_bytes_eq(&std::fs::read(&file).unwrap(), &body, "-j 4");
    run.assert_final_path("splice", "-j 4");
    let http = http_of(run.report());
    assert_eq!(http["ranges"], 4, "{http}");
    assert_eq!(resumes(run.report()).len(), 2, "{http}");
    let ranges: Vec<_> = srv
        .requests()
        .iter()
        .map(|r| r.header("Range").map(str::to_string))
        .collect();
    assert_eq!(ranges[0].as_deref(), Some("bytes=0-0"), "the probe");
    assert_eq!(ranges.len(), 1 + 4 + 2, "{ranges:?}");
    // No temporary left beside it.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn copy_j_of_an_object_replaced_between_ranges_leaves_no_file() {
    let v1 = data(6 * 1024 * 1024);
    let srv = FaultServer::start(
        Object::with_etag(v1.clone(), "v1"),
        vec![
            Fault::None,
            Fault::Replace(Object::with_etag(data(6 * 1024 * 1024 + 1), "v2")),
        ],
    );
    let dir = crate::util::tempdir();
    let file = dir.path().join("obj.bin");
    let run = copy(&["-j", "3", &srv.url("obj"), &file.display().to_string()]);
    run.assert_code(1, "replaced between ranges");
    assert!(run.stderr.contains("the object changed"), "{}", run.stderr);
    assert!(!file.exists(), "no file, not a file of two versions");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no temporary left"
    );
}

/// A symlink named as the file of `-j` is written through, as `cp` and a plain copy do:
/// the file it names gets the object, the link stays a link (it was replaced by a regular
/// file: -j renamed its temporary over the link's own name).
#[test]
fn copy_j_onto_a_symlink_writes_through_it() {
    let body = data(3 * 1024 * 1024 + 5);
    let srv = FaultServer::start(Object::with_etag(body.clone(), "v1"), vec![]);
    let dir = crate::util::tempdir();
    let (real, link) = (dir.path().join("real.bin"), dir.path().join("link.bin"));
    std::fs::write(&real, b"old").unwrap();
    std::os::unix::fs::symlink("real.bin", &link).unwrap();
    let run = copy(&["-j", "3", &srv.url("obj"), &link.display().to_string()]);
    run.assert_code(0, "-j 3 onto a symlink");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced"
    );
    assert_bytes_eq(&std::fs::read(&real).unwrap(), &body, "the link's target");
    run.assert_final_path("splice", "-j 3 onto a symlink");
    // No temporary left beside them.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

/// A FIFO (or a device) named as the file of `-j` or `--resume` is a stream sink too: a
/// usage error before any connection, the FIFO left as it was. (It was replaced: -j renamed
/// its temporary over it, exit 0 — over /dev/null too, as root.)
#[test]
fn copy_j_or_resume_into_a_fifo_is_a_usage_error_that_leaves_it_a_fifo() {
    use std::os::unix::fs::FileTypeExt;
    let srv = FaultServer::start(Object::with_etag(data(3000), "v1"), vec![]);
    let dir = crate::util::tempdir();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let path = fifo.display().to_string();
    for args in [["-j", "2"], ["--resume", "--retries=0"]] {
        let run = Rig::new()
            .arg("copy")
            .args(args)
            .args([srv.url("obj"), path.clone()])
            .run();
        let what = args.join(" ");
        run.assert_code(2, &what);
        assert!(
            run.stderr.contains("is a fifo") && run.stderr.contains(&path),
            "{what}: {}",
            run.stderr
        );
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo(),
            "{what}: the FIFO was replaced"
        );
        assert!(srv.requests().is_empty(), "{what}: a request was sent");
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

/// A range of `-j` answered with bytes other than those asked (a Content-Range that does
/// not match) fails the copy, naming the URL: no file, no temporary.
#[test]
fn copy_j_with_a_wrong_content_range_leaves_no_file() {
    let body = data(6 * 1024 * 1024);
    let srv = FaultServer::start(
        Object::with_etag(body, "v1"),
        vec![Fault::None, Fault::WrongContentRange(5)],
    );
    let dir = crate::util::tempdir();
    let file = dir.path().join("obj.bin");
    let run = copy(&["-j", "3", &srv.url("obj"), &file.display().to_string()]);
    run.assert_code(1, "a wrong Content-Range in -j");
    assert!(
        run.stderr.contains("Content-Range") && run.stderr.contains(&srv.url("obj")),
        "{}",
        run.stderr
    );
    assert!(!file.exists(), "a file of the wrong bytes");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no temporary left"
    );
}

#[test]
fn copy_j_into_a_stream_is_a_usage_error_before_any_connection() {
    let srv = FaultServer::start(Object::with_etag(data(10), "v1"), vec![]);
    let run = Rig::new()
        .args(["copy", "-j", "2", &srv.url("obj"), "-"])
        .run();
    run.assert_code(2, "-j into stdout");
    assert!(run.stderr.contains("-j"), "{}", run.stderr);
    assert!(srv.requests().is_empty());
}
