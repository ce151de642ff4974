//! `copy` under faults (issue 8, phase 2): the families of `pipe` — faults injected with
//! strace, full disks, signals — over one file or a whole tree.

use std::collections::BTreeMap;

use super::*;

// =============================================================================================
// The copy under test: one file, or a tree of three files, copied on the test's filesystem
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
    start_copy_with(rig, what, dst, &[])
}

/// [`start_copy`] with copy's own `flags` after `copy`.
fn start_copy_with(
    rig: Rig,
    what: What,
    dst: Option<PathBuf>,
    flags: &[&str],
) -> (Running, PathBuf, Want) {
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
    let rig = rig.arg("copy").args(flags);
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
    let whens: Vec<String> = case.injects.iter().map(|i| i.2.to_string()).collect();
    let injects: Vec<(&str, &str, &str)> = case
        .injects
        .iter()
        .zip(&whens)
        .map(|((syscall, action, _), when)| (*syscall, action.as_str(), when.as_str()))
        .collect();
    let wrap = strace_injecting(&log, &injects);
    // strace counts `when=` per thread: the calls are numbered as one thread makes them
    // (tests/parallel.rs injects into `-j` copies by path instead).
    let (running, _, want) = start_copy_with(Rig::new().under(wrap), case.what, None, &["-j", "1"]);
    let run = running.finish();
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
            if let Some((name, _)) = case.errno {
                if !message.contains(&format!("({name})")) {
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
    let Some(fs) = Mounted::tmpfs("1m") else {
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
