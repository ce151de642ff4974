//! copy's metadata and security: setuid/setgid under --preserve by a non-root user, existing destination directories' modes, O_NOFOLLOW on sources, --special --preserve modes.

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::util::{
    assert_bytes_eq, data, entry, json_report, run, stderr_text, tempdir, wait_with_deadline,
    write_file, zerocat, AsNobody, DEADLINE, NOBODY,
};

fn is_root() -> bool {
    fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(1) == 0
}

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// `copy --preserve` as uid 65534 of a root-owned setuid/setgid file and setgid directory:
/// the copy belongs to 65534, so it must not keep the bits (cp clears them when chown fails).
#[test]
fn copy_preserve_by_a_non_root_user_clears_setuid_and_setgid() {
    let Some(nobody) = AsNobody::new() else {
        return;
    };
    let dir = nobody.path();
    chmod(dir, 0o755);
    let src = dir.join("src");
    fs::create_dir(&src).unwrap();
    let bytes = data(70_001);
    let prog = write_file(&src, "prog", &bytes);
    chmod(&prog, 0o6755);
    let sub = src.join("sub");
    fs::create_dir(&sub).unwrap();
    chmod(&sub, 0o2755);
    chmod(&src, 0o755);
    let out_dir = dir.join("out");
    fs::create_dir(&out_dir).unwrap();
    std::os::unix::fs::chown(&out_dir, Some(NOBODY), Some(NOBODY)).unwrap();

    let mut cmd = nobody.zerocat();
    cmd.args(["--stats", "json", "copy", "-r", "--preserve"])
        .arg(&src)
        .arg(&out_dir);
    let out = run(cmd);
    let text = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let copy = out_dir.join("src/prog");
    let meta = fs::metadata(&copy).unwrap();
    assert_eq!(meta.uid(), NOBODY, "the copy belongs to the copier");
    assert_bytes_eq(
        &fs::read(&copy).unwrap(),
        &bytes,
        "the setuid program's copy",
    );
    assert_eq!(
        meta.mode() & 0o7777,
        0o755,
        "a copy owned by the copier keeps no setuid/setgid (was {:o})",
        meta.mode() & 0o7777
    );
    assert_eq!(
        mode_of(&out_dir.join("src/sub")),
        0o755,
        "a directory owned by the copier keeps no setgid"
    );
    let report = json_report(&out.stderr);
    assert_eq!(report["files"], 1, "{report}");
    assert_eq!(entry(&report, "prog")["error"], Value::Null, "{report}");
}

/// Root keeps the owner, so `--preserve` keeps setuid/setgid exactly (the chown must come
/// before the chmod, or the kernel clears the bits).
#[test]
fn copy_preserve_by_root_keeps_setuid_and_setgid() {
    let dir = tempdir();
    let bytes = data(4097);
    let prog = write_file(dir.path(), "prog", &bytes);
    chmod(&prog, 0o6755);
    let copy = dir.path().join("copy");
    let out = run({
        let mut c = zerocat();
        c.args(["copy", "--preserve"]).arg(&prog).arg(&copy);
        c
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_bytes_eq(&fs::read(&copy).unwrap(), &bytes, "copy");
    if !is_root() {
        eprintln!("skipped the mode check: not root, the owner cannot be kept");
        return;
    }
    assert_eq!(mode_of(&copy), 0o6755);
}

/// `copy -r` into an existing 0700 directory left it 0755: without --preserve only the
/// directories the copy creates get a mode; under --preserve the source's mode is set and a
/// warning names the directory and both modes when that opens it.
#[test]
fn copy_r_does_not_loosen_an_existing_destination_directory() {
    let dir = tempdir();
    let src = dir.path().join("tree");
    fs::create_dir_all(src.join("new")).unwrap();
    let bytes = data(12_345);
    write_file(&src, "f", &bytes);
    chmod(&src, 0o755);
    chmod(&src.join("new"), 0o751);
    let dst = dir.path().join("dst");
    fs::create_dir_all(dst.join("tree")).unwrap();
    chmod(&dst.join("tree"), 0o700);

    let out = run({
        let mut c = zerocat();
        c.args(["--stats", "json", "copy", "-r"])
            .arg(&src)
            .arg(&dst);
        c
    });
    let text = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_bytes_eq(&fs::read(dst.join("tree/f")).unwrap(), &bytes, "f");
    assert_eq!(
        mode_of(&dst.join("tree")),
        0o700,
        "the existing directory keeps its mode"
    );
    assert_eq!(
        mode_of(&dst.join("tree/new")),
        0o751,
        "a created directory gets the source's mode (umask 022 keeps 0751)"
    );
    let report = json_report(&out.stderr);
    assert_eq!(report["dirs"], 2, "{report}");
    assert!(!text.contains("warning"), "{text}");

    // --preserve: cp -p's exact mode, said out loud when it opens the directory.
    let out = run({
        let mut c = zerocat();
        c.args(["--stats", "json", "copy", "-r", "--preserve"])
            .arg(&src)
            .arg(&dst);
        c
    });
    let text = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(mode_of(&dst.join("tree")), 0o755);
    let warning = format!(
        "zerocat: warning: '{}': mode 0700 -> 0755 (--preserve: the source's mode opens an existing directory)",
        dst.join("tree").display()
    );
    assert!(text.contains(&warning), "want {warning:?} in {text}");
    assert_bytes_eq(&fs::read(dst.join("tree/f")).unwrap(), &bytes, "f");
}

/// `--special --preserve` made FIFOs through the umask (0666 -> 0644); without --preserve
/// the umask applies, as with cp.
#[test]
fn copy_special_preserve_sets_the_fifos_exact_mode() {
    let dir = tempdir();
    let src = dir.path().join("tree");
    fs::create_dir(&src).unwrap();
    let fifo = src.join("fifo");
    nix_mkfifo(&fifo);
    chmod(&fifo, 0o666);
    let bytes = data(333);
    write_file(&src, "f", &bytes);
    for (preserve, want) in [(true, 0o666), (false, 0o644)] {
        let dst = dir.path().join(format!("dst-{preserve}"));
        let mut c = zerocat();
        c.args(["--stats", "json", "copy", "-r", "--special"]);
        if preserve {
            c.arg("--preserve");
        }
        // sh sets the umask the child inherits.
        let mut sh = Command::new("sh");
        sh.arg("-c")
            .arg("umask 022; exec \"$@\"")
            .arg("sh")
            .arg(c.get_program())
            .args(c.get_args())
            .arg(&src)
            .arg(&dst)
            .stdin(Stdio::null());
        let out = run(sh);
        let text = stderr_text(&out);
        assert_eq!(out.status.code(), Some(0), "{text}");
        let made = dst.join("fifo");
        assert!(fs::symlink_metadata(&made).unwrap().file_type().is_fifo());
        assert_eq!(
            mode_of(&made),
            want,
            "--preserve {preserve}: the FIFO's mode (was {:o})",
            mode_of(&made)
        );
        assert_bytes_eq(&fs::read(dst.join("f")).unwrap(), &bytes, "f");
        assert_eq!(json_report(&out.stderr)["specials"], 1);
    }
}

fn nix_mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// What the walk found at `tree/victim` (a file or a directory) becomes a symlink to a
/// secret before zerocat opens it. strace delays that one open (`-P` path filters,
/// `delay_enter`, `when=2`) to make the window wide; the copy must not follow the link: the secret's
/// bytes never reach the destination, and the entry is reported failed.
fn swapped_after_listing(victim_is_dir: bool) {
    if crate::util::strace_missing() {
        return;
    }
    let dir = tempdir();
    let src = dir.path().join("tree");
    fs::create_dir(&src).unwrap();
    let innocent = data(5000);
    let victim = src.join("victim");
    let secret_bytes = b"SECRET-SECRET-SECRET\n".repeat(100);
    let secret = if victim_is_dir {
        fs::create_dir(&victim).unwrap();
        write_file(&victim, "inner", &innocent);
        let secret = dir.path().join("secret");
        fs::create_dir(&secret).unwrap();
        write_file(&secret, "inner", &secret_bytes);
        secret
    } else {
        write_file(&src, "victim", &innocent);
        write_file(dir.path(), "secret", &secret_bytes)
    };
    let dst = dir.path().join("dst");

    let child = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=openat,open"])
        .args(["-e", "inject=openat,open:delay_enter=1500000:when=2"])
        // The first open is the tree's, the second the victim's: by path (old) or at the
        // tree's fd (matched through the fd).
        .arg("-P")
        .arg(&src)
        .arg("-P")
        .arg(&victim)
        .arg(crate::util::bin())
        // strace counts `when=` per thread: -j 1 keeps both opens on one thread
        // (tests/parallel.rs has the same swap under -j).
        .args(["--stats", "json", "copy", "-r", "-j", "1"])
        .arg(&src)
        .arg(&dst)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // zerocat is inside the delayed open by now (it starts in well under 0.7 s).
    thread::sleep(Duration::from_millis(700));
    if victim_is_dir {
        fs::remove_dir_all(&victim).unwrap();
    } else {
        fs::remove_file(&victim).unwrap();
    }
    std::os::unix::fs::symlink(&secret, &victim).unwrap();
    let out = wait_with_deadline(child, DEADLINE);
    let text = stderr_text(&out);
    if text.contains("strace:") && !text.contains("zerocat") {
        eprintln!("skipped: strace refused: {text}");
        return;
    }
    for copied in [dst.join("victim"), dst.join("victim/inner")] {
        if let Ok(got) = fs::read(&copied) {
            assert!(
                !got.windows(20).any(|w| w == b"SECRET-SECRET-SECRET"),
                "the secret's bytes reached {}: {text}",
                copied.display()
            );
        }
    }
    let report = json_report(&out.stderr);
    let e = entry(&report, "victim");
    assert!(
        // ELOOP for a file; O_DIRECTORY|O_NOFOLLOW says ENOTDIR for a symlink.
        e["error"]
            .as_str()
            .is_some_and(|m| m.contains("symbolic link") || m.contains("Not a directory")),
        "the swapped entry is reported failed: {report}"
    );
    assert_eq!(report["failed"], 1, "{report}");
    assert_eq!(out.status.code(), Some(1), "{text}");
}

#[test]
fn copy_r_does_not_follow_a_symlink_swapped_in_after_the_listing() {
    swapped_after_listing(false);
}

#[test]
fn copy_r_does_not_follow_a_symlink_swapped_in_for_a_directory() {
    swapped_after_listing(true);
}

/// A destination operand that is a symlink to a directory is followed (the copy goes inside
/// it, as with cp); a symlink to a directory at a name *inside* the tree is refused, as cp
/// refuses it, and nothing is written through it.
#[test]
fn copy_r_into_a_symlink_to_a_directory_follows_only_the_operand() {
    let dir = tempdir();
    let src = dir.path().join("tree");
    fs::create_dir_all(src.join("sub")).unwrap();
    let bytes = data(9999);
    write_file(&src.join("sub"), "f", &bytes);
    let real = dir.path().join("real");
    fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();

    let out = run({
        let mut c = zerocat();
        c.args(["--stats", "json", "copy", "-r"])
            .arg(&src)
            .arg(&link);
        c
    });
    let text = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_bytes_eq(&fs::read(real.join("tree/sub/f")).unwrap(), &bytes, "f");
    assert_eq!(json_report(&out.stderr)["files"], 1);

    let dst = dir.path().join("dst");
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir_all(&dst).unwrap();
    fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dst.join("tree")).unwrap();
    let out = run({
        let mut c = zerocat();
        c.args(["--stats", "json", "copy", "-r"])
            .arg(&src)
            .arg(&dst);
        c
    });
    let text = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("cannot overwrite a non-directory with a directory"),
        "{text}"
    );
    assert_eq!(
        fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing written through the link"
    );
    assert_eq!(json_report(&out.stderr)["failed"], 1);
}

/// A path component swapped for a symlink: `tree/mid` is listed, then (while strace holds
/// that listing's getdents) renamed away and replaced by a symlink to a secret directory
/// holding a `victim` too. Opening `tree/mid/victim` by path would follow the new link; the
/// walk opens it relative to the directory it listed (openat), so the copy holds the
/// original bytes and the secret's never.
#[test]
fn copy_r_opens_entries_relative_to_the_listed_directory() {
    if crate::util::strace_missing() {
        return;
    }
    let dir = tempdir();
    let src = dir.path().join("tree");
    let mid = src.join("mid");
    fs::create_dir_all(&mid).unwrap();
    let innocent = data(5000);
    write_file(&mid, "victim", &innocent);
    let secret = dir.path().join("secret");
    fs::create_dir(&secret).unwrap();
    write_file(&secret, "victim", &b"SECRET-SECRET-SECRET\n".repeat(100));
    let dst = dir.path().join("dst");

    let child = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=getdents64"])
        .args(["-e", "inject=getdents64:delay_exit=1500000:when=1", "-P"])
        .arg(&mid)
        .arg(crate::util::bin())
        .args(["--stats", "json", "copy", "-r"])
        .arg(&src)
        .arg(&dst)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // zerocat is inside the delayed listing of `mid` by now.
    thread::sleep(Duration::from_millis(700));
    fs::rename(&mid, dir.path().join("moved")).unwrap();
    std::os::unix::fs::symlink(&secret, &mid).unwrap();
    let out = wait_with_deadline(child, DEADLINE);
    let text = stderr_text(&out);
    if text.contains("strace:") && !text.contains("zerocat") {
        eprintln!("skipped: strace refused: {text}");
        return;
    }
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{text}"
    );
    let got = fs::read(dst.join("mid/victim")).unwrap_or_default();
    assert!(
        !got.windows(20).any(|w| w == b"SECRET-SECRET-SECRET"),
        "the secret's bytes reached dst/mid/victim: {text}"
    );
    assert_bytes_eq(&got, &innocent, "dst/mid/victim, from the listed directory");
    let report = json_report(&out.stderr);
    assert!(
        report["seconds"].as_f64().unwrap() >= 1.0,
        "strace held the listing while the test swapped `mid`: {report}"
    );
    assert_eq!(
        entry(&report, "mid/victim")["error"],
        Value::Null,
        "{report}"
    );
    assert_eq!(report["files"], 1, "{report}");
}

/// Issue 26 item 3: `copy -j` read the umask by setting 022 and back on the walk thread
/// while workers created files, so under `umask 077` some copies came out 0644. Every
/// created file and directory gets 0600/0700 here, and (where strace runs) the copy never
/// calls umask(2) at all, so no window can open.
#[test]
fn copy_jobs_never_write_the_umask_and_modes_follow_umask_077() {
    let dir = tempdir();
    let src = dir.path().join("src");
    let mut files = Vec::new();
    for i in 0..200 {
        let sub = src.join(format!("d{i:03}"));
        fs::create_dir_all(&sub).unwrap();
        fs::set_permissions(&sub, fs::Permissions::from_mode(0o755)).unwrap();
        let f = write_file(&sub, "f", &data(100 + i));
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        files.push((format!("d{i:03}"), data(100 + i)));
    }
    let dst = dir.path().join("dst");
    let trace = dir.path().join("trace");
    let have_strace = !crate::util::strace_missing();
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    if have_strace {
        args.extend(crate::util::strace_of("umask", &trace));
    }
    args.push(crate::util::bin().into());
    for a in ["-q", "copy", "-r", "-j", "4"] {
        args.push(a.into());
    }
    args.push(src.clone().into());
    args.push(dst.clone().into());
    let out = run({
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("umask 077; exec \"$@\"")
            .arg("sh")
            .args(&args);
        cmd
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    for (name, bytes) in &files {
        let d = dst.join(name);
        let f = d.join("f");
        assert_bytes_eq(&fs::read(&f).unwrap(), bytes, "copied file");
        let fmode = fs::metadata(&f).unwrap().permissions().mode() & 0o7777;
        let dmode = fs::metadata(&d).unwrap().permissions().mode() & 0o7777;
        assert_eq!(fmode, 0o600, "{name}/f under umask 077");
        assert_eq!(dmode, 0o700, "{name} under umask 077");
    }
    if have_strace {
        let trace = fs::read_to_string(&trace).unwrap();
        assert!(
            !trace.lines().any(|l| l.contains("umask(")),
            "copy wrote the umask while workers ran:\n{trace}"
        );
    }
}
