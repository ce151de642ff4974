//! What happened to each entry and to the run: the totals, the line printed per entry
//! (errors always, the rest with -v), the total line and the JSON object.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::entry::{Entry, Kind, Status};
use super::Copier;
use crate::engine::Record;
use crate::report::{self, json_array, json_string, JsonObject};
use crate::units::{human_bytes, human_duration};

#[derive(Debug, Default)]
pub(super) struct Totals {
    pub(super) record: Record,
    pub(super) holes: u64,
    pub(super) resumed: u64,
    pub(super) resume_check_seconds: f64,
    pub(super) verified_bytes: u64,
    pub(super) verify_seconds: f64,
    /// Files compared by `--verify` (whatever the outcome).
    pub(super) verified_files: u64,
    pub(super) files: u64,
    pub(super) dirs: u64,
    pub(super) symlinks: u64,
    pub(super) specials: u64,
    pub(super) skipped: u64,
    pub(super) failed: u64,
    /// `--atomic`: bytes written to temporaries of files that failed, thrown away (not in
    /// `record`: the report counts what reached a destination).
    pub(super) discarded: u64,
}

impl Totals {
    /// Adds what another thread of `-j` counted.
    pub(super) fn add(&mut self, o: &Totals) {
        self.record.merge(&o.record);
        self.holes += o.holes;
        self.resumed += o.resumed;
        self.resume_check_seconds += o.resume_check_seconds;
        self.verified_bytes += o.verified_bytes;
        self.verify_seconds += o.verify_seconds;
        self.verified_files += o.verified_files;
        self.files += o.files;
        self.dirs += o.dirs;
        self.symlinks += o.symlinks;
        self.specials += o.specials;
        self.skipped += o.skipped;
        self.failed += o.failed;
        self.discarded += o.discarded;
    }
}

impl Copier<'_> {
    pub(super) fn skip(&mut self, src: &Path, dst: &Path, kind: Kind, why: &'static str) {
        let mut e = Entry::new(src, dst, Some(kind));
        e.status = Status::Skipped(why);
        self.done(e);
    }

    pub(super) fn fail(&mut self, src: &Path, dst: &Path, kind: Kind, message: String) {
        self.fail_entry(src, dst, Some(kind), message);
    }

    /// [`Copier::fail`] for an entry whose kind may not be known.
    pub(super) fn fail_entry(
        &mut self,
        src: &Path,
        dst: &Path,
        kind: Option<Kind>,
        message: String,
    ) {
        let mut e = Entry::new(src, dst, kind);
        e.status = Status::Failed(message);
        self.done(e);
    }

    /// Adds one entry to the totals and shows it; errors are printed at once (also under
    /// -q, as cp does).
    pub(super) fn account(&mut self, e: Entry) {
        self.tally(&e);
        self.show(e);
    }

    /// Will [`Copier::show`] print or keep anything of this entry?
    pub(super) fn shows(&self, e: &Entry) -> bool {
        matches!(e.status, Status::Failed(_))
            || (self.opts.verbose && !self.opts.quiet)
            || (self.cfg.debug && e.kind == Some(Kind::File))
            || self.opts.stats == crate::report::StatsFormat::Json
    }

    /// Adds one entry to the totals.
    pub(super) fn tally(&mut self, e: &Entry) {
        if self.cfg.atomic && matches!(e.status, Status::Failed(_)) {
            self.totals.discarded += e.record.bytes();
        } else {
            self.totals.record.merge(&e.record);
        }
        self.totals.holes += e.holes;
        self.totals.resumed += e.resumed;
        self.totals.resume_check_seconds += e.resume_check_seconds.unwrap_or(0.0);
        self.totals.verified_bytes += e.verified_bytes;
        if let Some(seconds) = e.verify_seconds {
            self.totals.verify_seconds += seconds;
            self.totals.verified_files += 1;
        }
        if e.kind == Some(Kind::File) {
            self.files_done.fetch_add(1, Ordering::Relaxed);
        }
        match &e.status {
            Status::Copied => {}
            Status::Skipped(_) => self.totals.skipped += 1,
            Status::Failed(_) => self.totals.failed += 1,
            Status::Interrupted => {
                self.totals.failed += 1;
                self.interrupted = true;
            }
        }
        self.entry_count += 1;
    }

    /// Prints what an entry says (its error, `-v`'s line, `--debug`'s lines) and keeps it
    /// for the JSON report.
    fn show(&mut self, e: Entry) {
        let ok = match &e.status {
            Status::Copied | Status::Skipped(_) => true,
            Status::Failed(error) => {
                self.say(format!(
                    "zerocat: cannot copy '{}' to '{}': {error}",
                    e.src.display(),
                    e.dst.display()
                ));
                false
            }
            // Not printed: the report says it once for the run.
            Status::Interrupted => false,
        };
        if self.cfg.debug && e.kind == Some(Kind::File) && self.debug_error.is_none() {
            let printed = match e.status {
                Status::Copied => super::debug::print(&e),
                // cp 9.x says so of a destination --update=none or -n kept.
                Status::Skipped(_) => super::debug::print_skipped(&e),
                _ => Ok(()),
            };
            if let Err(err) = printed {
                if err.kind() != std::io::ErrorKind::BrokenPipe {
                    self.debug_error = Some(err);
                }
            }
        }
        if ok && self.opts.verbose && !self.opts.quiet {
            self.say(format!("zerocat: {}", entry_line(&e)));
        }
        // Kept only for the JSON report, which lists every entry: a text run of a million
        // files holds its totals, not a million entries (issue 26 item 9).
        if self.opts.stats == crate::report::StatsFormat::Json {
            self.entries.push(e);
        }
    }

    pub(super) fn json(
        &self,
        sources: &[PathBuf],
        dest: &Path,
        seconds: f64,
        interrupted: bool,
    ) -> String {
        let t = &self.totals;
        let named = |p: &Path| {
            let mut o = JsonObject::new();
            let kind = match fs::symlink_metadata(p) {
                Ok(m) if m.is_dir() => "dir",
                Ok(m) if m.file_type().is_symlink() => "symlink",
                _ => "file",
            };
            o.str("uri", &p.to_string_lossy()).str("kind", kind);
            o.finish()
        };
        let srcs: Vec<String> = sources.iter().map(|s| named(s)).collect();
        let entries: Vec<String> = self.entries.iter().map(entry_json).collect();
        let mut o = JsonObject::new();
        o.str("command", "copy")
            .num("bytes", t.record.bytes())
            .float("seconds", seconds)
            .num("files", t.files)
            .num("dirs", t.dirs)
            .num("symlinks", t.symlinks)
            .num("specials", t.specials)
            .num("skipped", t.skipped)
            .num("failed", t.failed)
            .num("discarded_bytes", t.discarded)
            .num("holes", t.holes)
            .num("resumed", t.resumed)
            .float("resume_check_seconds", t.resume_check_seconds)
            .num("verified_bytes", t.verified_bytes)
            .float("verify_seconds", t.verify_seconds)
            .raw("src", &json_array(&srcs))
            .raw("dst", &named(dest));
        report::record_json(&mut o, &t.record);
        let ending = if interrupted {
            report::Ending::Signal
        } else if t.failed > 0 {
            report::Ending::Error(format!("{} entries could not be copied", t.failed))
        } else {
            report::Ending::Eof
        };
        report::ending_json(&mut o, &ending);
        o.raw("entries", &json_array(&entries));
        o.finish()
    }
}

/// "copied 3 files, 1.00 GiB in 0.41 s (2.44 GiB/s) via copy_file_range; 1.00 GiB of holes
/// skipped; 1 failed"
pub(super) fn total_line(t: &Totals, seconds: f64, interrupted: bool) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut line = format!(
        "zerocat: copied {}, {}",
        plural(t.files, "file", "files"),
        crate::units::amount(t.record.bytes(), seconds)
    );
    if !t.record.paths.is_empty() {
        line.push_str(&format!(" via {}", report::route(&t.record)));
    }
    let mut extras = Vec::new();
    if t.dirs > 0 {
        extras.push(plural(t.dirs, "directory", "directories"));
    }
    if t.symlinks > 0 {
        extras.push(plural(t.symlinks, "symlink", "symlinks"));
    }
    if t.specials > 0 {
        extras.push(plural(t.specials, "special file", "special files"));
    }
    if t.holes > 0 {
        extras.push(format!("{} of holes skipped", human_bytes(t.holes)));
    }
    if t.resumed > 0 {
        extras.push(format!("{} resumed", human_bytes(t.resumed)));
    }
    if t.verified_files > 0 {
        extras.push(format!(
            "{} verified in {}",
            human_bytes(t.verified_bytes),
            human_duration(t.verify_seconds)
        ));
    }
    if t.skipped > 0 {
        extras.push(format!("{} skipped", t.skipped));
    }
    if t.discarded > 0 {
        extras.push(format!(
            "{} written to temporaries of failed files and thrown away",
            human_bytes(t.discarded)
        ));
    }
    if t.failed > 0 {
        extras.push(format!("{} failed", t.failed));
    }
    if interrupted {
        extras.push("interrupted".to_string());
    }
    if !extras.is_empty() {
        line.push_str("; ");
        line.push_str(&extras.join("; "));
    }
    line
}

/// The `-v` line of one entry.
fn entry_line(e: &Entry) -> String {
    let what = if let Status::Skipped(why) = e.status {
        format!("skipped: {why}")
    } else if e.kind == Some(Kind::File) {
        let mut s = format!(
            "{} via {}",
            human_bytes(e.record.bytes()),
            report::route(&e.record)
        );
        if e.record.paths.is_empty() {
            s = "already complete".to_string();
        }
        if e.holes > 0 {
            s.push_str(&format!(", {} of holes skipped", human_bytes(e.holes)));
        }
        match e.resume_check_seconds {
            Some(t) if e.resumed > 0 => s.push_str(&format!(
                ", {} resumed (prefix checked in {})",
                human_bytes(e.resumed),
                human_duration(t)
            )),
            Some(t) => s.push_str(&format!(
                ", copied from the start (destination checked in {}: not a prefix)",
                human_duration(t)
            )),
            None => {}
        }
        if let Some(t) = e.verify_seconds {
            s.push_str(&format!(", verified in {}", human_duration(t)));
        }
        s
    } else {
        kind_word(e.kind).to_string()
    };
    format!("'{}' -> '{}': {what}", e.src.display(), e.dst.display())
}

fn entry_json(e: &Entry) -> String {
    let mut o = JsonObject::new();
    o.str("src", &e.src.to_string_lossy())
        .str("dst", &e.dst.to_string_lossy())
        .str("kind", kind_word(e.kind))
        .num("bytes", e.record.bytes())
        .num("holes", e.holes)
        .num("resumed", e.resumed)
        .bool("skipped", matches!(e.status, Status::Skipped(_)));
    match e.resume_check_seconds {
        Some(seconds) => o.float("resume_check_seconds", seconds),
        None => o.raw("resume_check_seconds", "null"),
    };
    o.num("verified_bytes", e.verified_bytes);
    match e.verify_seconds {
        Some(seconds) => o.float("verify_seconds", seconds),
        None => o.raw("verify_seconds", "null"),
    };
    report::record_json(&mut o, &e.record);
    match &e.linked_to {
        Some(first) => o.str("hard_link_to", &first.to_string_lossy()),
        None => o.raw("hard_link_to", "null"),
    };
    match e.status.error() {
        Some(text) => o.raw("error", &json_string(text)),
        None => o.raw("error", "null"),
    };
    o.finish()
}

/// An entry's kind as the report names it; "entry" when it is not known.
fn kind_word(kind: Option<Kind>) -> &'static str {
    kind.map_or("entry", Kind::word)
}
