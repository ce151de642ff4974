//! `tee` under faults (issue 8, phase 2): the families of `pipe` — faults injected with
//! strace, full disks, signals, SIGPIPE — over several sinks.

use super::*;

// =============================================================================================
// The tee under test: one source (a file, or stdin fed by the test), several sinks
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
            let code = format!("({})", case.errno.0);
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
    let Some(fs) = Mounted::tmpfs("1m") else {
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
            running.signal(signal);
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
