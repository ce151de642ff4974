//! `copy -j N`: files copied by a pool of workers while the walk goes on. The copy is the
//! one of `-j 1` byte for byte and entry for entry, in the same order; directories get
//! their metadata after their entries; `--limit` and the progress count hold for the whole
//! run; SIGINT stops every worker (exit 130, the report); a symlink swapped in after the
//! listing is not followed by a worker either. (The differential test against cp runs
//! every case with -j 1 and -j 4: audit::differential.)

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::rig::Rig;
use crate::util::{
    assert_bytes_eq, data, json_report, run, stderr_text, tempdir, wait_with_deadline, write_file,
    zerocat, DEADLINE,
};

/// A tree of `dirs` directories (nested two deep) holding `files` files of assorted sizes
/// (0 to ~300 KiB, one of 1 MiB + 1), a few symlinks, and modes and times of its own on
/// every directory, so a directory whose metadata were set before its entries shows.
fn make_tree(root: &Path, dirs: usize, files: usize) -> Vec<PathBuf> {
    fs::create_dir(root).unwrap();
    let mut dir_paths = vec![root.to_path_buf()];
    for d in 0..dirs {
        let parent = dir_paths[d / 3].clone();
        let dir = parent.join(format!("d{d:02}"));
        fs::create_dir(&dir).unwrap();
        dir_paths.push(dir);
    }
    let mut file_paths = Vec::new();
    for f in 0..files {
        let dir = &dir_paths[f % dir_paths.len()];
        let len = match f {
            7 => (1 << 20) + 1,
            f => (f * 2_731) % 300_000,
        };
        let mut bytes = data(len + f);
        bytes.truncate(len);
        file_paths.push(write_file(dir, &format!("f{f:03}"), &bytes));
    }
    for (i, dir) in dir_paths.iter().enumerate().skip(1).step_by(4) {
        std::os::unix::fs::symlink(format!("../gone{i}"), dir.join("link")).unwrap();
    }
    // Deepest first: setting a directory's times must not be undone by its children's.
    for (i, dir) in dir_paths.iter().enumerate().rev() {
        let mode = [0o755, 0o750, 0o700, 0o555][i % 4];
        fs::set_permissions(dir, fs::Permissions::from_mode(mode)).unwrap();
        let t = nix::sys::time::TimeSpec::new(1_000_000_000 + i as i64 * 86_400, 0);
        nix::sys::stat::utimensat(
            None,
            dir,
            &t,
            &t,
            nix::sys::stat::UtimensatFlags::NoFollowSymlink,
        )
        .unwrap();
    }
    file_paths
}

/// Runs `zerocat -v --stats json copy FLAGS... ARGS...`.
fn copy(flags: &[&str], args: &[&Path]) -> Output {
    let mut cmd = zerocat();
    cmd.args(["-v", "--stats", "json", "copy"])
        .args(flags)
        .args(args);
    run(cmd)
}

/// The report's entries as (src, dst under `dst`, kind, bytes, error), in order.
fn entries(report: &Value, dst: &Path) -> Vec<(String, String, String, u64, Value)> {
    report["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            let to = Path::new(e["dst"].as_str().unwrap());
            (
                e["src"].as_str().unwrap().to_string(),
                to.strip_prefix(dst).unwrap().display().to_string(),
                e["kind"].as_str().unwrap().to_string(),
                e["bytes"].as_u64().unwrap(),
                e["error"].clone(),
            )
        })
        .collect()
}

/// The `'SRC' -> 'DST'` of every `-v` and error line, `dst` cut to what lies under it.
fn entry_lines(out: &Output, dst: &Path) -> Vec<String> {
    let dst = dst.display().to_string();
    stderr_text(out)
        .lines()
        .filter(|l| l.starts_with("zerocat: '") || l.starts_with("zerocat: cannot copy"))
        .map(|l| {
            let l = l.replace(&dst, "DST");
            // What the line says after the names: the route may differ (each worker
            // probes a path the filesystems refuse once), the names and order may not.
            match l.find("': ") {
                Some(end) => l[..end + 1].to_string(),
                None => l,
            }
        })
        .collect()
}

/// Every file, symlink and directory of `copy` matches `src`'s (bytes, target, mode,
/// mtime), and nothing else is there.
fn assert_same_tree(src: &Path, copy: &Path, what: &str) {
    let (s, c) = (
        fs::symlink_metadata(src).unwrap(),
        fs::symlink_metadata(copy).unwrap_or_else(|e| panic!("{what}: {copy:?}: {e}")),
    );
    assert_eq!(s.file_type(), c.file_type(), "{what}: {copy:?}");
    if s.file_type().is_symlink() {
        assert_eq!(fs::read_link(src).unwrap(), fs::read_link(copy).unwrap());
        return;
    }
    assert_eq!(s.mode(), c.mode(), "{what}: mode of {copy:?}");
    if s.is_file() {
        let name = format!("{what}: {copy:?}");
        assert_bytes_eq(&fs::read(copy).unwrap(), &fs::read(src).unwrap(), &name);
        return;
    }
    // Set after its last entry was made, or a later entry would have moved it.
    assert_eq!(
        (s.mtime(), s.mtime_nsec()),
        (c.mtime(), c.mtime_nsec()),
        "{what}: mtime of directory {copy:?}"
    );
    let names = |d: &Path| {
        let mut n: Vec<_> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        n.sort();
        n
    };
    let (ns, nc) = (names(src), names(copy));
    assert_eq!(ns, nc, "{what}: entries of {copy:?}");
    for name in ns {
        assert_same_tree(&src.join(&name), &copy.join(&name), what);
    }
}

/// A tree of 400 files in 13 directories, copied with `--preserve` by -j 1 and -j 4 (into
/// ext4 and tmpfs): byte-exact, each directory's mode and mtime the source's (set after
/// its entries), and the report's entries and the `-v` lines the same, in the same order
/// (the walk's): every directory listed after everything under it.
#[test]
fn j4_copies_a_tree_as_j1_does_entry_for_entry_in_the_same_order() {
    let dir = tempdir();
    let src = dir.path().join("tree");
    make_tree(&src, 12, 400);
    let shm = tempfile::Builder::new()
        .prefix("zerocat-test")
        .tempdir_in("/dev/shm")
        .unwrap();
    for (fs_name, place) in [("ext4", dir.path()), ("tmpfs", shm.path())] {
        let mut runs = Vec::new();
        for jobs in ["1", "4"] {
            let dst = place.join(format!("j{jobs}"));
            let out = copy(&["-r", "--preserve", "-j", jobs], &[&src, &dst]);
            let what = format!("-j {jobs} into {fs_name}");
            assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr_text(&out));
            let plan = format!("; {jobs} job{}", if jobs == "1" { "" } else { "s" });
            assert!(
                stderr_text(&out).contains(&plan),
                "{what}: no '{plan}' in the plan"
            );
            assert_same_tree(&src, &dst, &what);
            let report = json_report(&out.stderr);
            assert_eq!(report["files"].as_u64(), Some(400), "{what}");
            assert_eq!(report["dirs"].as_u64(), Some(13), "{what}");
            assert_eq!(report["symlinks"].as_u64(), Some(3), "{what}");
            let total: u64 = walk_bytes(&src);
            assert_eq!(report["bytes"].as_u64(), Some(total), "{what}");
            let list = entries(&report, &dst);
            assert_eq!(list.len(), 416, "{what}");
            // The walk's order: a directory after every entry under it.
            for (i, (from, ..)) in list.iter().enumerate() {
                let inside = list[i + 1..]
                    .iter()
                    .any(|(later, ..)| Path::new(later).starts_with(from) && later != from);
                assert!(!inside, "{what}: an entry under {from} comes after it");
            }
            runs.push((list, entry_lines(&out, &dst)));
        }
        assert_same_order(&runs[0].0, &runs[1].0, &format!("{fs_name}: the entries"));
        assert_same_order(&runs[0].1, &runs[1].1, &format!("{fs_name}: the -v lines"));
        eprintln!(
            "into {fs_name}: -j 1 and -j 4 agree on {} entries, in order, byte-exact",
            runs[0].0.len()
        );
    }
}

/// The same items in the same order under -j 1 (`one`) and -j 4 (`four`); a failure
/// shows the first place they part.
#[track_caller]
fn assert_same_order<T: PartialEq + std::fmt::Debug>(one: &[T], four: &[T], what: &str) {
    if let Some(i) = (0..one.len().max(four.len())).find(|&i| one.get(i) != four.get(i)) {
        panic!(
            "{what} of -j 1 and -j 4 part at {i} of {}/{}: {:?} vs {:?}",
            one.len(),
            four.len(),
            one.get(i),
            four.get(i)
        );
    }
}

fn walk_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let m = fs::symlink_metadata(e.as_ref().unwrap().path()).unwrap();
            match () {
                _ if m.is_dir() => walk_bytes(&e.unwrap().path()),
                _ if m.is_file() => m.len(),
                _ => 0,
            }
        })
        .sum()
}

/// Files that fail in the workers' hands (a directory where the copy of a file goes) are
/// named on stderr in the walk's order, as with -j 1; the rest is copied; exit 1.
#[test]
fn j4_names_each_failed_file_in_the_walk_order() {
    let dir = tempdir();
    let src = dir.path().join("tree");
    let files = make_tree(&src, 3, 40);
    let mut lines = Vec::new();
    for jobs in ["1", "4"] {
        // DST exists, so the copy is DST/tree (cp's rule), where two files cannot be
        // written: a directory is in the way.
        let dst = dir.path().join(format!("j{jobs}"));
        let copied = dst.join("tree");
        for victim in [&files[5], &files[30]] {
            let rel = victim.strip_prefix(&src).unwrap();
            fs::create_dir_all(copied.join(rel)).unwrap();
        }
        let out = copy(&["-r", "-j", jobs], &[&src, &dst]);
        let what = format!("-j {jobs}");
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr_text(&out));
        let report = json_report(&out.stderr);
        assert_eq!(report["failed"].as_u64(), Some(2), "{what}");
        assert_eq!(report["files"].as_u64(), Some(38), "{what}");
        let failed: Vec<_> = entry_lines(&out, &dst)
            .into_iter()
            .filter(|l| l.starts_with("zerocat: cannot copy"))
            .collect();
        assert_eq!(failed.len(), 2, "{what}: {failed:?}");
        for (i, file) in files.iter().enumerate() {
            if i == 5 || i == 30 {
                continue;
            }
            let copy = copied.join(file.strip_prefix(&src).unwrap());
            assert_bytes_eq(&fs::read(copy).unwrap(), &fs::read(file).unwrap(), &what);
        }
        lines.push(entry_lines(&out, &dst));
    }
    assert_same_order(&lines[0], &lines[1], "the lines");
}

/// Several operands into a directory are handed out too, and reported in operand order.
#[test]
fn j3_copies_several_operands_in_their_order() {
    let dir = tempdir();
    let names = ["c", "a", "e", "b", "d"];
    let sources: Vec<PathBuf> = names
        .iter()
        .enumerate()
        .map(|(i, n)| write_file(dir.path(), n, &data(100_000 * i + 7)))
        .collect();
    let dst = dir.path().join("into");
    fs::create_dir(&dst).unwrap();
    let mut args: Vec<&Path> = sources.iter().map(PathBuf::as_path).collect();
    args.push(&dst);
    let out = copy(&["-j", "3"], &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let report = json_report(&out.stderr);
    let order: Vec<String> = entries(&report, &dst).into_iter().map(|e| e.1).collect();
    assert_eq!(order, names);
    for (name, src) in names.iter().zip(&sources) {
        let got = fs::read(dst.join(name)).unwrap();
        assert_bytes_eq(&got, &fs::read(src).unwrap(), name);
    }
}

/// `-j 0` and a count that is not one are usage errors: exit 2, nothing written.
#[test]
fn j0_and_a_bad_count_are_usage_errors() {
    let dir = tempdir();
    let src = dir.path().join("tree");
    make_tree(&src, 2, 5);
    for bad in ["0", "many", "-3"] {
        let dst = dir.path().join("dst");
        let mut cmd = zerocat();
        cmd.args(["copy", "-r", "-j", bad]).arg(&src).arg(&dst);
        let out = run(cmd);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "-j {bad}: {err}");
        assert!(err.contains(bad), "-j {bad}: {err}");
        assert!(!dst.exists(), "-j {bad}: something was written");
    }
}

/// `--limit` holds the whole copy, not each worker: 4 files of 1 MiB at 2 MiB/s with
/// four workers take about 2 s (each worker paced alone would take 0.5 s). SIGUSR1 midway
/// prints the run's count, bytes and files.
#[test]
fn j4_limit_paces_the_whole_copy_and_sigusr1_counts_all_workers() {
    let rig = Rig::new().args(["--limit", "2M", "copy", "-r", "-j", "4"]);
    let src = rig.path("tree");
    fs::create_dir(&src).unwrap();
    let mut want = Vec::new();
    for i in 0..4 {
        want.push(data((1 << 20) + i));
        write_file(&src, &format!("f{i}"), &want[i]);
    }
    let dst = rig.path("dst");
    let started = Instant::now();
    let mut running = rig.arg(&src).arg(&dst).start();
    let held = || {
        (0..4)
            .map(|i| fs::metadata(dst.join(format!("f{i}"))).map_or(0, |m| m.len()))
            .sum::<u64>()
    };
    running.wait_until("the copies", 1 << 20, held);
    running.signal(Signal::SIGUSR1);
    let run = running.finish();
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert!(
        seconds >= 1.2,
        "4 MiB at --limit 2M took {seconds:.2} s: each worker paced alone?"
    );
    for (i, want) in want.iter().enumerate() {
        let got = fs::read(dst.join(format!("f{i}"))).unwrap();
        assert_bytes_eq(&got, want, &format!("f{i}"));
    }
    let line = run
        .stderr
        .lines()
        .find(|l| l.contains(" done") || l.contains(" files"))
        .unwrap_or_else(|| panic!("no SIGUSR1 line: {}", run.stderr));
    assert!(line.contains("file"), "{line}");
    eprintln!("-j 4 --limit 2M: 4 MiB in {seconds:.2} s; SIGUSR1: {line}");
}

/// SIGINT (and SIGTERM) mid-copy under -j 4: every worker stops, exit 130 soon after, the
/// report printed; each destination holds exactly what its entry says, a prefix of its
/// source, and a file reported copied is whole.
#[test]
fn j4_sigint_stops_every_worker_with_130_and_the_report() {
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        let rig = Rig::new().args(["--limit", "8M", "copy", "-r", "-j", "4"]);
        let src = rig.path("tree");
        fs::create_dir(&src).unwrap();
        let sizes: Vec<usize> = (0..12).map(|i| (3 << 20) + i * 4099).collect();
        for (i, &len) in sizes.iter().enumerate() {
            write_file(&src, &format!("f{i:02}"), &data(len));
        }
        let dst = rig.path("dst");
        let mut running = rig.arg(&src).arg(&dst).start();
        let held = || {
            fs::read_dir(&dst).map_or(0, |l| {
                l.filter_map(|e| e.ok()?.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
        };
        running.wait_until("the copies", 2 << 20, held);
        running.signal(signal);
        let signalled = Instant::now();
        let run = running.finish();
        let after = signalled.elapsed();
        let name = format!("-j 4 {signal}");
        assert_eq!(run.code(), Some(130), "{name}: {}", run.stderr);
        assert!(
            after < Duration::from_secs(3),
            "{name}: ended {after:?} after"
        );
        let report = run.report();
        assert_eq!(report["ended"], "signal", "{name}");
        let total: usize = sizes.iter().sum();
        let bytes = report["bytes"].as_u64().unwrap();
        assert!(bytes < total as u64, "{name}: the signal came too late");
        let mut counted = 0;
        for e in report["entries"].as_array().unwrap() {
            let (from, to) = (e["src"].as_str().unwrap(), e["dst"].as_str().unwrap());
            if e["kind"] != "file" {
                continue;
            }
            let got = fs::read(to).unwrap_or_default();
            let want = fs::read(from).unwrap();
            assert_eq!(e["bytes"].as_u64(), Some(got.len() as u64), "{name}: {to}");
            assert_bytes_eq(&got, &want[..got.len()], &format!("{name}: {to}"));
            if e["error"].is_null() {
                assert_eq!(got.len(), want.len(), "{name}: {to} reported whole");
            }
            counted += got.len();
        }
        assert_eq!(
            counted as u64, bytes,
            "{name}: the report's bytes are the files'"
        );
        // No file the report does not know of: nothing was written after the report.
        let on_disk = held();
        assert_eq!(on_disk, bytes, "{name}: bytes on disk");
        eprintln!("{name}: exit 130 {after:?} after the signal, {bytes} B = held");
    }
}

/// The walk lists the directory, then a worker opens the file: a symlink swapped in for it
/// in between is not followed (openat at the directory's fd, O_NOFOLLOW), as without -j.
/// strace delays the worker's open of the file; the operand is relative, so the walk's own
/// open of the tree (at the cwd) is not the one delayed.
#[test]
fn j2_does_not_follow_a_symlink_swapped_in_after_the_listing() {
    if crate::util::strace_missing() {
        return;
    }
    let dir = tempdir();
    let src = dir.path().join("tree");
    fs::create_dir(&src).unwrap();
    let victim = write_file(&src, "victim", &data(5000));
    let secret = write_file(dir.path(), "secret", &b"SECRET-SECRET-SECRET\n".repeat(100));
    let child = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=openat,open"])
        // Per thread, the first open at the tree's fd: the victim's.
        .args(["-e", "inject=openat,open:delay_enter=1500000:when=1"])
        .arg("-P")
        .arg(&src)
        .arg(crate::util::bin())
        .args(["--stats", "json", "copy", "-r", "-j", "2", "tree", "dst"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(700));
    fs::remove_file(&victim).unwrap();
    std::os::unix::fs::symlink(&secret, &victim).unwrap();
    let out = wait_with_deadline(child, DEADLINE);
    let text = stderr_text(&out);
    if let Ok(got) = fs::read(dir.path().join("dst/victim")) {
        assert!(
            !got.windows(20).any(|w| w == b"SECRET-SECRET-SECRET"),
            "the secret's bytes reached the copy: {text}"
        );
    }
    let report = json_report(&out.stderr);
    let e = &report["entries"][0];
    assert_eq!(e["src"], "tree/victim", "{report}");
    assert!(
        e["error"]
            .as_str()
            .is_some_and(|m| m.contains("symbolic link")),
        "the swapped file is reported failed: {report}"
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
}
