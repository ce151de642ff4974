//! What pv, cp and socat users expect: progress, `--limit`, SIGUSR1, the man page and
//! completions (and that the committed copies are fresh), help examples.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use clap::CommandFactory;
use zerocat::cli::{self, Cli};

use crate::util::*;

/// The stderr of a run with a bar: the bar's redraws are separated by `\r` and erased
/// with escape sequences; what is left after the last one is the report.
fn last_line(stderr: &str) -> String {
    let mut text = stderr.replace("\x1b[2K", "").replace("\x1b[1A", "");
    text = text.replace("\x1b[1B", "");
    text.split(['\r', '\n'])
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .to_string()
}

/// A bar for 2 MiB was drawn, then cleared, and the JSON report is the last line.
#[track_caller]
fn assert_bar_then_report(text: &str, path: &str) {
    assert!(
        text.contains("/ 2.00 MiB [") && text.contains("ETA"),
        "no bar with a total: {text:?}"
    );
    let report: serde_json::Value = serde_json::from_str(&last_line(text))
        .unwrap_or_else(|e| panic!("the report is not last ({e}): {text:?}"));
    assert_eq!(final_path(&report), path);
    assert_eq!(report["bytes"].as_u64(), Some(2 << 20));
}

/// `--progress` with stderr not a terminal: plain progress lines with the total, no cursor
/// control, then the report (issue 26 item 15: a bar's escapes went into logs).
fn assert_lines_then_report(text: &str, path: &str) {
    assert!(
        text.contains("% of 2.00 MiB"),
        "no progress line with a total: {text:?}"
    );
    assert!(
        !text.contains('\x1b') && !text.contains('\r'),
        "cursor control in a log: {text:?}"
    );
    let report: serde_json::Value = serde_json::from_str(&last_line(text))
        .unwrap_or_else(|e| panic!("the report is not last ({e}): {text:?}"));
    assert_eq!(final_path(&report), path);
    assert_eq!(report["bytes"].as_u64(), Some(2 << 20));
}

/// A temp dir holding a file "src" of `len` test bytes.
fn source(len: usize) -> (tempfile::TempDir, Vec<u8>, PathBuf) {
    let dir = tempdir();
    let payload = data(len);
    let src = write_file(dir.path(), "src", &payload);
    (dir, payload, src)
}

#[test]
fn no_bar_when_stderr_is_not_a_terminal() {
    let (dir, payload, src) = source(3 << 20);
    let dst = dir.path().join("dst");
    for stats in ["text", "json"] {
        let mut cmd = zerocat();
        cmd.args(["--limit", "8M", "--stats", stats, "pipe"])
            .arg(&src)
            .arg(&dst);
        let out = run(cmd);
        assert!(out.status.success(), "{}", stderr_text(&out));
        assert_bytes_eq(&std::fs::read(&dst).unwrap(), &payload, "dst");
        let err = stderr_text(&out);
        // One report line, nothing drawn: the run lasts ~375 ms, past a bar's first tick.
        assert_eq!(err.lines().count(), 1, "stderr: {err:?}");
        assert!(!err.contains('\r') && !err.contains('\x1b'), "{err:?}");
        if stats == "json" {
            let report = json_report(&out.stderr);
            assert_eq!(final_path(&report), "copy_file_range");
            assert_eq!(report["bytes"].as_u64(), Some(3 << 20));
        } else {
            assert!(
                err.starts_with("zerocat: 3.00 MiB in ")
                    && (err.contains(" ms (") || err.contains(" s (")),
                "human sizes and durations: {err}"
            );
        }
    }
}

#[test]
fn progress_flag_draws_a_bar_then_the_report() {
    let (_dir, payload, src) = source(2 << 20);
    let mut cmd = zerocat();
    cmd.args(["--progress", "--limit", "2M", "--stats", "json", "pipe"])
        .arg(&src)
        .arg("-");
    let out = run(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(&out.stdout, &payload, "stdout");
    assert_lines_then_report(&stderr_text(&out), "splice");
}

#[test]
fn quiet_and_no_progress_win_over_progress() {
    let (_dir, payload, src) = source(1 << 20);
    let mut cmd = zerocat();
    cmd.args([
        "--progress",
        "--no-progress",
        "--limit",
        "4M",
        "--stats",
        "json",
    ])
    .arg("pipe")
    .arg(&src)
    .arg("-");
    let out = run(cmd);
    assert_bytes_eq(&out.stdout, &payload, "stdout");
    assert_eq!(stderr_text(&out).lines().count(), 1);
    assert_eq!(final_path(&json_report(&out.stderr)), "splice");

    let mut cmd = zerocat();
    cmd.args(["-q", "--progress", "--limit", "4M", "pipe"])
        .arg(&src)
        .arg("-");
    let out = run(cmd);
    assert_bytes_eq(&out.stdout, &payload, "stdout");
    assert_eq!(stderr_text(&out), "", "-q prints nothing");
}

#[test]
fn a_pseudo_terminal_shows_a_bar_and_ends_with_the_report() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: `script` (bsdutils) is not installed; .ci/run installs it");
        return;
    }
    let (dir, payload, src) = source(2 << 20);
    let dst = dir.path().join("dst");
    let inner = format!(
        "stty cols 120 2>/dev/null; '{}' --limit 4M --stats json pipe '{}' '{}'",
        bin().display(),
        src.display(),
        dst.display()
    );
    let cmd = in_a_terminal(&inner);
    let out = run(cmd);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() && text.trim().is_empty() {
        eprintln!(
            "skipped: `script` could not open a pseudo-terminal here: {}",
            stderr_text(&out)
        );
        return;
    }
    assert!(out.status.success(), "{text}{}", stderr_text(&out));
    assert_bytes_eq(&std::fs::read(&dst).unwrap(), &payload, "dst");
    assert_bar_then_report(&text, "copy_file_range");
}

#[test]
fn limit_2m_on_6mib_takes_at_least_2_5_s_and_keeps_splice() {
    let (_dir, payload, src) = source(6 << 20);
    let mut cmd = zerocat();
    cmd.args(["--limit", "2M", "--stats", "json", "pipe"])
        .arg(&src)
        .arg("-");
    let started = Instant::now();
    let out = run(cmd);
    let took = started.elapsed();
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(&out.stdout, &payload, "stdout");
    // A limit bounds the time from below only.
    assert!(took >= Duration::from_millis(2500), "took {took:?}");
    let report = json_report(&out.stderr);
    assert_eq!(paths(&report), vec![("splice".to_string(), 6 << 20)]);
}

/// Runs `cmd`, sends it one SIGUSR1 once `writing()` says bytes reached the sink (the
/// handlers are installed by then), and returns its output and the one progress line
/// (the stderr line holding `mark`).
fn usr1_once(mut cmd: Command, writing: impl Fn() -> bool, mark: &str) -> (Output, String) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !writing() {
        assert!(
            started.elapsed() < DEADLINE,
            "zerocat never started writing"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed = Command::new("kill")
        .args(["-USR1", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = wait_with_deadline(child, DEADLINE);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let err = stderr_text(&out);
    let progress: Vec<&str> = err.lines().filter(|l| l.contains(mark)).collect();
    assert_eq!(progress.len(), 1, "one progress line: {err}");
    assert!(progress[0].starts_with("zerocat: "), "{err}");
    let line = progress[0].to_string();
    (out, line)
}

#[test]
fn sigusr1_prints_one_progress_line() {
    let (dir, payload, src) = source(2 << 20);
    let dst = dir.path().join("dst");
    let mut cmd = zerocat();
    cmd.args(["--limit", "2M", "--stats", "json", "pipe"])
        .arg(&src)
        .arg(&dst);
    let writing = || std::fs::metadata(&dst).map_or(0, |m| m.len()) > 0;
    let (out, _) = usr1_once(cmd, writing, "% of 2.00 MiB");
    assert_bytes_eq(&std::fs::read(&dst).unwrap(), &payload, "dst");
    assert_eq!(final_path(&json_report(&out.stderr)), "copy_file_range");
}

/// A temp dir holding a tree "src" of `n` files of `len` test bytes each (all different),
/// in two directories; returns each file's path under the tree and its bytes.
fn tree(n: usize, len: usize) -> (tempfile::TempDir, PathBuf, Vec<(PathBuf, Vec<u8>)>) {
    let dir = tempdir();
    let root = dir.path().join("src");
    let all = data(n * len);
    let files = all
        .chunks(len)
        .enumerate()
        .map(|(i, bytes)| {
            let rel = PathBuf::from(format!("d{}", i % 2)).join(format!("f{i}"));
            std::fs::create_dir_all(root.join(&rel).parent().unwrap()).unwrap();
            std::fs::write(root.join(&rel), bytes).unwrap();
            (rel, bytes.to_vec())
        })
        .collect();
    (dir, root, files)
}

#[track_caller]
fn assert_tree_copied(dst: &std::path::Path, files: &[(PathBuf, Vec<u8>)]) {
    for (rel, bytes) in files {
        let got = std::fs::read(dst.join(rel)).unwrap();
        assert_bytes_eq(&got, bytes, &rel.display().to_string());
    }
}

/// `zerocat --stats json copy -r --reflink=never SRC DST` with `flags` first.
fn copy_tree(flags: &[&str], src: &std::path::Path, dst: &std::path::Path) -> Command {
    let mut cmd = zerocat();
    cmd.args(flags)
        .args(["--stats", "json", "copy", "-r", "--reflink", "never"])
        .arg(src)
        .arg(dst);
    cmd
}

#[test]
fn copy_progress_counts_bytes_and_files_of_the_tree() {
    let (dir, src, files) = tree(4, 512 << 10);
    let dst = dir.path().join("dst");
    let out = run(copy_tree(&["--progress", "--limit", "2M"], &src, &dst));
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_tree_copied(&dst, &files);
    let text = stderr_text(&out);
    // The totals come from a walk of the tree: bytes and files.
    assert!(text.contains("/4 files"), "no files counter: {text:?}");
    assert_lines_then_report(&text, "copy_file_range");
    let report: serde_json::Value = serde_json::from_str(&last_line(&text)).unwrap();
    assert_eq!(report["files"].as_u64(), Some(4));
    assert_eq!(
        paths(&report),
        vec![("copy_file_range".to_string(), 2 << 20)]
    );
}

#[test]
fn copy_limit_2m_on_6mib_takes_at_least_2_5_s_and_keeps_copy_file_range() {
    // Six files of 1 MiB: one pacer for the whole copy. A pacer per file would let each
    // file's first slice through unpaced and finish in ~2.25 s.
    let (dir, src, files) = tree(6, 1 << 20);
    let dst = dir.path().join("dst");
    let started = Instant::now();
    let out = run(copy_tree(&["--limit", "2M"], &src, &dst));
    let took = started.elapsed();
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_tree_copied(&dst, &files);
    assert!(took >= Duration::from_millis(2500), "took {took:?}");
    let report = json_report(&out.stderr);
    assert_eq!(
        paths(&report),
        vec![("copy_file_range".to_string(), 6 << 20)]
    );
}

#[test]
fn sigusr1_prints_one_progress_line_for_copy() {
    let (dir, src, files) = tree(4, 1 << 20);
    let dst = dir.path().join("dst");
    let copied = |d: &str| -> u64 {
        let listing = std::fs::read_dir(dst.join(d));
        listing.map_or(0, |l| {
            l.flatten()
                .map(|f| f.metadata().map_or(0, |m| m.len()))
                .sum()
        })
    };
    let writing = || copied("d0") + copied("d1") > 0;
    let cmd = copy_tree(&["--limit", "2M"], &src, &dst);
    // No bar, so no walk for totals: bytes, rate and the files done so far.
    let (out, line) = usr1_once(cmd, writing, " done");
    assert!(line.contains("/s), "), "{line}");
    assert_tree_copied(&dst, &files);
    assert_eq!(final_path(&json_report(&out.stderr)), "copy_file_range");
}

/// `zerocat --stats json tee SRC a b` with `flags` first: b is fed by splice out of the
/// source's pipe, a by tee(2) into a pipe of its own.
fn tee_two_files(flags: &[&str], src: &std::path::Path, dir: &std::path::Path) -> Command {
    let mut cmd = zerocat();
    cmd.args(flags)
        .args(["--stats", "json", "tee"])
        .arg(src)
        .arg(dir.join("a"))
        .arg(dir.join("b"));
    cmd
}

#[test]
fn tee_progress_draws_a_bar_then_the_report() {
    let (dir, payload, src) = source(2 << 20);
    let mut cmd = zerocat();
    cmd.args(["--progress", "--limit", "2M", "--stats", "json", "tee"])
        .arg(&src)
        .arg(dir.path().join("a"))
        .arg("-");
    let out = run(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(&out.stdout, &payload, "stdout");
    assert_bytes_eq(&std::fs::read(dir.path().join("a")).unwrap(), &payload, "a");
    let text = stderr_text(&out);
    assert_lines_then_report(&text, "tee");
    let report: serde_json::Value = serde_json::from_str(&last_line(&text)).unwrap();
    // The file is fed out of the source's pipe, stdout (a pipe) by tee(2) directly.
    assert_eq!(final_path(&report["sinks"][0]), "splice");
    assert_eq!(final_path(&report["sinks"][1]), "tee");
}

#[test]
fn tee_limit_2m_on_6mib_takes_at_least_2_5_s_and_keeps_tee_and_splice() {
    let (dir, payload, src) = source(6 << 20);
    let started = Instant::now();
    let out = run(tee_two_files(&["--limit", "2M"], &src, dir.path()));
    let took = started.elapsed();
    assert!(out.status.success(), "{}", stderr_text(&out));
    for sink in ["a", "b"] {
        let got = std::fs::read(dir.path().join(sink)).unwrap();
        assert_bytes_eq(&got, &payload, sink);
    }
    assert!(took >= Duration::from_millis(2500), "took {took:?}");
    let report = json_report(&out.stderr);
    assert_eq!(paths(&report), vec![("tee".to_string(), 6 << 20)]);
    assert_eq!(
        paths(&report["sinks"][0]),
        vec![("tee".to_string(), 6 << 20)]
    );
    assert_eq!(
        paths(&report["sinks"][1]),
        vec![("splice".to_string(), 6 << 20)]
    );
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every generated file with what it should hold now.
fn generated() -> Vec<(PathBuf, String)> {
    use clap::ValueEnum;
    use clap_complete::Generator;
    let mut files = vec![(root().join("man/zerocat.1"), cli::man_page())];
    for shell in clap_complete::Shell::value_variants() {
        files.push((
            root().join("completions").join(shell.file_name("zerocat")),
            cli::completions(*shell),
        ));
    }
    files
}

#[test]
fn committed_man_page_and_completions_are_fresh() {
    let update = std::env::var_os("UPDATE_GENERATED").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (path, want) in generated() {
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have == want {
            continue;
        }
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, want).unwrap();
            eprintln!("rewrote {}", path.display());
        } else {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated files (run `UPDATE_GENERATED=1 cargo test committed_man_page`): {stale:?}"
    );
}

#[test]
fn the_man_page_renders_and_documents_the_contract() {
    let page = cli::man_page();
    for section in [
        "COMMANDS",
        "ENDPOINTS",
        "PATHS",
        "REPORT",
        "EXIT STATUS",
        "EXAMPLES",
        "SIGNALS",
    ] {
        assert!(page.contains(&format!(".SH {section}\n")), "no {section}");
    }
    if Command::new("man").arg("--version").output().is_err() {
        eprintln!("skipped the render: `man` is not installed (man-db; .ci/run installs it)");
        return;
    }
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "\"$0\" man | man -l -"])
        .arg(bin())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .env("MANWIDTH", "200");
    let out = run(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    // Words as a reader sees them, whatever the line breaks.
    let text = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for words in [
        "tcp-listen:[HOST:]PORT",
        "A listener with no HOST binds 127.0.0.1.",
        "copy_file_range",
        "fallbacks",
        "141",
        "zerocat pipe big.iso - | sha256sum",
    ] {
        assert!(text.contains(words), "rendered page lacks {words:?}");
    }
    assert!(
        !stderr_text(&out).contains("warning"),
        "roff warnings: {}",
        stderr_text(&out)
    );
}

/// Every key of every object, nested ones too.
fn json_keys(value: &serde_json::Value, keys: &mut std::collections::BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, inner) in map {
                keys.insert(key.clone());
                json_keys(inner, keys);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| json_keys(v, keys)),
        _ => {}
    }
}

#[test]
fn the_man_page_names_every_field_of_the_copy_and_tee_reports() {
    let (dir, src, _files) = tree(2, 4096);
    let out = run(copy_tree(&[], &src, &dir.path().join("dst")));
    assert!(out.status.success(), "{}", stderr_text(&out));
    let copy = json_report(&out.stderr);
    let out = run(tee_two_files(&[], &src.join("d0/f0"), dir.path()));
    assert!(out.status.success(), "{}", stderr_text(&out));
    let tee = json_report(&out.stderr);
    assert_eq!(final_path(&copy), "copy_file_range");
    assert_eq!(final_path(&tee), "tee");
    let mut keys = std::collections::BTreeSet::new();
    json_keys(&copy, &mut keys);
    json_keys(&tee, &mut keys);
    let page = cli::man_page();
    let report = &page[page.find(".SH REPORT").unwrap()..page.find(".SH PROGRESS").unwrap()];
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !report.contains(&format!("\\fB{k}\\fR")))
        .collect();
    assert!(missing.is_empty(), "REPORT (src/man.rs) lacks {missing:?}");
}

/// Each subcommand's --help ends with 2 to 4 examples (`Examples:` in `after_help`).
#[test]
fn every_subcommand_help_has_two_to_four_examples() {
    let cmd = Cli::command();
    for sub in cmd.get_subcommands() {
        let after = sub
            .get_after_help()
            .map(|s| s.to_string())
            .unwrap_or_default();
        let examples = after
            .split_once("Examples:")
            .map(|(_, rest)| {
                rest.lines()
                    .filter(|l| l.starts_with("  ") && l.contains("zerocat "))
                    .count()
            })
            .unwrap_or(0);
        assert!(
            (2..=4).contains(&examples),
            "`zerocat {} --help` has {examples} examples; give it 2 to 4 under \"Examples:\" in its after_help (src/cli.rs)",
            sub.get_name()
        );
    }
}

/// Runs `inner` (a shell line) under `script`, a pseudo-terminal of 24 x 60; its output,
/// escapes removed, or None (the reason printed) when no pty can be had here.
fn under_a_60_column_terminal(inner: &str) -> Option<String> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: `script` (bsdutils) is not installed; .ci/run installs it");
        return None;
    }
    let cmd = in_a_terminal(&format!("stty rows 24 cols 60; {inner}"));
    let out = run(cmd);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() && text.trim().is_empty() {
        eprintln!(
            "skipped: `script` could not open a pseudo-terminal here: {}",
            stderr_text(&out)
        );
        return None;
    }
    assert!(out.status.success(), "{text}{}", stderr_text(&out));
    let mut plain = String::new();
    let mut escape = false;
    for c in text.chars() {
        match (escape, c) {
            (false, '\x1b') => escape = true,
            (true, c) if c.is_ascii_alphabetic() => escape = false,
            (true, _) => {}
            (false, c) => plain.push(c),
        }
    }
    Some(plain)
}

/// Issue 29 item 4: the bar fits the terminal (60 columns: it wrapped at 80 before), shows
/// the percentage when the size is known, and is not drawn at all when the data goes to
/// that same terminal (zerocat as cat: it was drawn between the data's lines).
#[test]
fn the_bar_fits_the_terminal_shows_percent_and_keeps_off_data_on_it() {
    let (dir, payload, src) = source(2 << 20);
    let dst = dir.path().join("dst");
    let inner = format!(
        "'{}' --limit 4M pipe '{}' '{}'",
        bin().display(),
        src.display(),
        dst.display()
    );
    let Some(screen) = under_a_60_column_terminal(&inner) else {
        return;
    };
    assert_bytes_eq(&std::fs::read(&dst).unwrap(), &payload, "dst");
    let bars: Vec<&str> = screen
        .split(['\r', '\n'])
        .filter(|l| l.contains("ETA"))
        .collect();
    assert!(!bars.is_empty(), "a bar was drawn: {screen:?}");
    for bar in &bars {
        assert!(
            bar.trim_end().chars().count() <= 60,
            "fits 60 columns: {bar:?}"
        );
        assert!(bar.contains('%'), "shows the percentage: {bar:?}");
    }
    // The data to the terminal itself: no bar among it.
    let text: Vec<u8> = (0..40_000)
        .flat_map(|i| format!("line {i}\n").into_bytes())
        .collect();
    let lines = write_file(dir.path(), "lines", &text);
    let inner = format!(
        "'{}' --limit 1M pipe '{}' -",
        bin().display(),
        lines.display()
    );
    let Some(screen) = under_a_60_column_terminal(&inner) else {
        return;
    };
    assert!(
        screen.contains("line 39999"),
        "the data reached the terminal"
    );
    assert!(
        !screen.contains("ETA"),
        "no bar among the data: {}",
        &screen[..300]
    );
}

/// Issue 42 item 3: every scheme of the grammar's table, with its aliases and option words,
/// is in `-h` and `--help`, the unknown-scheme hint, the man page's ENDPOINTS, the bash
/// completions (pipe, tee and relay offer `NAME:`) and README's endpoint table (written by
/// hand: this is what keeps it whole).
#[test]
fn every_scheme_is_in_help_hint_man_page_completions_and_readme() {
    let stdout_of = |args: &[&str]| {
        let out = run({
            let mut cmd = zerocat();
            cmd.args(args);
            cmd
        });
        assert!(out.status.success(), "{args:?}: {}", stderr_text(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let short_help = stdout_of(&["-h"]);
    let long_help = stdout_of(&["--help"]);
    let out = run({
        let mut cmd = zerocat();
        cmd.args(["pipe", "zzzz:x", "-"]);
        cmd
    });
    assert_eq!(out.status.code(), Some(2));
    let hint = stderr_text(&out);
    let hint_words: Vec<&str> = hint
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .collect();
    let page = cli::man_page();
    // The list made from the table, before the hand-written details: an entry per scheme
    // (`.TP` and its form in bold), each option an entry inside it (`.TP` and `\fB,`).
    let list = &page[page.find(".SH ENDPOINTS").unwrap()..page.find(".SS ").unwrap()];
    let mut man_entries: Vec<String> = Vec::new();
    for piece in list.split("\n.TP\n\\fB") {
        match man_entries.last_mut() {
            Some(entry) if piece.starts_with(',') => entry.push_str(&format!("\\fB{piece}")),
            _ => man_entries.push(piece.to_string()),
        }
    }
    let man_entry = |name: &str| {
        let head = format!("{}:", name.replace('-', "\\-"));
        let entry = man_entries.iter().find(|e| e.starts_with(&head));
        entry.cloned().unwrap_or_default()
    };
    let bash = cli::completions(clap_complete::Shell::Bash);
    let word_lists: Vec<&str> = ["pipe", "tee", "relay"]
        .iter()
        .map(|sub| {
            let case = bash
                .find(&format!("zerocat__subcmd__{sub})\n"))
                .unwrap_or_else(|| panic!("no case for {sub} in the bash completions"));
            let opts = &bash[case..];
            opts[..opts.find("\n            if").unwrap()].trim()
        })
        .collect();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let table: String = readme[readme
        .find("\n## Endpoints\n")
        .expect("README: ## Endpoints")..]
        .lines()
        .skip(2)
        .take_while(|l| l.is_empty() || l.starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        table.contains("| `-` |"),
        "README's endpoint table not found"
    );

    let mut missing = Vec::new();
    for info in zerocat::endpoint::SCHEME_TABLE {
        let endpoints = &man_entry(info.name);
        for (i, word) in info.words().enumerate() {
            let prefix = format!("{word}:");
            let in_help = if i == 0 {
                format!("  {prefix}")
            } else {
                format!("({prefix})")
            };
            let roff = prefix.replace('-', "\\-");
            for (place, found) in [
                ("-h", short_help.contains(&in_help)),
                ("--help", long_help.contains(&in_help)),
                ("the unknown-scheme hint", hint_words.contains(&word)),
                ("the man page's ENDPOINTS", endpoints.contains(&roff)),
                (
                    "README's endpoint table",
                    table.contains(&format!("`{prefix}")),
                ),
            ] {
                if !found {
                    missing.push(format!("{prefix} in {place}"));
                }
            }
            if i == 0 {
                for (sub, words) in ["pipe", "tee", "relay"].iter().zip(&word_lists) {
                    if !words.split([' ', '"']).any(|w| w == prefix) {
                        missing.push(format!("{prefix} in the bash completions of {sub}"));
                    }
                }
            }
        }
        for option in info.options {
            let roff = format!("\\fB,{}", option.word().replace('-', "\\-"));
            for (place, found) in [
                ("-h", short_help.contains(option.form)),
                ("--help", long_help.contains(&format!(",{}", option.form))),
                ("the man page's ENDPOINTS", endpoints.contains(&roff)),
            ] {
                if !found {
                    missing.push(format!("{}'s {} in {place}", info.name, option.form));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "missing (the list comes from SCHEME_TABLE, src/endpoint/grammar.rs; README is by \
         hand): {missing:#?}"
    );
}

/// Issue 42 item 5: in a 50-column terminal the bar is one line that fits, with fields
/// dropped rather than an empty `[]` wrapped onto a second line; and at any width it
/// leaves room for the `^C` the terminal echoes after it on Ctrl-C: a bar that filled the
/// line had the echo wrap it onto a new line, and clearing "the bar's line" then cleared
/// that one, so the bar stayed above the report. After the echo the bar's line is cleared
/// and the report is what is left.
#[test]
fn a_narrow_terminal_keeps_the_bar_on_one_line_and_ctrl_c_leaves_only_the_report() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: `script` (bsdutils) is not installed; .ci/run installs it");
        return;
    }
    for columns in [50, 100] {
        let (dir, payload, src) = source(4 << 20);
        let dst = dir.path().join("dst");
        let inner = format!(
            "stty rows 24 cols {columns}; '{}' --limit 1M pipe '{}' '{}'",
            bin().display(),
            src.display(),
            dst.display()
        );
        let mut cmd = in_a_terminal(&inner);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut keys = child.stdin.take().unwrap();
        std::thread::sleep(Duration::from_millis(1200));
        // Ctrl-C typed at the terminal: the line discipline echoes ^C and sends SIGINT.
        use std::io::Write;
        keys.write_all(b"\x03").unwrap();
        let out = wait_with_deadline(child, DEADLINE);
        drop(keys);
        let raw = String::from_utf8_lossy(&out.stdout).into_owned();
        if !raw.contains("zerocat") {
            eprintln!("SKIPPED: `script` could not run a pseudo-terminal here: {raw:?}");
            return;
        }
        let plain = raw.replace("\x1b[2K", "");
        let bars: Vec<&str> = plain
            .split(['\r', '\n'])
            .filter(|l| l.contains('%'))
            .collect();
        assert!(!bars.is_empty(), "{columns}: no bar: {raw:?}");
        for bar in &bars {
            let drawn = bar.trim_end_matches("^C");
            assert!(!drawn.contains("[]"), "{columns}: an empty bar: {raw:?}");
            assert!(
                drawn.chars().count() + "^C".len() < columns,
                "{columns}: no room for the ^C echo: {bar:?}"
            );
        }
        let echoed = raw.rfind("^C").expect("the terminal echoed ^C");
        let rest = &raw[echoed..];
        let report = rest.find("interrupted").expect("a report after Ctrl-C");
        let cleared = rest[..report]
            .rfind("\r\x1b[2K")
            .unwrap_or_else(|| panic!("{columns}: the bar's line is not cleared: {rest:?}"));
        assert!(
            !rest[cleared..].contains('%'),
            "{columns}: the bar is cleared right before the report: {rest:?}"
        );
        assert!(rest.contains("via copy_file_range"), "{rest:?}");
        let got = std::fs::read(&dst).unwrap();
        assert!(got.len() < payload.len(), "the run was interrupted");
        assert_bytes_eq(&got, &payload[..got.len()], "dst");
    }
}

/// `sh -c INNER` in a pseudo-terminal of `script`'s (what it printed comes back on stdout),
/// with a clean environment and no stdin unless the caller gives one.
pub fn in_a_terminal(inner: &str) -> Command {
    let mut cmd = Command::new("script");
    cmd.args(["-qec", inner, "/dev/null"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("SHELL", "/bin/sh")
        .env("TERM", "xterm")
        .stdin(Stdio::null());
    // The terminal's hang-up must reach zerocat (the terminal tests send it).
    sighup_at_its_default(&mut cmd);
    cmd
}
