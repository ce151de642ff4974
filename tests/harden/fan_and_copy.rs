//! Hardening of `tee` and `copy` (issue 8, phase 2): the same families as for `pipe` —
//! faults injected with strace, full disks, signals, SIGPIPE — over the shapes these two
//! commands have: several sinks, and files or whole trees.

use std::collections::BTreeMap;

use super::*;

// =============================================================================================
// The tee rig: one source (a file, or stdin fed by the test), several sinks
// =============================================================================================

/// One sink of a tee run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Out {
    /// A regular file in the test's directory.
    File,
    /// A file on the rig's small tmpfs (`small`).
    Small,
    /// zerocat's stdout, a pipe the test reads.
    Stdout,
    /// /dev/full.
    Full,
}

/// `tee SRC SINKS` on `rig` (which holds the options up to `tee`'s own): a source of kind
/// `src` (stdin fed at `pace`), then `sinks` in order (`Out::Small` in `small`).
fn tee_endpoints(
    mut rig: Rig,
    src: Src,
    sinks: &[Out],
    payload: &Arc<Vec<u8>>,
    pace: Pace,
    small: Option<&Path>,
) -> Rig {
    let src = match src {
        Src::File => rig.file("src.bin", payload),
        Src::Pipe => rig.stdin(payload.clone(), pace),
        Src::Socket => unreachable!("the tee rig reads a file or stdin"),
    };
    let mut args = vec![src];
    for (i, out) in sinks.iter().enumerate() {
        args.push(match out {
            Out::File => rig.file_sink(rig.path(&format!("out{i}"))),
            Out::Small => rig.file_sink(small.expect("a small tmpfs").join(format!("out{i}"))),
            Out::Stdout => rig.stdout_sink(Pace::Full),
            Out::Full => rig.device_sink("/dev/full"),
        });
    }
    rig.args(args)
}

/// Sink `i`'s entry in the report.
fn sink_entry(run: &Finished, i: usize) -> &Value {
    &run.report()["sinks"][i]
}

/// Every sink holds exactly the bytes its report entry counts, and they are the start of
/// the payload.
fn check_each_sink(run: &Finished, payload: &[u8]) -> Result<(), String> {
    for (i, held) in run.held_all().iter().enumerate() {
        let reported = sink_entry(run, i)["bytes"].as_u64().ok_or("no bytes")?;
        let Some(held) = held else { continue };
        if held.len() as u64 != reported {
            return Err(format!(
                "sink {i}: the report says {reported} bytes, it holds {}",
                held.len()
            ));
        }
        if payload.get(..held.len()) != Some(&held[..]) {
            return Err(format!(
                "sink {i}: its bytes are not the start of the payload"
            ));
        }
    }
    Ok(())
}

/// Every sink holds the whole payload and its report entry says so.
fn check_every_sink_exact(run: &Finished, payload: &[u8]) -> Result<(), String> {
    check_each_sink(run, payload)?;
    for (i, held) in run.held_all().iter().enumerate() {
        if held.as_ref().is_some_and(|h| h.len() != payload.len()) {
            return Err(format!(
                "sink {i} holds {} bytes",
                held.as_ref().unwrap().len()
            ));
        }
    }
    Ok(())
}

fn tee_shape(src: Src, sinks: &[Out]) -> String {
    let s = match src {
        Src::File => "file",
        Src::Pipe => "pipe",
        Src::Socket => "socket",
    };
    let d: Vec<&str> = sinks
        .iter()
        .map(|o| match o {
            Out::File => "file",
            Out::Small => "file on 1 MiB tmpfs",
            Out::Stdout => "pipe",
            Out::Full => "/dev/full",
        })
        .collect();
    format!("{s}->[{}]", d.join(", "))
}

// =============================================================================================
// Fault injection: tee
// =============================================================================================

/// Who an error message must name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blame {
    Src,
    Sink(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TeeExpect {
    /// The kernel fan-out was refused before any byte moved: the whole run falls back to
    /// the userspace fan-out; exit 0, every sink exact.
    RunFellBack,
    /// One sink's splice out of a pipe was refused before it got a byte: that sink is
    /// written with plain writes (its report entry says so from which path); exit 0, every
    /// sink exact.
    SinkFellBack(usize, &'static str),
    /// Exit 1 naming the endpoint and the errno, no fallback, each sink holds what its
    /// report entry says.
    Error(Blame),
}

struct TeeFault {
    src: Src,
    sinks: &'static [Out],
    syscall: &'static str,
    errno: (&'static str, i32),
    when: u32,
    expect: TeeExpect,
}

/// file -> [file, file]: sink 0 gets a lane pipe (tee, then splice out of it), sink 1 is
/// the consumer spliced straight out of our inbound pipe. Each 1 MiB round is: splice
/// (fill the inbound pipe), tee (into sink 0's lane), splice (consumer), splice (empty the
/// lane into sink 0). So tee call 2 and splice calls 4-6 come after bytes moved.
const FILE_TO_TWO_FILES: &[Out] = &[Out::File, Out::File];
/// stdin (a pipe) -> [stdout (a pipe), file]: no pipe of ours; tee(2) straight from stdin
/// into stdout, then splice stdin -> file consumes. Each round: tee, splice.
const PIPE_TO_PIPE_AND_FILE: &[Out] = &[Out::Stdout, Out::File];

fn tee_fault_cases() -> Vec<TeeFault> {
    use TeeExpect::*;
    let mut cases = Vec::new();
    let mut add = |src, sinks, syscall, errnos: &[(&'static str, i32)], when, expect| {
        for &errno in errnos {
            cases.push(TeeFault {
                src,
                sinks,
                syscall,
                errno,
                when,
                expect,
            });
        }
    };
    let all: Vec<(&str, i32)> = UNSUPPORTED.iter().chain(FATAL).copied().collect();
    let eio = &FATAL[..1];
    let (f, a) = (Src::File, FILE_TO_TWO_FILES);
    add(f, a, "tee", UNSUPPORTED, 1, RunFellBack);
    add(f, a, "tee", eio, 1, Error(Blame::Sink(0)));
    add(f, a, "tee", &all, 2, Error(Blame::Sink(0)));
    add(f, a, "splice", UNSUPPORTED, 1, RunFellBack);
    add(f, a, "splice", eio, 1, Error(Blame::Src));
    add(f, a, "splice", UNSUPPORTED, 2, SinkFellBack(1, "splice"));
    add(f, a, "splice", UNSUPPORTED, 3, SinkFellBack(0, "tee"));
    add(f, a, "splice", &all[..], 4, Error(Blame::Src));
    add(f, a, "splice", &all, 5, Error(Blame::Sink(1)));
    add(f, a, "splice", &all, 6, Error(Blame::Sink(0)));
    let (p, b) = (Src::Pipe, PIPE_TO_PIPE_AND_FILE);
    add(p, b, "tee", UNSUPPORTED, 1, RunFellBack);
    add(p, b, "tee", &all, 2, Error(Blame::Sink(0)));
    add(p, b, "splice", UNSUPPORTED, 1, SinkFellBack(1, "splice"));
    add(p, b, "splice", &all, 2, Error(Blame::Sink(1)));
    cases
}

fn run_tee_fault(case: &TeeFault, payload: &Arc<Vec<u8>>) -> Result<String, String> {
    let logdir = tempdir();
    let log = logdir.path().join("strace.log");
    let action = format!("error={}", case.errno.0);
    let rig = Rig::new()
        .under(strace_wrap(
            &log,
            case.syscall,
            &action,
            &case.when.to_string(),
        ))
        .arg("tee");
    let run = tee_endpoints(rig, case.src, case.sinks, payload, Pace::Full, None).run();
    let what = format!(
        "tee {} {} {action}@{}",
        tee_shape(case.src, case.sinks),
        case.syscall,
        case.when
    );
    let fail = |why: String| -> Result<String, String> {
        Err(format!("{what}: {why}\nstderr: {}", run.stderr))
    };
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    if !log_text.contains("INJECTED") {
        return fail(format!("strace never injected the fault; log:\n{log_text}"));
    }
    let report = run.report();
    let fallbacks = report["fallbacks"].as_array().cloned().unwrap_or_default();
    let errno = case.errno.0;
    let names = |list: &Value, from: &str| {
        list.as_array().is_some_and(|l| {
            l.iter()
                .any(|f| f["from"] == from && f["to"] == "userspace" && f["errno"] == errno)
        })
    };
    match case.expect {
        TeeExpect::RunFellBack | TeeExpect::SinkFellBack(..) => {
            if run.code() != Some(0) {
                return fail(format!("exit {:?}, want 0 after a fallback", run.code()));
            }
            if report["bytes"].as_u64() != Some(payload.len() as u64) {
                return fail(format!("report says {} bytes", report["bytes"]));
            }
            if let Err(why) = check_every_sink_exact(&run, payload) {
                return fail(why);
            }
            let (fell, row) = match case.expect {
                TeeExpect::SinkFellBack(i, from) => (
                    names(&sink_entry(&run, i)["fallbacks"], from) && fallbacks.is_empty(),
                    format!("sink {i} fell back {from} -> userspace"),
                ),
                _ => {
                    let kernel = if case.sinks.len() > 1 {
                        "tee"
                    } else {
                        "splice"
                    };
                    let first = paths(report).first().cloned();
                    (
                        names(&report["fallbacks"], kernel) && first == Some((kernel.into(), 0)),
                        format!("run fell back {kernel} -> userspace"),
                    )
                }
            };
            if !fell {
                return fail(format!("the report does not say: {row}: {report}"));
            }
            Ok(format!(
                "{what} | {row} | every sink exact ({} B)",
                payload.len()
            ))
        }
        TeeExpect::Error(blame) => {
            if run.code() != Some(1) {
                return fail(format!("exit {:?}, want 1", run.code()));
            }
            if report["ended"] != "error" {
                return fail(format!("report ended {}", report["ended"]));
            }
            let any_fallback = !fallbacks.is_empty()
                || (0..case.sinks.len())
                    .any(|i| sink_entry(&run, i)["fallbacks"] != serde_json::json!([]));
            if any_fallback {
                return fail(format!("no fallback allowed here: {report}"));
            }
            let uri = match blame {
                Blame::Src => report["src"]["uri"].as_str().unwrap().to_string(),
                Blame::Sink(i) => {
                    if sink_entry(&run, i)["ended"] != "error"
                        || sink_entry(&run, i)["error"]
                            .as_str()
                            .unwrap()
                            .starts_with("stopped")
                    {
                        return fail(format!("sink {i} is not the one that failed"));
                    }
                    sink_entry(&run, i)["uri"].as_str().unwrap().to_string()
                }
            };
            let message = report["error"].as_str().unwrap_or_default();
            let code = format!("(os error {})", case.errno.1);
            if !message.contains(&format!("'{uri}'")) || !message.contains(&code) {
                return fail(format!("error {message:?} should name '{uri}' and {code}"));
            }
            if !run.stderr.lines().any(|l| l.starts_with("zerocat: cannot")) {
                return fail("no error line on stderr".into());
            }
            if let Err(why) = check_each_sink(&run, payload) {
                return fail(why);
            }
            let held: Vec<String> = run
                .held_all()
                .iter()
                .map(|h| h.as_ref().map_or("-".into(), |h| h.len().to_string()))
                .collect();
            Ok(format!(
                "{what} | clean error naming {uri}, exit 1 | sinks hold [{}] B = reported",
                held.join(", ")
            ))
        }
    }
}

#[test]
fn faults_in_tee_and_splice_of_tee() {
    if strace_missing() {
        return;
    }
    let payload = Arc::new(data(4 << 20));
    run_cases(tee_fault_cases(), |case| run_tee_fault(case, &payload));
}

// =============================================================================================
// SIGPIPE: `zerocat tee big [file] - | head -c 1`
// =============================================================================================

/// stdout's reader goes away: exit 141 at once and nothing on stderr (DESIGN §5), as for
/// `pipe` and as GNU tee killed by SIGPIPE — also when another sink was being fed.
#[test]
fn tee_sigpipe_from_a_closed_stdout_is_141_without_a_message() {
    let payload = data(16 << 20);
    let dir = tempdir();
    let src = crate::util::write_file(dir.path(), "big.bin", &payload);
    let copy = dir.path().join("copy");
    for via in ["auto", "userspace"] {
        for with_file in [false, true] {
            let mut cmd = crate::util::zerocat();
            cmd.args(["--stats", "json", "--via", via, "tee"]).arg(&src);
            if with_file {
                cmd.arg(&copy);
            }
            cmd.arg("-").stdout(Stdio::piped()).stderr(Stdio::piped());
            let name = format!(
                "tee big {}- via {via}",
                if with_file { "file " } else { "" }
            );
            let mut child = cmd.spawn().unwrap();
            let mut stdout = child.stdout.take().unwrap();
            let mut one = [0u8; 1];
            stdout.read_exact(&mut one).unwrap();
            assert_eq!(one[0], payload[0], "{name}");
            drop(stdout);
            let out = crate::util::wait_with_deadline(child, DEADLINE);
            let stderr = crate::util::stderr_text(&out);
            assert_eq!(out.status.code(), Some(141), "{name}: {stderr}");
            assert!(out.stderr.is_empty(), "{name}: {stderr}");
            if with_file {
                let held = std::fs::read(&copy).unwrap();
                assert_bytes_eq(&held, &payload[..held.len()], &name);
            }
            eprintln!("{name} | reader gone | exit 141, silent");
        }
    }
}

// =============================================================================================
// Full disk: one sink on a 1 MiB tmpfs, or /dev/full
// =============================================================================================

/// Sink 0 is full; sinks 1 (a file) and 2 (stdout) are fine. `--on-error=fail`: exit 1
/// naming sink 0 and ENOSPC, every sink holds what its entry says. `continue`: the others
/// get every byte, exit 1 with "1 of 3 sinks failed".
fn tee_into_a_full_sink(full: Out, small: Option<&Path>, payload: &Arc<Vec<u8>>) {
    let sinks = [full, Out::File, Out::Stdout];
    for via in ["auto", "userspace"] {
        for on_error in ["fail", "continue"] {
            let rig = Rig::new()
                .args(["--via", via, "tee"])
                .arg(format!("--on-error={on_error}"));
            let run = tee_endpoints(rig, Src::File, &sinks, payload, Pace::Full, small).run();
            let name = format!(
                "tee {} via {via} --on-error={on_error}",
                tee_shape(Src::File, &sinks)
            );
            assert_eq!(run.code(), Some(1), "{name}: {}", run.stderr);
            let report = run.report();
            let uri = sink_entry(&run, 0)["uri"].as_str().unwrap();
            let line = run
                .stderr
                .lines()
                .find(|l| l.starts_with("zerocat:") && l.contains("cannot write"))
                .unwrap_or_else(|| panic!("{name}: no error line in {}", run.stderr));
            assert!(
                line.contains(&format!("'{uri}'")) && line.contains("No space left on device"),
                "{name}: {line}"
            );
            assert_eq!(sink_entry(&run, 0)["ended"], "error", "{name}");
            let refused_enospc = (0..3).any(|i| {
                sink_entry(&run, i)["fallbacks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f["errno"] == "ENOSPC")
            });
            assert!(!refused_enospc, "{name}: ENOSPC must never fall back");
            check_each_sink(&run, payload).unwrap_or_else(|e| panic!("{name}: {e}"));
            if on_error == "continue" {
                assert!(line.contains("1 of 3 sinks failed"), "{name}: {line}");
                assert_eq!(
                    report["bytes"].as_u64(),
                    Some(payload.len() as u64),
                    "{name}"
                );
                for i in 1..3 {
                    assert_eq!(sink_entry(&run, i)["ended"], "eof", "{name} sink {i}");
                    run.assert_held(i, payload, &format!("{name} sink {i}"));
                }
            }
            let held: Vec<String> = run
                .held_all()
                .iter()
                .map(|h| h.as_ref().map_or("-".into(), |h| h.len().to_string()))
                .collect();
            eprintln!(
                "{name} | clean error ENOSPC naming {uri}, exit 1 | sinks hold [{}] B = reported",
                held.join(", ")
            );
            if let Some(dir) = small {
                std::fs::remove_file(dir.join("out0")).unwrap();
            }
        }
    }
}

#[test]
fn tee_full_disk_on_a_1mib_tmpfs() {
    let Some(fs) = SmallFs::mount("1m") else {
        return;
    };
    tee_into_a_full_sink(Out::Small, Some(fs.path()), &Arc::new(data(3 << 20)));
}

#[test]
fn tee_dev_full_is_enospc() {
    tee_into_a_full_sink(Out::Full, None, &Arc::new(data(3 << 20)));
}

// =============================================================================================
// Signals: tee
// =============================================================================================

/// SIGINT / SIGTERM while a slow stdin feeds [file, stdout]: exit 130, the report printed,
/// and — since tee stops only when every sink is level — every sink holds exactly the
/// bytes the run reports.
#[test]
fn tee_sigint_and_sigterm_mid_transfer() {
    let payload = Arc::new(data(64 << 20));
    let sinks = [Out::File, Out::Stdout];
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        for via in ["auto", "userspace"] {
            let rig = Rig::new().args(["--via", via, "tee"]);
            let mut running = tee_endpoints(rig, Src::Pipe, &sinks, &payload, SLOW, None).start();
            running.wait_for_sink(1, 512 << 10);
            kill(running.pid(), signal).unwrap();
            let run = running.finish();
            let name = format!("tee {} via {via} {signal}", tee_shape(Src::Pipe, &sinks));
            assert_eq!(run.code(), Some(130), "{name}: {}", run.stderr);
            let report = run.report();
            assert_eq!(report["ended"], "signal", "{name}");
            check_each_sink(&run, &payload).unwrap_or_else(|e| panic!("{name}: {e}"));
            let total = report["bytes"].as_u64().unwrap();
            for i in 0..sinks.len() {
                assert_eq!(
                    sink_entry(&run, i)["bytes"].as_u64(),
                    Some(total),
                    "{name} sink {i}"
                );
                assert_eq!(sink_entry(&run, i)["ended"], "signal", "{name} sink {i}");
            }
            assert!(
                total < payload.len() as u64,
                "{name}: the signal came too late"
            );
            eprintln!("{name} | exit 130, report printed | every sink holds {total} B = reported");
        }
    }
}

/// The strict form: the source is a file zerocat shares with the test (`fd:3`), so the
/// shared offset afterwards says how many bytes tee took from it (into its own inbound
/// pipe); stdout is read slowly, so pipes are full when the signal comes. Every byte taken
/// must be in every sink: the inbound and lane pipes were drained before the exit.
#[test]
fn tee_sigint_delivers_every_byte_taken_from_the_source() {
    use std::os::fd::AsRawFd;
    let payload = data(64 << 20);
    let dir = tempdir();
    let src = crate::util::write_file(dir.path(), "src.bin", &payload);
    for via in ["auto", "userspace"] {
        for signal in [Signal::SIGINT, Signal::SIGTERM] {
            let name = format!("tee fd:3 (file) -> [file, slow stdout] via {via} {signal}");
            let file = std::fs::File::open(&src).unwrap();
            let raw = file.as_raw_fd();
            let mut rig = Rig::new().args(["--via", via, "tee", "fd:3"]).fd3(raw);
            let copy = rig.file_sink(rig.path("copy"));
            let stdout = rig.stdout_sink(SLOW);
            let mut running = rig.args([copy, stdout]).start();
            running.wait_for_sink(1, 2 << 20);
            running.signal(signal);
            let run = running.finish();
            run.assert_code(130, &name);
            let report = run.report();
            let taken = nix::unistd::lseek(raw, 0, nix::unistd::Whence::SeekCur).unwrap() as u64;
            let (in_file, kept) = (run.held(0).unwrap(), run.held(1).unwrap());
            assert_eq!(report["ended"], "signal", "{name}");
            assert_eq!(
                report["bytes"].as_u64(),
                Some(taken),
                "{name}: reported != taken"
            );
            assert_eq!(kept.len() as u64, taken, "{name}: stdout != taken");
            assert_eq!(in_file.len() as u64, taken, "{name}: file != taken");
            for (i, held) in [in_file, kept].into_iter().enumerate() {
                assert_eq!(report["sinks"][i]["bytes"].as_u64(), Some(taken), "{name}");
                assert_bytes_eq(held, &payload[..held.len()], &name);
            }
            assert!(
                taken < payload.len() as u64,
                "{name}: the signal came too late"
            );
            eprintln!("{name} | exit 130 | {taken} B taken = in each sink = reported");
        }
    }
}

// =============================================================================================
// The copy rig: one file, or a tree of three files, copied on the test's filesystem
// =============================================================================================

/// The tree's files: distinct sizes (and so distinct contents, `data` seeds on the size).
const TREE: [(&str, usize); 3] = [
    ("a", (1 << 20) + 1),
    ("b", (2 << 20) + 3),
    ("c", (3 << 20) + 5),
];

/// What a copy is asked to do: one file of `len` bytes, or `TREE` with `-r`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    File(usize),
    Tree,
}

/// What each destination file must hold: its source's contents, by destination path.
type Want = BTreeMap<PathBuf, Vec<u8>>;

/// `copy [-r] SRC DST` on `rig`: `what` is written in the rig's directory, copied to `dst`
/// (`dst` in the rig's directory when None). Returns the run started, its destination and
/// what each destination file must hold.
fn start_copy(rig: Rig, what: What, dst: Option<PathBuf>) -> (Running, PathBuf, Want) {
    let dst = dst.unwrap_or_else(|| rig.path("dst"));
    let (src, want) = match what {
        What::File(len) => (
            rig.file("src.bin", &data(len)),
            BTreeMap::from([(dst.clone(), data(len))]),
        ),
        What::Tree => {
            let root = rig.path("tree");
            std::fs::create_dir(&root).unwrap();
            for (name, len) in TREE {
                crate::util::write_file(&root, name, &data(len));
            }
            let want = TREE
                .iter()
                .map(|&(name, len)| (dst.join(name), data(len)))
                .collect();
            (root.display().to_string(), want)
        }
    };
    let rig = rig.arg("copy");
    let rig = match what {
        What::Tree => rig.arg("-r"),
        What::File(_) => rig,
    };
    let running = rig
        .args([std::ffi::OsString::from(src), dst.clone().into_os_string()])
        .start();
    (running, dst, want)
}

fn run_copy(rig: Rig, what: What, dst: Option<PathBuf>) -> (Finished, Want) {
    let (running, _, want) = start_copy(rig, what, dst);
    (running.finish(), want)
}

/// The report's entries.
fn entries(run: &Finished) -> Vec<Value> {
    run.report()["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The entries that failed.
fn failed(run: &Finished) -> Vec<Value> {
    entries(run)
        .into_iter()
        .filter(|e| !e["error"].is_null())
        .collect()
}

/// Bytes a destination (a file, or a directory's files) holds now.
fn bytes_under(dst: &Path) -> u64 {
    match std::fs::read_dir(dst) {
        Ok(list) => list
            .filter_map(|e| e.ok()?.metadata().ok())
            .map(|m| m.len())
            .sum(),
        Err(_) => std::fs::metadata(dst).map_or(0, |m| m.len()),
    }
}

/// Every file entry's destination holds exactly the bytes the entry counts, a prefix of
/// its source (the whole source when the entry has no error); no destination file exists
/// that the report does not account for.
fn check_entries(run: &Finished, want: &Want) -> Result<(), String> {
    let mut seen = Vec::new();
    for e in entries(run).iter().filter(|e| e["kind"] == "file") {
        let dst = PathBuf::from(e["dst"].as_str().unwrap());
        let want = want.get(&dst).ok_or(format!("unexpected entry {e}"))?;
        // A device (/dev/full reads as endless zeros) holds nothing to compare.
        let held = match dst.starts_with("/dev") {
            true => Vec::new(),
            false => std::fs::read(&dst).unwrap_or_default(),
        };
        let bytes = e["bytes"].as_u64().unwrap();
        if held.len() as u64 != bytes {
            return Err(format!(
                "{}: the entry says {bytes} bytes, it holds {}",
                dst.display(),
                held.len()
            ));
        }
        if want.get(..held.len()) != Some(&held[..]) {
            return Err(format!("{}: not the start of its source", dst.display()));
        }
        if e["error"].is_null() && held.len() != want.len() {
            return Err(format!(
                "{}: no error, yet {} of {} bytes",
                dst.display(),
                held.len(),
                want.len()
            ));
        }
        seen.push(dst);
    }
    for path in want.keys() {
        if !seen.contains(path) && path.exists() && !path.starts_with("/dev") {
            return Err(format!(
                "{} exists but no entry accounts for it",
                path.display()
            ));
        }
    }
    Ok(())
}

fn what_name(what: What) -> &'static str {
    match what {
        What::File(_) => "copy file",
        What::Tree => "copy -r tree(3 files)",
    }
}

// =============================================================================================
// Fault injection: copy
// =============================================================================================

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CopyExpect {
    /// Exit 0, every byte, the report names the fallback (from, to) with the errno.
    FellBack(&'static str, &'static str),
    /// Exit 1; one file fails with the errno, named with both paths; every destination
    /// holds what its entry says.
    Error,
}

struct CopyFault {
    what: What,
    /// strace injections (syscall, action, when); the last is the one under test.
    injects: Vec<(&'static str, String, u32)>,
    errno: Option<(&'static str, i32)>,
    expect: CopyExpect,
}

/// The calls a single-file copy makes on ext4: ioctl 1 is std's isatty of stderr, ioctl 2
/// FICLONE (EOPNOTSUPP here; the test checks the injected call *is* FICLONE, so a shifted
/// count fails loudly). copy_file_range 1 moves the 4 MiB, 2 says EOF. With copy_file_range
/// refused (EXDEV), splice goes through our pipe: 1 asks the sink (non-blocking, empty
/// pipe), 2 fills our pipe, 3 empties it into the file, 4 refills.
/// In the tree, each file's copy_file_range takes two calls: 3 is the second file's first,
/// 4 its second (after bytes moved).
fn copy_fault_cases() -> Vec<CopyFault> {
    use CopyExpect::*;
    let mut cases = Vec::new();
    let file = What::File(4 << 20);
    let mut add =
        |what, injects: &[(&'static str, &str, u32)], errnos: &[(&'static str, i32)], expect| {
            for &errno in errnos {
                let mut list: Vec<(&'static str, String, u32)> = injects
                    .iter()
                    .map(|&(s, a, w)| (s, a.to_string(), w))
                    .collect();
                let last = list.last_mut().unwrap();
                last.1 = format!("error={}", errno.0);
                cases.push(CopyFault {
                    what,
                    injects: list,
                    errno: Some(errno),
                    expect,
                });
            }
        };
    let fatal = FATAL;
    let eio = &FATAL[..1];
    let all: Vec<(&str, i32)> = UNSUPPORTED.iter().chain(FATAL).copied().collect();
    let cfr_no = ("copy_file_range", "error=EXDEV", 1);
    add(
        file,
        &[("ioctl", "", 2)],
        UNSUPPORTED,
        FellBack("reflink", "copy_file_range"),
    );
    add(file, &[("ioctl", "", 2)], fatal, Error);
    add(
        file,
        &[("copy_file_range", "", 1)],
        UNSUPPORTED,
        FellBack("copy_file_range", "splice"),
    );
    add(file, &[("copy_file_range", "", 1)], eio, Error);
    add(file, &[("copy_file_range", "", 2)], &all, Error);
    for when in 1..=3 {
        add(
            file,
            &[cfr_no, ("splice", "", when)],
            UNSUPPORTED,
            FellBack("splice", "userspace"),
        );
    }
    add(file, &[cfr_no, ("splice", "", 3)], fatal, Error);
    add(file, &[cfr_no, ("splice", "", 4)], &all, Error);
    add(
        What::Tree,
        &[("copy_file_range", "", 1)],
        UNSUPPORTED,
        FellBack("copy_file_range", "splice"),
    );
    add(What::Tree, &[("copy_file_range", "", 4)], &all, Error);
    // Faked returns: a first copy_file_range of 0 is not trusted as EOF; a FICLONE that
    // says success but copied nothing is not trusted either.
    for (what, when) in [(file, 1), (What::Tree, 3)] {
        cases.push(CopyFault {
            what,
            injects: vec![("copy_file_range", "retval=0".into(), when)],
            errno: None,
            expect: FellBack("copy_file_range", "splice"),
        });
    }
    cases.push(CopyFault {
        what: file,
        injects: vec![("ioctl", "retval=0".into(), 2)],
        errno: None,
        expect: Error,
    });
    cases
}

fn run_copy_fault(case: &CopyFault) -> Result<String, String> {
    let logdir = tempdir();
    let log = logdir.path().join("strace.log");
    let syscalls: Vec<&str> = case.injects.iter().map(|i| i.0).collect();
    let mut wrap: Vec<String> = vec![
        "strace".into(),
        "-f".into(),
        "-qq".into(),
        "-o".into(),
        log.display().to_string(),
        "-e".into(),
        format!("trace={}", syscalls.join(",")),
    ];
    for (syscall, action, when) in &case.injects {
        wrap.push("-e".into());
        wrap.push(format!("inject={syscall}:{action}:when={when}"));
    }
    let (run, want) = run_copy(Rig::new().under(wrap), case.what, None);
    let (syscall, action, when) = case.injects.last().unwrap();
    let what = format!("{} {syscall} {action}@{when}", what_name(case.what));
    let what = match case.injects.len() {
        1 => what,
        _ => format!("{what} (copy_file_range refused: EXDEV@1)"),
    };
    let fail = |why: String| -> Result<String, String> {
        Err(format!("{what}: {why}\nstderr: {}", run.stderr))
    };
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    let injected = log_text.lines().any(|l| {
        l.contains("INJECTED")
            && l.contains(&format!("{syscall}("))
            && (*syscall != "ioctl" || l.contains("FICLONE"))
    });
    if !injected {
        return fail(format!(
            "strace never injected into {syscall} (FICLONE for ioctl); log:\n{log_text}"
        ));
    }
    let report = run.report();
    let fallbacks = report["fallbacks"].as_array().cloned().unwrap_or_default();
    let errno = case.errno.map_or("returned 0", |e| e.0);
    match case.expect {
        CopyExpect::FellBack(from, to) => {
            if run.code() != Some(0) {
                return fail(format!("exit {:?}, want 0 after a fallback", run.code()));
            }
            let total: usize = want.values().map(Vec::len).sum();
            if report["bytes"].as_u64() != Some(total as u64) {
                return fail(format!(
                    "report says {} bytes, want {total}",
                    report["bytes"]
                ));
            }
            if let Err(why) = check_entries(&run, &want) {
                return fail(why);
            }
            if !fallbacks
                .iter()
                .any(|f| f["from"] == from && f["to"] == to && f["errno"] == errno)
            {
                return fail(format!(
                    "fallbacks {fallbacks:?} do not name {from} -> {to} ({errno})"
                ));
            }
            Ok(format!(
                "{what} | fell back {from} -> {to} | exact ({total} B)"
            ))
        }
        CopyExpect::Error => {
            if run.code() != Some(1) {
                return fail(format!("exit {:?}, want 1", run.code()));
            }
            if report["ended"] != "error" {
                return fail(format!("report ended {}", report["ended"]));
            }
            let failed = failed(&run);
            if failed.len() != 1 {
                return fail(format!("want exactly one failed entry, got {failed:?}"));
            }
            let (src, dst) = (
                failed[0]["src"].as_str().unwrap(),
                failed[0]["dst"].as_str().unwrap(),
            );
            let line = format!("zerocat: cannot copy '{src}' to '{dst}': ");
            let Some(message) = run.stderr.lines().find(|l| l.starts_with(&line)) else {
                return fail(format!("no line {line:?}"));
            };
            if let Some((_, code)) = case.errno {
                if !message.contains(&format!("(os error {code})")) {
                    return fail(format!("{message:?} does not carry the errno"));
                }
            }
            // (Other paths may have fallen back before: reflink on ext4, an injected EXDEV.)
            let path = match *syscall {
                "ioctl" => "reflink",
                other => other,
            };
            if fallbacks
                .iter()
                .any(|f| f["from"] == path && f["errno"] == errno)
            {
                return fail(format!("{path} must not fall back here, got {fallbacks:?}"));
            }
            if case.what == What::Tree && !run.stderr.contains("1 of 4 entries could not be copied")
            {
                return fail("no '1 of 4 entries' line".into());
            }
            if let Err(why) = check_entries(&run, &want) {
                return fail(why);
            }
            Ok(format!(
                "{what} | clean error naming both paths, exit 1 | {} B delivered = entry; others exact",
                failed[0]["bytes"]
            ))
        }
    }
}

#[test]
fn faults_in_copy() {
    if strace_missing() {
        return;
    }
    run_cases(copy_fault_cases(), run_copy_fault);
}

// =============================================================================================
// Full disk: copy
// =============================================================================================

/// A file (3 MiB) or the tree (6 MiB) into a 1 MiB tmpfs, or a file to /dev/full: exit 1,
/// each failed file named with ENOSPC, every destination holds what its entry says.
#[track_caller]
fn assert_copy_disk_full(run: &Finished, want: &Want, name: &str) {
    assert_eq!(run.code(), Some(1), "{name}: {}", run.stderr);
    let failed = failed(run);
    assert!(!failed.is_empty(), "{name}: no entry failed");
    for e in &failed {
        let (src, dst) = (e["src"].as_str().unwrap(), e["dst"].as_str().unwrap());
        let line = format!("zerocat: cannot copy '{src}' to '{dst}': ");
        let message = run
            .stderr
            .lines()
            .find(|l| l.starts_with(&line))
            .unwrap_or_else(|| panic!("{name}: no line {line:?} in {}", run.stderr));
        assert!(
            message.contains("No space left on device"),
            "{name}: {message}"
        );
    }
    let refused_enospc = run.report()["fallbacks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["errno"] == "ENOSPC");
    assert!(!refused_enospc, "{name}: ENOSPC must never fall back");
    check_entries(run, want).unwrap_or_else(|e| panic!("{name}: {e}"));
}

#[test]
fn copy_full_disk_on_a_1mib_tmpfs() {
    let Some(fs) = SmallFs::mount("1m") else {
        return;
    };
    for what in [What::File(3 << 20), What::Tree] {
        for via in ["auto", "userspace"] {
            let rig = Rig::new().args(["--via", via]);
            let (run, want) = run_copy(rig, what, Some(fs.path().join("dst")));
            let name = format!("{} via {via} (1 MiB tmpfs)", what_name(what));
            assert_copy_disk_full(&run, &want, &name);
            let held: u64 = entries(&run)
                .iter()
                .filter_map(|e| e["bytes"].as_u64())
                .sum();
            assert!(held > 0, "{name}: the tmpfs took no byte at all?");
            eprintln!(
                "{name} | clean error ENOSPC naming {} file(s), exit 1 | {held} B delivered = held",
                failed(&run).len()
            );
            let dst = fs.path().join("dst");
            let _ = std::fs::remove_dir_all(&dst).or_else(|_| std::fs::remove_file(&dst));
        }
    }
}

#[test]
fn copy_to_dev_full_is_enospc() {
    for via in ["auto", "userspace"] {
        let rig = Rig::new().args(["--via", via]);
        let (run, want) = run_copy(rig, What::File(1 << 20), Some("/dev/full".into()));
        let name = format!("copy file /dev/full via {via}");
        assert_copy_disk_full(&run, &want, &name);
        assert_eq!(run.report()["bytes"].as_u64(), Some(0), "{name}");
        eprintln!("{name} | clean error ENOSPC, exit 1 | 0 B delivered");
    }
}

// =============================================================================================
// Signals: copy
// =============================================================================================

/// SIGINT / SIGTERM while a big file, or the tree, is copied under `--limit`
/// (so there is a "mid-transfer" to hit): exit 130, the report printed, every destination
/// holds exactly what its entry says, and no file past the stop was created.
#[test]
fn copy_sigint_and_sigterm_mid_transfer() {
    for what in [What::File(64 << 20), What::Tree] {
        for signal in [Signal::SIGINT, Signal::SIGTERM] {
            for via in ["auto", "userspace"] {
                let rig = Rig::new().args(["--via", via, "--limit", "8M"]);
                let (mut running, dst, want) = start_copy(rig, what, None);
                let n = match what {
                    What::File(_) => 1 << 20,
                    What::Tree => (2 << 20) + 100,
                };
                running.wait_until("the destination", n, || bytes_under(&dst));
                running.signal(signal);
                let run = running.finish();
                let name = format!("{} via {via} --limit 8M {signal}", what_name(what));
                assert_eq!(run.code(), Some(130), "{name}: {}", run.stderr);
                assert_eq!(run.report()["ended"], "signal", "{name}");
                check_entries(&run, &want).unwrap_or_else(|e| panic!("{name}: {e}"));
                let total: usize = want.values().map(Vec::len).sum();
                let bytes = run.report()["bytes"].as_u64().unwrap();
                assert!(bytes < total as u64, "{name}: the signal came too late");
                eprintln!("{name} | exit 130, report printed | {bytes} B delivered = held");
            }
        }
    }
}
