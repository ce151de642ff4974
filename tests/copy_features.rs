//! `copy` for scripts: `--update`, `--sync`, `--verify`, `--atomic`, `--debug` (issue 17).

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::util::{
    assert_bytes_eq, data, json_report, run, stderr_text, tempdir, write_file, zerocat, Mounted,
};

/// Runs `zerocat --stats json copy FLAGS... ARGS...`: (exit code, report, stderr).
fn copy_with(flags: &[&str], args: &[&Path]) -> (i32, Value, String) {
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "copy"]).args(flags).args(args);
    let out = run(cmd);
    let err = stderr_text(&out);
    let report = if err.contains('{') {
        json_report(&out.stderr)
    } else {
        Value::Null
    };
    (out.status.code().unwrap_or(-1), report, err)
}

fn set_mtime(path: &Path, t: SystemTime) {
    let since = t.duration_since(SystemTime::UNIX_EPOCH).unwrap();
    let spec = nix::sys::time::TimeSpec::new(since.as_secs() as i64, since.subsec_nanos() as i64);
    nix::sys::stat::utimensat(
        None,
        path,
        &spec,
        &spec,
        nix::sys::stat::UtimensatFlags::FollowSymlink,
    )
    .unwrap();
}

fn entry_skipped(report: &Value, name: &str) -> bool {
    report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["dst"].as_str().unwrap().ends_with(name))
        .unwrap_or_else(|| panic!("no entry for {name}: {report}"))["skipped"]
        .as_bool()
        .unwrap()
}

/// `--update` (older): a destination older than its source is replaced, one as new or
/// newer is kept and counted; `--update=none` keeps every one; `--update=all` none.
#[test]
fn update_replaces_only_older_destinations() {
    let dir = tempdir();
    let src = dir.path().join("src");
    fs::create_dir(&src).unwrap();
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    let (a, b, c) = (data(10_000), data(20_000), data(30_000));
    for (name, bytes) in [("a", &a), ("b", &b), ("c", &c)] {
        write_file(&src, name, bytes);
        set_mtime(&src.join(name), now - hour);
    }
    let dst = dir.path().join("dst");
    fs::create_dir(&dst).unwrap();
    // a: older than its source; b: newer; c: the same time to the nanosecond.
    write_file(&dst, "a", b"old a");
    set_mtime(&dst.join("a"), now - 2 * hour);
    write_file(&dst, "b", b"new b");
    set_mtime(&dst.join("b"), now);
    write_file(&dst, "c", b"same c");
    let c_time = fs::metadata(src.join("c")).unwrap().modified().unwrap();
    set_mtime(&dst.join("c"), c_time);

    let (sa, sb, sc) = (src.join("a"), src.join("b"), src.join("c"));
    let args: &[&Path] = &[&sa, &sb, &sc, &dst];
    let (code, report, err) = copy_with(&["--update"], args);
    assert_eq!(code, 0, "{err}");
    assert_bytes_eq(
        &fs::read(dst.join("a")).unwrap(),
        &a,
        "older destination replaced",
    );
    assert_eq!(fs::read(dst.join("b")).unwrap(), b"new b", "newer kept");
    assert_eq!(fs::read(dst.join("c")).unwrap(), b"same c", "same age kept");
    assert_eq!(report["skipped"].as_u64(), Some(2), "{report}");
    assert_eq!(report["files"].as_u64(), Some(1), "{report}");
    assert_eq!(report["bytes"].as_u64(), Some(10_000), "{report}");
    assert!(!entry_skipped(&report, "/a") && entry_skipped(&report, "/b"));

    // --update=none: nothing existing is touched, also a destination older than its source.
    set_mtime(&dst.join("a"), now - 2 * hour);
    fs::write(dst.join("a"), b"old a").unwrap();
    set_mtime(&dst.join("a"), now - 2 * hour);
    let (code, report, err) = copy_with(&["--update=none"], args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fs::read(dst.join("a")).unwrap(), b"old a");
    assert_eq!(report["skipped"].as_u64(), Some(3), "{report}");
    assert_eq!(report["bytes"].as_u64(), Some(0));

    // --update=all: the default, everything replaced.
    let (code, report, err) = copy_with(&["--update=all"], args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(report["skipped"].as_u64(), Some(0));
    for (name, bytes) in [("a", &a), ("b", &b), ("c", &c)] {
        assert_bytes_eq(&fs::read(dst.join(name)).unwrap(), bytes, name);
    }
}

/// The -v line says why a destination was kept; the text total counts it.
#[test]
fn update_says_why_it_skipped() {
    let dir = tempdir();
    let src = write_file(dir.path(), "a", b"source");
    let dst = write_file(dir.path(), "b", b"newer");
    set_mtime(&src, SystemTime::now() - Duration::from_secs(60));
    let mut cmd = zerocat();
    cmd.args(["-v", "copy", "--update"]).args([&src, &dst]);
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("skipped: not older than the source (--update)"),
        "{err}"
    );
    assert!(
        err.contains("copied 0 files, 0 B") && err.contains("1 skipped"),
        "{err}"
    );
    assert_eq!(fs::read(&dst).unwrap(), b"newer");
}

/// Bad input: a mode that is not one, nothing written.
#[test]
fn update_refuses_an_unknown_mode() {
    let dir = tempdir();
    let src = write_file(dir.path(), "a", b"source");
    let dst = dir.path().join("b");
    let (code, _, err) = copy_with(&["--update=bogus"], &[&src, &dst]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--update") && err.contains("bogus"), "{err}");
    assert!(!dst.exists());
}

/// Runs `strace -f -e trace=SYSCALLS zerocat ARGS...`: (exit code, the trace, stderr).
fn traced(syscalls: &str, args: &[&std::ffi::OsStr]) -> Option<(i32, String, String)> {
    if crate::util::strace_missing() {
        return None;
    }
    let mut cmd = std::process::Command::new("strace");
    let dir = tempdir();
    let log = dir.path().join("trace");
    cmd.arg("-f")
        .arg("-o")
        .arg(&log)
        .arg("-e")
        .arg(format!("trace={syscalls}"))
        .arg(crate::util::bin())
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(std::process::Stdio::null());
    let out = run(cmd);
    if !log.exists() {
        eprintln!("skipped: strace could not trace: {}", stderr_text(&out));
        return None;
    }
    let trace = fs::read_to_string(&log).unwrap();
    Some((out.status.code().unwrap_or(-1), trace, stderr_text(&out)))
}

/// Whether the filesystem of `dir` reserves blocks with FALLOC_FL_KEEP_SIZE (ext4, XFS,
/// tmpfs do; some do not), said when it does not.
fn reserves_blocks(dir: &Path) -> bool {
    let probe = fs::File::create(dir.join("probe")).unwrap();
    let ok = nix::fcntl::fallocate(
        std::os::fd::AsRawFd::as_raw_fd(&probe),
        nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
        0,
        1 << 20,
    );
    drop(probe);
    fs::remove_file(dir.join("probe")).unwrap();
    if let Err(e) = ok {
        eprintln!("skipped: this filesystem does not reserve blocks: fallocate says {e}");
    }
    ok.is_ok()
}

/// `zerocat copy FLAG SRC DST` under a file size limit of 1 MiB (prlimit): the write past
/// it fails with EFBIG, exit 1. Its stderr, or None (said) when prlimit cannot run.
fn copy_past_a_file_size_limit(flag: &str, src: &Path, dst: &Path) -> Option<String> {
    let mut cmd = std::process::Command::new("prlimit");
    cmd.arg("--fsize=1048576")
        .arg(crate::util::bin())
        .args(["--stats", "json", "copy", flag])
        .args([src, dst])
        .stdin(std::process::Stdio::null());
    let out = run(cmd);
    let err = stderr_text(&out);
    if out.status.code() == Some(127) || err.contains("prlimit:") {
        eprintln!("skipped: prlimit could not run: {err}");
        return None;
    }
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("File too large"), "{err}");
    Some(err)
}

fn allocated(path: &Path) -> u64 {
    std::os::unix::fs::MetadataExt::blocks(&fs::metadata(path).unwrap()) * 512
}

/// A file of 1 MiB or more that is written whole gets its blocks reserved first, in one
/// fallocate that keeps the size; a small file does not (its seven syscalls), nor does a
/// sparse one (its holes stay holes). Every byte is the source's, and no block is left
/// reserved past an end.
#[test]
fn a_big_file_gets_its_blocks_reserved_before_it_is_written() {
    let dir = tempdir();
    if !reserves_blocks(dir.path()) {
        return;
    }
    let src = dir.path().join("src");
    fs::create_dir(&src).unwrap();
    let big = data(3 << 20);
    write_file(&src, "big", &big);
    let small = data(100_000);
    write_file(&src, "small", &small);
    let sparse = fs::File::create(src.join("sparse")).unwrap();
    sparse.set_len(6 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&sparse, &data(4096), 5 << 20).unwrap();
    drop(sparse);
    let sparse = fs::read(src.join("sparse")).unwrap();
    let dst = dir.path().join("dst");
    // --reflink=never: where the filesystem clones (XFS, btrfs), a clone writes no block.
    let args = ["copy", "-r", "-j1", "--reflink=never", "--stats", "json"];
    let mut args = args.map(std::ffi::OsStr::new).to_vec();
    args.extend([src.as_os_str(), dst.as_os_str()]);
    let Some((code, trace, err)) = traced("fallocate,copy_file_range", &args) else {
        return;
    };
    assert_eq!(code, 0, "{err}");
    assert_bytes_eq(&fs::read(dst.join("big")).unwrap(), &big, "big");
    assert_bytes_eq(&fs::read(dst.join("small")).unwrap(), &small, "small");
    assert_bytes_eq(&fs::read(dst.join("sparse")).unwrap(), &sparse, "sparse");
    let reserved: Vec<&str> = trace.lines().filter(|l| l.contains("fallocate(")).collect();
    assert_eq!(reserved.len(), 1, "one fallocate, the big file's:\n{trace}");
    assert!(
        reserved[0].contains("FALLOC_FL_KEEP_SIZE, 0, 3145728) = 0"),
        "{trace}"
    );
    assert_eq!(
        allocated(&dst.join("big")),
        3 << 20,
        "big: blocks for its bytes"
    );
    assert!(
        allocated(&dst.join("sparse")) < 1 << 20,
        "the sparse copy kept its holes: {} bytes allocated",
        allocated(&dst.join("sparse"))
    );
    let report = json_report(err.as_bytes());
    assert_eq!(
        crate::util::final_path(crate::util::entry(&report, "big")),
        "copy_file_range",
        "{report}"
    );
}

/// A copy cut short (a file size limit: EFBIG after 1 MiB) keeps no block reserved past
/// what it wrote: without the trim the destination held 3 MiB of blocks for 1 MiB of bytes.
#[test]
fn a_copy_cut_short_keeps_no_block_reserved_past_its_end() {
    let dir = tempdir();
    if !reserves_blocks(dir.path()) {
        return;
    }
    let bytes = data(3 << 20);
    let src = write_file(dir.path(), "a", &bytes);
    let dst = dir.path().join("b");
    // --reflink=never: no clone to try first, the blocks are reserved at once.
    let Some(err) = copy_past_a_file_size_limit("--reflink=never", &src, &dst) else {
        return;
    };
    let written = fs::read(&dst).unwrap();
    assert_eq!(written.len(), 1 << 20, "{err}");
    assert_bytes_eq(&written, &bytes[..1 << 20], "the part written");
    assert_eq!(
        allocated(&dst),
        1 << 20,
        "blocks for the bytes written, none reserved past them"
    );
}

/// A tree of small files costs six syscalls a file, cpz's count: two openat (the
/// destination's relative to its directory, opened once: no path walked per file), an
/// fstat of the source, one copy_file_range of the size it was opened with (no second
/// call to hear the EOF: issue 27) and two closes. Not per file: the procfs check (once per
/// filesystem), an lseek and an fstat to trust a 0, an fstat of a destination just made.
/// Each of those cost about a tenth of a 4 KiB file's copy (bench/NOTEBOOK.md, "copy:
/// seven syscalls a small file").
#[test]
fn a_small_file_in_a_tree_costs_six_syscalls() {
    let dir = tempdir();
    let src = dir.path().join("src");
    let mut files = Vec::new();
    for d in ["a", "b"] {
        fs::create_dir_all(src.join(d)).unwrap();
        for i in 0..20 {
            let bytes = data(4096 + i * 7);
            files.push((format!("{d}/f{i}"), bytes.clone()));
            write_file(&src.join(d), &format!("f{i}"), &bytes);
        }
    }
    let dst = dir.path().join("dst");
    // One thread: with workers, strace splits a call across lines ("<unfinished ...>").
    let args = ["copy", "-r", "-j", "1", "--stats", "json"].map(std::ffi::OsStr::new);
    let mut args = args.to_vec();
    args.extend([src.as_os_str(), dst.as_os_str()]);
    let Some((code, trace, err)) = traced(
        "openat,fstat,newfstatat,fstatfs,lseek,copy_file_range,close",
        &args,
    ) else {
        return;
    };
    assert_eq!(code, 0, "{err}");
    for (name, bytes) in &files {
        assert_bytes_eq(&fs::read(dst.join(name)).unwrap(), bytes, name);
    }
    let report = json_report(err.as_bytes());
    let paths = crate::util::paths(&report);
    // A reflink is probed once for the filesystem pair (refused on ext4 and tmpfs).
    let total = 40 * 4096 + 2 * 7 * 190;
    assert!(
        paths.contains(&("copy_file_range".to_string(), total)),
        "{err}"
    );
    let count = |call: &str| trace.lines().filter(|l| l.contains(call)).count();
    let per_file = |call: &str| count(call) as f64 / files.len() as f64;
    assert!(
        count("fstatfs(") <= 1,
        "one procfs check per filesystem:\n{trace}"
    );
    // (The walk rewinds its directory fds with SEEK_SET.)
    assert_eq!(
        count("SEEK_CUR"),
        0,
        "copy_file_range's 0 trusted at the size:\n{trace}"
    );
    assert_eq!(per_file("copy_file_range("), 1.0, "{trace}");
    let created_by_path = trace
        .lines()
        .filter(|l| l.contains("O_EXCL") && l.contains("AT_FDCWD"))
        .count();
    assert_eq!(
        created_by_path, 0,
        "created relative to a directory fd:\n{trace}"
    );
    // The source's fstat, once a file; the loader's and the directories' (a dozen) aside.
    let fstats = count("fstat(") + count("AT_EMPTY_PATH");
    assert!(
        fstats <= files.len() + 16,
        "{fstats} fstats for {} files:\n{trace}",
        files.len()
    );
}

/// `--sync`: one fdatasync per file copied, none without it.
#[test]
fn sync_fdatasyncs_each_file() {
    let dir = tempdir();
    let names = ["a", "b", "c"];
    let into = dir.path().join("into");
    fs::create_dir(&into).unwrap();
    // One thread: with workers, strace splits a call across lines ("<unfinished ...>").
    let mut args: Vec<std::ffi::OsString> =
        vec!["copy".into(), "-j".into(), "1".into(), "--sync".into()];
    for (i, name) in names.iter().enumerate() {
        args.push(write_file(dir.path(), name, &data(1000 * (i + 1))).into());
    }
    args.push(into.clone().into());
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let Some((code, trace, err)) = traced("fdatasync", &args) else {
        return;
    };
    assert_eq!(code, 0, "{err}");
    let syncs = trace
        .lines()
        .filter(|l| l.contains("fdatasync(") && l.contains("= 0"))
        .count();
    assert_eq!(syncs, 3, "{trace}");
    for (i, name) in names.iter().enumerate() {
        assert_bytes_eq(
            &fs::read(into.join(name)).unwrap(),
            &data(1000 * (i + 1)),
            name,
        );
    }
    assert!(err.contains("copied 3 files"), "{err}");

    let without: Vec<&std::ffi::OsStr> = args.iter().copied().filter(|a| *a != "--sync").collect();
    let (code, trace, err) = traced("fdatasync", &without).unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(!trace.contains("fdatasync("), "{trace}");
}

/// `--verify` on a good copy: every byte read back, counted and timed; with `--sync` too,
/// and for a sparse file and a tree.
#[test]
fn verify_counts_what_it_compared() {
    let dir = tempdir();
    let bytes = data(3 << 20);
    let src = write_file(dir.path(), "a", &bytes);
    let dst = dir.path().join("b");
    for flags in [&["--verify"][..], &["--verify", "--sync"]] {
        let (code, report, err) = copy_with(flags, &[&src, &dst]);
        assert_eq!(code, 0, "{flags:?}: {err}");
        assert_bytes_eq(&fs::read(&dst).unwrap(), &bytes, "verified copy");
        assert_eq!(report["verified_bytes"].as_u64(), Some(3 << 20), "{report}");
        assert!(report["verify_seconds"].as_f64().unwrap() > 0.0, "{report}");
        let entry = &report["entries"][0];
        assert_eq!(entry["verified_bytes"].as_u64(), Some(3 << 20), "{report}");
        assert!(entry["verify_seconds"].as_f64().is_some(), "{report}");
    }
    // Without --verify: nothing compared, the entry's time is null.
    let (code, report, err) = copy_with(&[], &[&src, &dst]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(report["verified_bytes"].as_u64(), Some(0));
    assert!(report["entries"][0]["verify_seconds"].is_null());

    // A sparse source: the holes read back as zeros on both sides.
    let sparse = dir.path().join("sparse");
    let f = fs::File::create(&sparse).unwrap();
    f.set_len(8 << 20).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, &data(4096), 5 << 20).unwrap();
    drop(f);
    let tree = dir.path().join("tree");
    fs::create_dir(&tree).unwrap();
    let (code, report, err) = copy_with(&["--verify"], &[&sparse, &src, &tree]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        report["verified_bytes"].as_u64(),
        Some((8 << 20) + (3 << 20)),
        "{report}"
    );
    assert_eq!(
        fs::read(tree.join("sparse")).unwrap(),
        fs::read(&sparse).unwrap()
    );
}

/// A file modified while it is copied (the everyday case): bytes of the source, in a region
/// already copied, are overwritten during a slow copy; `--verify` fails that file with the
/// offset of the first difference, and the copy holds the bytes the source had when copied.
#[test]
fn verify_catches_a_source_changed_while_copied() {
    let dir = tempdir();
    let len = 4 << 20;
    let bytes = data(len);
    let src = write_file(dir.path(), "a", &bytes);
    let dst = dir.path().join("b");
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "--limit", "4M", "copy", "--verify"])
        .args([&src, &dst])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    // Wait until the copy is past 2 MiB, then change 4 KiB at 1,000,000.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while fs::metadata(&dst).map_or(0, |m| m.len()) < 2 << 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "the copy did not reach 2 MiB"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let at = 1_000_000;
    let changed: Vec<u8> = bytes[at..at + 4096].iter().map(|b| !b).collect();
    let f = fs::File::options().write(true).open(&src).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, &changed, at as u64).unwrap();
    drop(f);
    assert!(
        fs::metadata(&dst).unwrap().len() < len as u64,
        "the copy ended before the source changed: the test proves nothing"
    );
    let out = crate::util::wait_with_deadline(child, crate::util::DEADLINE);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("differs from the source at offset 1000000"),
        "{err}"
    );
    let report = json_report(&out.stderr);
    assert_eq!(report["failed"].as_u64(), Some(1), "{report}");
    assert_eq!(report["ended"].as_str(), Some("error"), "{report}");
    let entry = &report["entries"][0];
    assert!(
        entry["error"].as_str().unwrap().contains("offset 1000000"),
        "{entry}"
    );
    assert_eq!(entry["verified_bytes"].as_u64(), Some(0), "{entry}");
    assert_bytes_eq(
        &fs::read(&dst).unwrap(),
        &bytes,
        "the copy holds the bytes copied",
    );
}

/// Bad input: `--verify` into what cannot be read back is a usage error naming the kind,
/// before anything is written.
#[test]
fn verify_refuses_a_sink_it_cannot_read_back() {
    let dir = tempdir();
    let src = write_file(dir.path(), "a", &data(1000));
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let (code, _, err) = copy_with(&["--verify"], &[&src, &fifo]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--verify") && err.contains("is a FIFO"),
        "{err}"
    );
    for (dest, kind) in [("-", "stdout"), ("tcp:127.0.0.1:9", "a TCP socket")] {
        let mut cmd = zerocat();
        cmd.args(["copy", "--verify"]).arg(&src).arg(dest);
        let out = run(cmd);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("'{dest}' is {kind}")), "{err}");
        assert!(out.stdout.is_empty());
    }
}

/// The names in a directory, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Spawns `cmd` (an `--atomic` copy of `src` into `dir`) and returns once the temporary it
/// writes holds `at_least` bytes: the file zerocat has open under `dir` other than `src`
/// (an O_TMPFILE shows as `DIR/#INODE (deleted)`).
fn spawn_until_temporary_holds(
    cmd: &mut std::process::Command,
    dir: &Path,
    src: &Path,
    at_least: u64,
) -> std::process::Child {
    let child = cmd.spawn().unwrap();
    let dir_name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let written = || -> Option<u64> {
        for fd in fs::read_dir(format!("/proc/{}/fd", child.id()))
            .ok()?
            .flatten()
        {
            let Ok(link) = fs::read_link(fd.path()) else {
                continue;
            };
            if link.to_string_lossy().contains(&dir_name) && link != src {
                match fs::metadata(fd.path()) {
                    Ok(m) if m.is_file() => return Some(m.len()),
                    _ => {}
                }
            }
        }
        None
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while written().unwrap_or(0) < at_least {
        assert!(
            std::time::Instant::now() < deadline,
            "the temporary did not reach {at_least} bytes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child
}

/// `--atomic`: a successful copy replaces the destination by a rename (strace shows the
/// linkat and the rename), never opening it for writing nor truncating it.
#[test]
fn atomic_replaces_by_rename_never_by_truncation() {
    let dir = tempdir();
    let bytes = data(300_000);
    let src = write_file(dir.path(), "a", &bytes);
    let dst = write_file(dir.path(), "b", &data(900_000));
    let args: Vec<&std::ffi::OsStr> = vec![
        "copy".as_ref(),
        "--atomic".as_ref(),
        src.as_os_str(),
        dst.as_os_str(),
    ];
    let syscalls = "open,openat,creat,truncate,ftruncate,rename,renameat,renameat2,link,linkat";
    let Some((code, trace, err)) = traced(syscalls, &args) else {
        return;
    };
    assert_eq!(code, 0, "{err}");
    assert_bytes_eq(&fs::read(&dst).unwrap(), &bytes, "replaced");
    let quoted = format!("\"{}\"", dst.display());
    let renamed = trace
        .lines()
        .any(|l| l.contains("rename") && l.contains(&quoted) && l.ends_with("= 0"));
    assert!(renamed, "no rename onto the destination: {trace}");
    assert!(!trace.contains("truncate("), "{trace}");
    for line in trace.lines().filter(|l| l.contains(&quoted)) {
        assert!(
            !line.contains("open") || !(line.contains("O_WRONLY") || line.contains("O_RDWR")),
            "the destination was opened for writing: {line}"
        );
    }
    assert!(
        trace.contains("O_TMPFILE") || trace.contains(".b.zerocat-"),
        "{trace}"
    );
    assert_eq!(names_in(dir.path()), ["a", "b"]);
}

/// SIGINT mid-file: exit 130, the old destination byte for byte, no temporary.
#[test]
fn atomic_sigint_leaves_the_old_destination() {
    let dir = tempdir();
    let src = write_file(dir.path(), "a", &data(4 << 20));
    let old = data(5000);
    let dst = write_file(dir.path(), "b", &old);
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "--limit", "4M", "copy", "--atomic"])
        .args([&src, &dst])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = spawn_until_temporary_holds(&mut cmd, dir.path(), &src, 1 << 20);
    let pid = child.id();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = crate::util::wait_with_deadline(child, crate::util::DEADLINE);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert_bytes_eq(&fs::read(&dst).unwrap(), &old, "old destination");
    assert_eq!(names_in(dir.path()), ["a", "b"], "a temporary was left");
    let report = json_report(&out.stderr);
    assert_eq!(report["ended"].as_str(), Some("signal"), "{report}");
}

/// A file size limit (`ulimit -f`): the write fails with EFBIG (exit 1), the old
/// destination stays, no temporary.
#[test]
fn atomic_file_size_limit_leaves_the_old_destination() {
    let dir = tempdir();
    let src = write_file(dir.path(), "a", &data(3 << 20));
    let old = data(5000);
    let dst = write_file(dir.path(), "b", &old);
    if copy_past_a_file_size_limit("--atomic", &src, &dst).is_none() {
        return;
    }
    assert_bytes_eq(&fs::read(&dst).unwrap(), &old, "old destination");
    assert_eq!(names_in(dir.path()), ["a", "b"], "a temporary was left");
}

/// A full disk: a 1 MiB tmpfs holding the old destination; the new one does not fit.
#[test]
fn atomic_full_disk_leaves_the_old_destination() {
    let dir = tempdir();
    let Some(tmpfs) = Mounted::tmpfs("1m") else {
        return;
    };
    let mnt = tmpfs.path();
    let src = write_file(dir.path(), "a", &data(2 << 20));
    let old = data(300_000);
    let dst = write_file(mnt, "b", &old);
    let (code, report, err) = copy_with(&["--atomic"], &[&src, &dst]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert_eq!(report["failed"].as_u64(), Some(1), "{report}");
    assert_bytes_eq(&fs::read(&dst).unwrap(), &old, "old destination");
    assert_eq!(names_in(mnt), ["b"], "a temporary was left");
    // What reached a destination: nothing. The temporary's bytes are named as discarded
    // (issue 26 item 13; before, `bytes` counted them).
    assert_eq!(report["bytes"].as_u64(), Some(0), "{report}");
    assert!(
        report["discarded_bytes"].as_u64().unwrap_or(0) > 0,
        "{report}"
    );
}

/// A failed `--verify` (the source changed during the copy) renames nothing.
#[test]
fn atomic_failed_verify_leaves_the_old_destination() {
    let dir = tempdir();
    let len = 4 << 20;
    let bytes = data(len);
    let src = write_file(dir.path(), "a", &bytes);
    let old = data(7000);
    let dst = write_file(dir.path(), "b", &old);
    let mut cmd = zerocat();
    cmd.args(["--limit", "4M", "copy", "--atomic", "--verify"])
        .args([&src, &dst])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = spawn_until_temporary_holds(&mut cmd, dir.path(), &src, 2 << 20);
    let changed: Vec<u8> = bytes[4096..8192].iter().map(|b| !b).collect();
    let f = fs::File::options().write(true).open(&src).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, &changed, 4096).unwrap();
    drop(f);
    let out = crate::util::wait_with_deadline(child, crate::util::DEADLINE);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("differs from the source at offset 4096"),
        "{err}"
    );
    assert_bytes_eq(&fs::read(&dst).unwrap(), &old, "old destination");
    assert_eq!(names_in(dir.path()), ["a", "b"], "a temporary was left");
}

/// `-r --atomic`: each file of the tree replaced whole; the modes of replaced files kept.
#[test]
fn atomic_works_per_file_in_a_tree() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let src = dir.path().join("src");
    fs::create_dir_all(src.join("sub")).unwrap();
    write_file(&src, "x", &data(10_000));
    write_file(&src.join("sub"), "y", &data(20_000));
    let dst = dir.path().join("dst");
    fs::create_dir_all(dst.join("sub")).unwrap();
    write_file(&dst, "x", b"old x");
    fs::set_permissions(dst.join("x"), fs::Permissions::from_mode(0o600)).unwrap();
    let (code, report, err) = copy_with(&["-r", "--atomic"], &[&src, &dst]);
    assert_eq!(code, 0, "{err}");
    // dst exists: the tree goes in as dst/src.
    let root = dst.join("src");
    assert_bytes_eq(&fs::read(root.join("x")).unwrap(), &data(10_000), "x");
    assert_bytes_eq(&fs::read(root.join("sub/y")).unwrap(), &data(20_000), "y");
    assert_eq!(report["files"].as_u64(), Some(2), "{report}");
    let (code, _, err) = copy_with(&["--atomic"], &[&src.join("x"), &dst.join("x")]);
    assert_eq!(code, 0, "{err}");
    assert_bytes_eq(
        &fs::read(dst.join("x")).unwrap(),
        &data(10_000),
        "x replaced",
    );
    let mode = fs::metadata(dst.join("x")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the replaced file's mode is kept");
    assert_eq!(names_in(&dst), ["src", "sub", "x"]);
    assert_eq!(names_in(&root), ["sub", "x"]);
}

/// Bad input: `--atomic` into a directory where nothing can be created (immutable) is a
/// usage error naming the option and the directory, as is `--atomic` with `--resume`.
#[test]
fn atomic_refuses_what_it_cannot_do() {
    let dir = tempdir();
    let src = write_file(dir.path(), "a", &data(1000));
    let locked = dir.path().join("locked");
    fs::create_dir(&locked).unwrap();
    let old = write_file(&locked, "b", b"old");
    let (code, _, err) = copy_with(&["--atomic", "--resume"], &[&src, &old]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--atomic") && err.contains("--resume"),
        "{err}"
    );

    let chattr = std::process::Command::new("chattr")
        .arg("+i")
        .arg(&locked)
        .output();
    match chattr {
        Ok(o) if o.status.success() => {}
        other => {
            eprintln!("skipped (the immutable directory case): chattr +i refused: {other:?}");
            return;
        }
    }
    let (code, _, err) = copy_with(&["--atomic"], &[&src, &old]);
    let _ = std::process::Command::new("chattr")
        .arg("-i")
        .arg(&locked)
        .status();
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--atomic: cannot create files in") && err.contains("locked"),
        "{err}"
    );
    assert_eq!(fs::read(&old).unwrap(), b"old");
    assert_eq!(names_in(&locked), ["b"]);
}

/// `--debug`: cp 9.x's two lines per file on stdout, matching what the report says ran.
#[test]
fn debug_says_what_ran_in_cps_words() {
    let dir = tempdir();
    let src = write_file(dir.path(), "a", &data(100_000));
    let sparse = dir.path().join("sparse");
    let f = fs::File::create(&sparse).unwrap();
    f.set_len(4 << 20).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, &data(4096), 1 << 20).unwrap();
    drop(f);
    let dst = dir.path().join("b");
    let cases: [(&[&str], &Path, &str); 4] = [
        (
            &[],
            &src,
            "copy offload: yes, reflink: unsupported, sparse detection: no",
        ),
        (
            &["--via", "userspace"],
            &src,
            "copy offload: no, reflink: no, sparse detection: no",
        ),
        (
            &["--via", "splice"],
            &sparse,
            "copy offload: no, reflink: no, sparse detection: SEEK_HOLE",
        ),
        (
            &["copy", "--sparse=always"],
            &sparse,
            "copy offload: no, reflink: no, sparse detection: SEEK_HOLE + zeros",
        ),
    ];
    for (flags, from, want) in cases {
        let mut cmd = zerocat();
        cmd.args(["--stats", "json"]).args(flags);
        if !flags.contains(&"copy") {
            cmd.arg("copy");
        }
        cmd.arg("--debug").args([from, &dst]);
        let out = run(cmd);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(0), "{flags:?}: {err}");
        let report = json_report(&out.stderr);
        let stdout = String::from_utf8(out.stdout).unwrap();
        let first = format!("'{}' -> '{}'", from.display(), dst.display());
        assert_eq!(stdout, format!("{first}\n{want}\n"), "{flags:?}: {report}");
        assert_eq!(
            fs::read(&dst).unwrap(),
            fs::read(from).unwrap(),
            "{flags:?}"
        );
        fs::remove_file(&dst).unwrap();
    }
}

/// A reflink on a loop-mounted XFS is verified like any copy (read back through the shared
/// extents), renamed into place with `--atomic`, and `--debug` says "avoided, reflink: yes".
#[test]
fn verify_atomic_and_debug_follow_a_reflink() {
    let Some(xfs) = Mounted::xfs_with_reflink() else {
        return;
    };
    let mnt = xfs.path();
    let bytes = data(8 << 20);
    let src = write_file(mnt, "src", &bytes);
    let dst = write_file(mnt, "dst", b"old");
    let mut cmd = zerocat();
    cmd.args([
        "--stats",
        "json",
        "copy",
        "--reflink=always",
        "--verify",
        "--atomic",
        "--debug",
    ])
    .args([&src, &dst]);
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let report = json_report(&out.stderr);
    assert_eq!(report["verified_bytes"].as_u64(), Some(8 << 20), "{report}");
    assert_eq!(
        report["paths"][0]["path"].as_str(),
        Some("reflink"),
        "{report}"
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.ends_with("copy offload: avoided, reflink: yes, sparse detection: no\n"),
        "{stdout}"
    );
    assert_bytes_eq(&fs::read(&dst).unwrap(), &bytes, "clone");
    assert_eq!(names_in(mnt), ["dst", "src"]);
}

/// The file options on a copy that would run as a stream (`-`, a socket) are usage errors
/// naming the option, not silently ignored.
#[test]
fn file_options_refuse_a_stream() {
    let dir = tempdir();
    let src = write_file(dir.path(), "a", &data(1000));
    for option in ["--atomic", "--sync", "--update", "--debug"] {
        let mut cmd = zerocat();
        cmd.args(["copy", option]).arg(&src).arg("-");
        let out = run(cmd);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{option}: {err}");
        assert!(
            err.contains(&format!("{option}: the destination '-' is stdout")),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "{option}: bytes were written");
    }
}

/// `--sync`: the progress (here SIGUSR1's line) counts bytes on disk. Mid-way through a
/// slow copy of one small file, nothing is synced yet: the line says 0 B while the
/// destination already holds more than 1 MiB; without `--sync` it counts what was written.
#[test]
fn sync_progress_counts_bytes_on_disk() {
    for sync in [true, false] {
        let dir = tempdir();
        let src = write_file(dir.path(), "a", &data(4 << 20));
        let dst = dir.path().join("b");
        let mut cmd = zerocat();
        cmd.args(["--limit", "4M", "copy"]);
        if sync {
            cmd.arg("--sync");
        }
        cmd.args([&src, &dst]);
        let line = progress_line_when(cmd, "the copy did not start", || {
            fs::metadata(&dst).map_or(0, |m| m.len()) >= 1 << 20
        });
        assert_bytes_eq(&fs::read(&dst).unwrap(), &data(4 << 20), "copy");
        assert_eq!(
            line.starts_with("zerocat: 0 B in"),
            sync,
            "sync {sync}: {line}"
        );
    }
}

/// `--sync` under `-j`: the bar and the SIGUSR1 line count what the workers synced (each
/// worker credits the walk's on-disk counter, not one of its own).
#[test]
fn sync_progress_counts_what_the_workers_synced() {
    let dir = tempdir();
    let tree = dir.path().join("tree");
    fs::create_dir(&tree).unwrap();
    for i in 0..8 {
        write_file(&tree, &format!("f{i}"), &data(512 << 10));
    }
    let dst = dir.path().join("copy");
    let mut cmd = zerocat();
    cmd.args(["--limit", "1M", "copy", "-r", "-j", "2", "--sync"])
        .args([&tree, &dst]);
    // Two workers: once a third file is started, one file is copied and synced.
    let line = progress_line_when(cmd, "the copy did not go on", || {
        fs::read_dir(&dst).map_or(0, |d| d.count()) >= 3
    });
    for i in 0..8 {
        let name = format!("f{i}");
        assert_bytes_eq(&fs::read(dst.join(&name)).unwrap(), &data(512 << 10), &name);
    }
    assert!(!line.starts_with("zerocat: 0 B in"), "{line}");
}

/// Starts `cmd`, sends it SIGUSR1 once `ready` holds (within 10 s, else fails with
/// `stuck`), and waits for it to exit 0. Returns the progress line SIGUSR1 printed
/// ("... N files done").
fn progress_line_when(
    mut cmd: std::process::Command,
    stuck: &str,
    ready: impl Fn() -> bool,
) -> String {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(std::time::Instant::now() < deadline, "{stuck}");
        std::thread::sleep(Duration::from_millis(5));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGUSR1,
    )
    .unwrap();
    let out = crate::util::wait_with_deadline(child, crate::util::DEADLINE);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    err.lines()
        .find(|l| l.contains("files done") || l.contains("file done"))
        .unwrap_or_else(|| panic!("no SIGUSR1 line: {err}"))
        .to_string()
}

/// The path that carried a one-file copy's bytes: copy_file_range on the test's ext4,
/// splice or userspace where the filesystem refuses it.
#[track_caller]
fn assert_moved_by_a_kernel_or_userspace_path(report: &Value) {
    let path = crate::util::final_path(report);
    assert!(
        ["reflink", "copy_file_range", "splice", "userspace"].contains(&path.as_str()),
        "{report}"
    );
}

/// cp's -L/-H/-P (issue 42 item 5): `copy -L link x` copies what the link points to
/// instead of reading 'link' as a --limit rate; -P copies the link itself; in a tree -L
/// follows every link (a link to a directory holding it is refused as cyclic), -H only
/// the operands. --limit keeps its long form in copy, and -L before the command.
#[test]
fn copy_takes_cps_dereference_options_and_limit_keeps_its_long_form() {
    let dir = tempdir();
    let d = dir.path();
    let bytes = data(70_000);
    write_file(d, "f", &bytes);
    std::os::unix::fs::symlink("f", d.join("link")).unwrap();

    let (code, report, err) = copy_with(&["-L"], &[&d.join("link"), &d.join("x")]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("not a size"), "{err}");
    assert!(fs::symlink_metadata(d.join("x")).unwrap().is_file());
    assert_bytes_eq(&fs::read(d.join("x")).unwrap(), &bytes, "-L link x");
    assert_moved_by_a_kernel_or_userspace_path(&report);

    let (code, _, err) = copy_with(&["-P"], &[&d.join("link"), &d.join("y")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fs::read_link(d.join("y")).unwrap(), Path::new("f"));

    // A tree with a link to a file, a link to a directory, and a link back up.
    let tree = d.join("t");
    fs::create_dir_all(tree.join("sub")).unwrap();
    write_file(&tree.join("sub"), "file", &bytes);
    std::os::unix::fs::symlink("sub", tree.join("dirlink")).unwrap();
    std::os::unix::fs::symlink("sub/file", tree.join("filelink")).unwrap();
    std::os::unix::fs::symlink("..", tree.join("sub/up")).unwrap();
    std::os::unix::fs::symlink("t", d.join("treelink")).unwrap();

    let (code, report, err) = copy_with(&["-rL"], &[&d.join("treelink"), &d.join("l")]);
    assert_eq!(code, 1, "the cyclic link fails: {err}");
    assert!(err.contains("cannot copy cyclic symbolic link"), "{err}");
    for copied in ["sub/file", "dirlink/file", "filelink"] {
        let path = d.join("l").join(copied);
        assert!(fs::symlink_metadata(&path).unwrap().is_file(), "{copied}");
        assert_bytes_eq(&fs::read(&path).unwrap(), &bytes, copied);
    }
    assert!(!d.join("l/sub/up").exists(), "{err}");
    assert_moved_by_a_kernel_or_userspace_path(&report);

    let (code, _, err) = copy_with(&["-rH"], &[&d.join("treelink"), &d.join("h")]);
    assert_eq!(code, 0, "{err}");
    assert!(fs::symlink_metadata(d.join("h")).unwrap().is_dir());
    assert_eq!(
        fs::read_link(d.join("h/dirlink")).unwrap(),
        Path::new("sub")
    );
    assert_eq!(fs::read_link(d.join("h/sub/up")).unwrap(), Path::new(".."));
    assert_bytes_eq(&fs::read(d.join("h/sub/file")).unwrap(), &bytes, "-rH");

    // -r alone is -P: the operand link is copied as a link.
    let (code, _, err) = copy_with(&["-r"], &[&d.join("treelink"), &d.join("p")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(fs::read_link(d.join("p")).unwrap(), Path::new("t"));

    for flags in [&["--limit", "100M"][..], &[]] {
        let mut cmd = zerocat();
        if flags.is_empty() {
            cmd.args(["-L", "100M", "--stats", "json", "copy"]);
        } else {
            cmd.args(["--stats", "json", "copy"]).args(flags);
        }
        cmd.arg("-v").arg(d.join("f")).arg(d.join("limited"));
        let out = run(cmd);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(err.contains("limited to 100 MiB/s"), "{flags:?}: {err}");
        assert_bytes_eq(&fs::read(d.join("limited")).unwrap(), &bytes, "--limit");
    }
}

/// cp's -s and -l are refused with what to use instead, never clap's tip to pass `-- -s`
/// (which would copy a file named -s); --remove-destination is cp's, not a near miss of
/// --version: a symlink at the destination is replaced, its target left alone.
#[test]
fn copy_refuses_link_copies_and_removes_the_destination_first() {
    let dir = tempdir();
    let d = dir.path();
    let bytes = data(5000);
    write_file(d, "f", &bytes);
    for flag in ["-s", "-l", "--symbolic-link", "--link"] {
        let (code, _, err) = copy_with(&[flag], &[&d.join("f"), &d.join("made")]);
        assert_eq!(code, 2, "{flag}: {err}");
        assert!(
            err.contains("symbolic/hard link copies are not supported; use ln"),
            "{flag}: {err}"
        );
        assert!(!err.contains("-- -"), "{flag}: {err}");
        assert!(!d.join("made").exists(), "{flag}");
    }

    let other = write_file(d, "other", b"keep me");
    std::os::unix::fs::symlink("other", d.join("dst")).unwrap();
    let (code, report, err) = copy_with(&["--remove-destination"], &[&d.join("f"), &d.join("dst")]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("--version"), "{err}");
    assert!(fs::symlink_metadata(d.join("dst")).unwrap().is_file());
    assert_bytes_eq(
        &fs::read(d.join("dst")).unwrap(),
        &bytes,
        "--remove-destination",
    );
    assert_eq!(fs::read(&other).unwrap(), b"keep me");
    assert_moved_by_a_kernel_or_userspace_path(&report);

    // The source named as its own destination is still refused, and kept.
    let (code, _, err) = copy_with(&["--remove-destination"], &[&d.join("f"), &d.join("f")]);
    assert_eq!(code, 1, "{err}");
    assert_bytes_eq(&fs::read(d.join("f")).unwrap(), &bytes, "the source");
}

/// A destination symlink that cannot be followed says why, by errno (a loop is ELOOP, not
/// "dangling"); -f replaces a loop as GNU cp does; a dangling one is refused, -f or not,
/// also as GNU cp does.
#[test]
fn a_destination_link_that_cannot_be_followed_names_its_errno_and_f_replaces_a_loop() {
    let dir = tempdir();
    let d = dir.path();
    let bytes = data(3000);
    write_file(d, "f", &bytes);
    std::os::unix::fs::symlink("loop", d.join("loop")).unwrap();
    std::os::unix::fs::symlink("nowhere", d.join("dangling")).unwrap();

    for flags in [&[][..], &["--atomic"]] {
        let (code, _, err) = copy_with(flags, &[&d.join("f"), &d.join("loop")]);
        assert_eq!(code, 1, "{flags:?} {err}");
        assert!(err.contains("ELOOP"), "{flags:?} {err}");
        assert!(!err.contains("dangling"), "{flags:?} {err}");
    }
    for flags in [&[][..], &["-f"]] {
        let (code, _, err) = copy_with(flags, &[&d.join("f"), &d.join("dangling")]);
        assert_eq!(code, 1, "{flags:?} {err}");
        assert!(err.contains("dangling"), "{flags:?} {err}");
        assert!(!d.join("nowhere").exists());
    }

    let (code, report, err) = copy_with(&["-f"], &[&d.join("f"), &d.join("loop")]);
    assert_eq!(code, 0, "{err}");
    assert!(fs::symlink_metadata(d.join("loop")).unwrap().is_file());
    assert_bytes_eq(&fs::read(d.join("loop")).unwrap(), &bytes, "-f f loop");
    assert_moved_by_a_kernel_or_userspace_path(&report);
}

/// `copy --parents f/g d` where f is a file: nothing to copy, and no stray `d/f` left
/// behind (cp checks the source first); a good operand beside it still lands.
#[test]
fn parents_leaves_no_stray_directory_when_an_operand_fails() {
    let dir = tempdir();
    let d = dir.path();
    let bytes = data(2000);
    write_file(d, "f", &bytes);
    fs::create_dir_all(d.join("a/b")).unwrap();
    write_file(&d.join("a/b"), "c", &bytes);
    fs::create_dir(d.join("dst")).unwrap();
    let mut cmd = zerocat();
    cmd.current_dir(d).args([
        "--stats",
        "json",
        "copy",
        "--parents",
        "f/g",
        "a/b/c",
        "dst",
    ]);
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!d.join("dst/f").exists(), "stray dst/f: {err}");
    assert_bytes_eq(&fs::read(d.join("dst/a/b/c")).unwrap(), &bytes, "a/b/c");
    assert_moved_by_a_kernel_or_userspace_path(&json_report(&out.stderr));
}

/// The same for a destination symlink into a directory the user cannot search: EACCES
/// named (it said "dangling"), and -f replaces the link, never writing into that
/// directory. Run as nobody (root searches every directory).
#[test]
fn a_destination_link_into_an_unsearchable_directory_names_eacces() {
    use std::os::unix::fs::PermissionsExt;
    let Some(nobody) = crate::util::AsNobody::new() else {
        return;
    };
    let d = nobody.path();
    let bytes = data(3000);
    let src = write_file(d, "f", &bytes);
    fs::set_permissions(&src, fs::Permissions::from_mode(0o644)).unwrap();
    let private = d.join("private");
    fs::create_dir(&private).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    let writable = d.join("w");
    fs::create_dir(&writable).unwrap();
    fs::set_permissions(&writable, fs::Permissions::from_mode(0o777)).unwrap();
    let link = writable.join("link");
    std::os::unix::fs::symlink(private.join("x"), &link).unwrap();

    for (flags, code) in [(&[][..], 1), (&["-f"][..], 0)] {
        let mut cmd = nobody.zerocat();
        cmd.args(["--stats", "json", "copy"])
            .args(flags)
            .arg(&src)
            .arg(&link);
        let out = run(cmd);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(code), "{flags:?} {err}");
        assert!(!err.contains("dangling"), "{flags:?} {err}");
        if code == 1 {
            assert!(err.contains("EACCES"), "{err}");
            assert!(fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink());
        } else {
            assert!(fs::symlink_metadata(&link).unwrap().is_file(), "{err}");
            assert_bytes_eq(&fs::read(&link).unwrap(), &bytes, "-f f link");
            assert_moved_by_a_kernel_or_userspace_path(&json_report(&out.stderr));
        }
        assert!(!private.join("x").exists());
    }
}
