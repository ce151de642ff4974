//! copy's files: two sources with one name, /proc and /sys files, --resume's whole-prefix check, holes onto a block device.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::util::{
    assert_bytes_eq, data, json_report, run, stderr_text, tempdir, write_file, zerocat,
};

/// Runs `zerocat --stats json copy FLAGS ARGS...`: (exit code, report, stderr).
fn copy(flags: &[&str], args: &[&Path]) -> (i32, Value, String) {
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "copy"]).args(flags).args(args);
    let out = run(cmd);
    (
        out.status.code().unwrap_or(-1),
        json_report(&out.stderr),
        stderr_text(&out),
    )
}

#[test]
fn copy_refuses_a_second_source_with_the_name_of_a_just_created_file() {
    let dir = tempdir();
    let first = data(5000);
    let second = b"the other x".to_vec();
    fs::create_dir_all(dir.path().join("m/a")).unwrap();
    fs::create_dir_all(dir.path().join("m/b")).unwrap();
    fs::create_dir(dir.path().join("dst")).unwrap();
    let a = write_file(&dir.path().join("m/a"), "x", &first);
    let b = write_file(&dir.path().join("m/b"), "x", &second);
    let dst = dir.path().join("dst");
    let (code, report, err) = copy(&[], &[&a, &b, &dst]);
    assert_eq!(code, 1, "{err}");
    assert_bytes_eq(&fs::read(dst.join("x")).unwrap(), &first, "the first copy");
    assert!(err.contains("will not overwrite just-created"), "{err}");
    let entries = report["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{report}");
    assert_eq!(entries[0]["src"], a.to_str().unwrap());
    assert!(entries[0]["error"].is_null(), "{report}");
    assert_eq!(entries[0]["bytes"], first.len() as u64);
    assert_eq!(entries[1]["src"], b.to_str().unwrap());
    assert!(
        entries[1]["error"]
            .as_str()
            .unwrap()
            .contains("just-created"),
        "{report}"
    );
    assert_eq!(report["files"], 1);
    assert_eq!(report["failed"], 1);
}

/// Copies one pseudo file to a fresh path and returns (what the copy wrote, the report).
fn copy_pseudo(src: &str) -> (Vec<u8>, Value) {
    let dir = tempdir();
    let out = dir.path().join("out");
    let (code, report, err) = copy(&[], &[Path::new(src), &out]);
    assert_eq!(code, 0, "copy {src}: {err}");
    let got = fs::read(&out).unwrap();
    assert_eq!(report["bytes"], got.len() as u64, "copy {src}: {report}");
    assert_eq!(report["entries"][0]["bytes"], got.len() as u64, "{report}");
    (got, report)
}

#[test]
fn copy_of_proc_and_sys_files_writes_their_exact_bytes() {
    for src in ["/proc/cmdline", "/sys/devices/system/cpu/online"] {
        if !Path::new(src).exists() {
            eprintln!("skipped {src}: absent on this machine");
            continue;
        }
        let want = fs::read(src).unwrap();
        let (got, _) = copy_pseudo(src);
        assert_bytes_eq(&got, &want, src);
    }
    // cpuinfo is stable here (no per-read MHz change seen); read it just before.
    let want = fs::read("/proc/cpuinfo").unwrap();
    let (got, _) = copy_pseudo("/proc/cpuinfo");
    if got != want {
        // A kernel that reports a changing clock: same shape, no padding.
        assert!(!got.contains(&0), "NULs in the copy of /proc/cpuinfo");
        let lines = |b: &[u8]| b.iter().filter(|&&c| c == b'\n').count();
        assert_eq!(lines(&got), lines(&want), "/proc/cpuinfo's line count");
    }
    // The copier's own status: differs from ours, but is text, whole and unpadded.
    let (got, _) = copy_pseudo("/proc/self/status");
    assert!(
        got.starts_with(b"Name:"),
        "{:?}",
        String::from_utf8_lossy(&got)
    );
    assert!(got.ends_with(b"\n"), "{:?}", String::from_utf8_lossy(&got));
    assert!(!got.contains(&0), "NULs in the copy of /proc/self/status");
}

#[test]
fn copy_r_of_a_sysfs_directory_writes_each_files_exact_bytes() {
    let src = [
        "/sys/devices/system/cpu/cpu0/topology",
        "/sys/kernel/mm/transparent_hugepage",
    ]
    .into_iter()
    .map(Path::new)
    .find(|p| p.is_dir());
    let Some(src) = src else {
        eprintln!("skipped: no small sysfs directory (cpu0/topology, transparent_hugepage)");
        return;
    };
    let dir = tempdir();
    let out = dir.path().join("t");
    let mut want = Vec::new();
    for item in fs::read_dir(src).unwrap() {
        let item = item.unwrap();
        if item.file_type().unwrap().is_file() {
            if let Ok(bytes) = fs::read(item.path()) {
                want.push((item.file_name(), bytes));
            }
        }
    }
    assert!(!want.is_empty(), "no readable file in {}", src.display());
    let (code, report, err) = copy(&["-r"], &[src, &out]);
    assert_eq!(code, 0, "{err}");
    let mut total = 0;
    for (name, bytes) in &want {
        let got = fs::read(out.join(name)).unwrap();
        assert_bytes_eq(&got, bytes, &name.to_string_lossy());
        total += bytes.len() as u64;
    }
    let files: u64 = report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "file")
        .map(|e| e["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(files, total, "{report}");
}

const MIB: usize = 1 << 20;

/// `copy --resume -v` of an 8 MiB source onto its first 6 MiB, `tamper`ed: (result, source,
/// report, whether stderr names the check's time).
fn resume_onto_prefix(tamper: impl Fn(&mut Vec<u8>)) -> (Vec<u8>, Vec<u8>, Value, bool) {
    let dir = tempdir();
    let want = data(8 * MIB);
    let src = write_file(dir.path(), "src", &want);
    let mut prefix = want[..6 * MIB].to_vec();
    tamper(&mut prefix);
    let dst = write_file(dir.path(), "dst", &prefix);
    let (code, report, err) = copy(&["--resume", "-v"], &[&src, &dst]);
    assert_eq!(code, 0, "{err}");
    // -v names the check and its time; asserted after the bytes.
    let checked = err.contains("checked in");
    (fs::read(&dst).unwrap(), want, report, checked)
}

#[test]
fn copy_resume_does_not_keep_a_prefix_whose_middle_differs() {
    let (got, want, report, checked) = resume_onto_prefix(|p| p[3 * MIB] ^= 0x5a);
    assert_bytes_eq(&got, &want, "resumed onto a prefix differing at 3 MiB");
    assert_eq!(report["resumed"], 0, "{report}");
    assert_eq!(report["entries"][0]["resumed"], 0, "{report}");
    assert_eq!(report["bytes"], (8 * MIB) as u64, "{report}");
    assert!(
        report["resume_check_seconds"].as_f64().is_some(),
        "{report}"
    );
    assert!(
        report["entries"][0]["resume_check_seconds"]
            .as_f64()
            .is_some(),
        "{report}"
    );
    assert!(checked, "no 'checked in' on the -v line");
}

#[test]
fn copy_resume_keeps_a_prefix_that_matches_throughout() {
    let (got, want, report, checked) = resume_onto_prefix(|_| {});
    assert_bytes_eq(&got, &want, "resumed onto a good prefix");
    assert_eq!(report["resumed"], (6 * MIB) as u64, "{report}");
    assert_eq!(
        report["entries"][0]["resumed"],
        (6 * MIB) as u64,
        "{report}"
    );
    assert_eq!(report["bytes"], (2 * MIB) as u64, "{report}");
    assert!(
        report["resume_check_seconds"].as_f64().is_some(),
        "{report}"
    );
    assert!(checked, "no 'checked in' on the -v line");
}

/// A loop device over an image file of its own, detached on drop.
struct LoopDevice {
    dev: String,
    _dir: tempfile::TempDir,
}

impl LoopDevice {
    fn new(len: u64) -> Result<LoopDevice, String> {
        let dir = tempdir();
        let img = dir.path().join("img");
        fs::File::create(&img).unwrap().set_len(len).unwrap();
        let out = std::process::Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&img)
            .output()
            .map_err(|e| format!("losetup: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(LoopDevice { dev, _dir: dir })
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.dev])
            .status();
    }
}

#[test]
fn copy_onto_a_block_device_writes_the_holes_as_zeros() {
    let device = match LoopDevice::new(8 * MIB as u64) {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipped: no loop device ({why})");
            return;
        }
    };
    let dev = Path::new(&device.dev);
    // Holes at the start, in the middle and at the end of 6 MiB.
    let len = 6 * MIB;
    let mut want = vec![0u8; len];
    let dir = tempdir();
    let src = dir.path().join("sparse.img");
    {
        use std::os::unix::fs::FileExt;
        let f = fs::File::create(&src).unwrap();
        f.set_len(len as u64).unwrap();
        for (at, n) in [(MIB, 1536 * 1024), (3 * MIB, MIB)] {
            let bytes = data(n);
            f.write_all_at(&bytes, at as u64).unwrap();
            want[at..at + n].copy_from_slice(&bytes);
        }
    }
    for flags in [&[][..], &["--sparse=always"][..]] {
        fs::write(dev, vec![0xaau8; 8 * MIB]).unwrap();
        let (code, report, err) = copy(flags, &[&src, dev]);
        let mut got = fs::read(dev).unwrap();
        got.truncate(len);
        assert_bytes_eq(&got, &want, &format!("{} after copy {flags:?}", device.dev));
        assert_eq!(code, 0, "copy {flags:?}: {err}");
        assert_eq!(report["bytes"], len as u64, "{report}");
        assert_eq!(report["holes"], 0, "{report}");
    }
}

/// Peak RSS (KiB) of `zerocat copy -r SRC DST` over a tree of `files` empty files, with
/// text stats.
fn copy_peak_rss(files: usize) -> i64 {
    // On tmpfs: ext4 skips inodes freed in the last ~30 s, and a rerun of this test then
    // creates its tree ten times slower (bench/lib/trees.py).
    let dir = tempfile::Builder::new()
        .prefix("zerocat-rss-")
        .tempdir_in("/dev/shm")
        .unwrap_or_else(|_| tempdir());
    let src = dir.path().join("src");
    for d in 0..files.div_ceil(500) {
        let sub = src.join(format!("d{d}"));
        fs::create_dir_all(&sub).unwrap();
        for f in 0..500.min(files - d * 500) {
            fs::File::create(sub.join(format!("f{f}"))).unwrap();
        }
    }
    let mut cmd = zerocat();
    cmd.args(["-q", "copy", "-r"])
        .arg(&src)
        .arg(dir.path().join("dst"));
    let mut child = cmd.spawn().unwrap();
    // VmHWM of the running image, polled until it exits: wait4's ru_maxrss would carry the
    // RSS of this test binary, which the child was forked from, across the exec.
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0i64;
    let started = std::time::Instant::now();
    let status = loop {
        if let Ok(text) = fs::read_to_string(&status_path) {
            if let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
            {
                peak = peak.max(kib);
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < crate::util::DEADLINE,
            "copy did not finish"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert!(status.success());
    assert_eq!(
        fs::read_dir(dir.path().join("dst").join("d0"))
            .unwrap()
            .count(),
        500.min(files)
    );
    peak
}

/// Issue 26 item 9: copy kept every entry's report for the whole run (68 MiB at 200,000
/// files). With text stats, only totals are kept: 40,000 files peak within 2 MiB of 5,000
/// (it grew by 15.5 MiB from 2,000 before: seen).
#[test]
fn copy_memory_does_not_grow_with_the_file_count_under_text_stats() {
    // A run too short for the poll to see may read as nothing: once more, then it counts.
    let measured = |files: usize| {
        let kib = copy_peak_rss(files);
        if kib > 2048 {
            kib
        } else {
            copy_peak_rss(files)
        }
    };
    let small = measured(5_000);
    let large = measured(40_000);
    eprintln!("copy -r peak RSS: {small} KiB for 5,000 files, {large} KiB for 40,000");
    assert!(
        small > 2048,
        "no reading of the small run's VmHWM: {small} KiB"
    );
    assert!(
        large - small < 2048,
        "peak RSS grew by {} KiB from 5,000 to 40,000 files",
        large - small
    );
}
