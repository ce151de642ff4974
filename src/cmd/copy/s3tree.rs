//! `copy -r s3://BUCKET/PREFIX/ DIR` and `copy -r DIR s3://BUCKET/PREFIX/`: a tree of objects,
//! keys mapped to paths as `aws s3 cp --recursive` maps them (the objects under PREFIX/ into
//! DIR, KEY = PREFIX/ + the path under DIR), each object through the engine (a GET's socket
//! spliced into its file; a file spliced into an upload's pipe), `-j` objects at once.
//!
//! A key that cannot be a path under DIR (an empty, `.` or `..` segment, as `a//b`,
//! `../x`; a NUL) is not copied: it is a failure of its own, said and counted (exit 1), the
//! others still copied, as `copy -r` does with an entry it cannot copy. A key ending in `/`
//! (a "directory marker") makes that directory. A file name that is not UTF-8 cannot be a
//! key: the same.

use std::fs;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{anyhow, Context};

use super::CopyConfig;
use crate::endpoint::s3::client::Client;
use crate::endpoint::s3::transfer;
use crate::endpoint::{Endpoint, S3Opts};
use crate::engine::{self, DataPath, Failure, Record};
use crate::exit::{ExitCode, UsageError};
use crate::options::Options;
use crate::report::{json_array, json_string, JsonObject, StatsFormat};
use crate::sys::fdkind::{FdInfo, FdKind};
use crate::sys::pipe::OwnPipe;

/// Objects moved at once when `-j` is not given (the AWS CLI's max_concurrent_requests is
/// 10; two cores here).
const DEFAULT_JOBS: usize = 8;

/// Whether this copy is a tree to or from S3 (`-r` and an `s3://` operand).
pub fn applies(cfg: &CopyConfig) -> bool {
    cfg.recursive
        && cfg
            .sources
            .iter()
            .chain([&cfg.dest])
            .any(|e| matches!(e, Endpoint::S3 { .. }))
}

/// One object or file to move.
struct Item {
    key: String,
    path: PathBuf,
}

/// What the tree copy did, for the report.
#[derive(Default)]
struct Tally {
    files: AtomicU64,
    bytes: AtomicU64,
    record: Mutex<Record>,
    failures: Mutex<Vec<(String, String)>>,
}

impl Tally {
    fn fail(&self, what: &str, why: String) {
        eprintln!("zerocat: {why}");
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((what.to_owned(), why));
    }
}

pub fn run(opts: &Options, cfg: &CopyConfig) -> anyhow::Result<ExitCode> {
    let [source] = &cfg.sources[..] else {
        return Err(UsageError("copy -r with s3:// takes one source".into()).into());
    };
    let started = Instant::now();
    let tally = Tally::default();
    let jobs = cfg.jobs.unwrap_or(DEFAULT_JOBS).max(1);
    let (listed, client) = match (source, &cfg.dest) {
        (
            Endpoint::S3 {
                bucket,
                key,
                opts: o,
            },
            dest,
        ) => {
            let dir = dest.plain_file().ok_or_else(|| {
                UsageError(format!(
                    "copy -r {source}: the destination must be a directory path"
                ))
            })?;
            let client = Client::from_opts(o)?;
            let prefix = as_prefix(key);
            let objects = transfer::list(&client, bucket, &prefix)?;
            let listed = objects.len() as u64;
            let mut items = Vec::new();
            for object in objects {
                let rel = &object.key[prefix.len()..];
                match path_of(rel) {
                    Ok(None) => {
                        // A directory marker: the directory, and nothing to fetch.
                        let _ = fs::create_dir_all(dir.join(rel));
                    }
                    Ok(Some(path)) => items.push(Item {
                        key: object.key.clone(),
                        path: dir.join(path),
                    }),
                    Err(why) => tally.fail(
                        &object.key,
                        format!("s3://{bucket}/{}: not copied: {why}", object.key),
                    ),
                }
            }
            fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            each(jobs, items, |item| {
                download(opts, &client, bucket, item, &tally)
            });
            (Some(listed), client)
        }
        (
            src,
            Endpoint::S3 {
                bucket,
                key,
                opts: o,
            },
        ) => {
            let dir = src.plain_file().ok_or_else(|| {
                UsageError(format!(
                    "copy -r {src}: the source must be a directory path"
                ))
            })?;
            let client = Client::from_opts(o)?;
            let prefix = as_prefix(key);
            let mut items = Vec::new();
            walk(dir, Path::new(""), &prefix, &mut items, &tally)?;
            each(jobs, items, |item| {
                upload(opts, &client, bucket, item, o, &tally)
            });
            (None, client)
        }
        _ => unreachable!("applies() saw an s3:// operand"),
    };
    let seconds = started.elapsed().as_secs_f64();
    report(opts, cfg, &tally, listed, &client, seconds)
}

/// `PREFIX/` as a tree's prefix: the key given, with a `/` unless empty or there already.
fn as_prefix(key: &str) -> String {
    if key.is_empty() || key.ends_with('/') {
        key.to_owned()
    } else {
        format!("{key}/")
    }
}

/// The relative path for the part of a key under the prefix: None for a directory marker
/// (`a/b/`), an error for a key that cannot be a path.
fn path_of(rel: &str) -> Result<Option<PathBuf>, String> {
    if rel.contains('\0') {
        return Err("the key holds a NUL, which no path can".into());
    }
    let (rel, marker) = match rel.strip_suffix('/') {
        Some(dir) => (dir, true),
        None => (rel, false),
    };
    if rel.is_empty() {
        // The prefix's own marker (`p/` under `p/`), or the bare `/` one.
        return Ok(None);
    }
    for segment in rel.split('/') {
        if matches!(segment, "" | "." | "..") {
            return Err(format!(
                "the key has a '{segment}' segment, which would not name a path under the \
                 directory"
            ));
        }
    }
    Ok((!marker).then(|| PathBuf::from(rel)))
}

/// Every regular file under `dir/rel`, as items keyed `prefix` + the path.
fn walk(
    dir: &Path,
    rel: &Path,
    prefix: &str,
    items: &mut Vec<Item>,
    tally: &Tally,
) -> anyhow::Result<()> {
    let here = dir.join(rel);
    let entries = fs::read_dir(&here).with_context(|| format!("cannot read {}", here.display()))?;
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = rel.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(dir, &path, prefix, items, tally)?;
        } else if kind.is_file() {
            match path.to_str() {
                Some(text) => items.push(Item {
                    key: format!("{prefix}{text}"),
                    path: dir.join(&path),
                }),
                None => tally.fail(
                    &path.to_string_lossy(),
                    format!(
                        "{}: not copied: its name is not UTF-8, which keys are",
                        dir.join(&path).display()
                    ),
                ),
            }
        }
    }
    Ok(())
}

/// `work` over the items, `jobs` at a time.
fn each(jobs: usize, items: Vec<Item>, work: impl Fn(Item) + Sync) {
    let queue = Mutex::new(items.into_iter());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                if crate::sys::process::must_stop() {
                    return;
                }
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                match next {
                    Some(item) => work(item),
                    None => return,
                }
            });
        }
    });
}

fn download(opts: &Options, client: &Client, bucket: &str, item: Item, tally: &Tally) {
    let uri = format!("s3://{bucket}/{}", item.key);
    let result = (|| -> anyhow::Result<u64> {
        let (socket, get) = transfer::get(client, bucket, &item.key)?;
        if let Some(parent) = item.path.parent() {
            fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let file = fs::File::create(&item.path)
            .with_context(|| format!("cannot create {}", item.path.display()))?;
        let (record, failure) = move_bytes(opts, socket.as_fd(), file.as_fd())?;
        drop(socket);
        let bytes = record.bytes();
        tally.merge(record);
        let (_, checked) = get.finish(bytes, failure.is_none());
        failed(failure, checked, &uri, &item.path)?;
        Ok(bytes)
    })();
    tally.count(&uri, result);
}

fn upload(opts: &Options, client: &Client, bucket: &str, item: Item, o: &S3Opts, tally: &Tally) {
    let uri = format!("s3://{bucket}/{}", item.key);
    let result = (|| -> anyhow::Result<u64> {
        let file = fs::File::open(&item.path)
            .with_context(|| format!("cannot open {}", item.path.display()))?;
        let meta = file.metadata()?;
        let len = meta.len();
        if meta.is_file() && len <= o.part_size.unwrap_or(transfer::DEFAULT_PART_SIZE) {
            // One PUT sent from the file itself, on this thread: an uploader thread, its
            // pipe and memfd for every small file were most of a tree's system time.
            transfer::put_file(client, bucket, &item.key, file, len)?;
            tally.merge(Record {
                paths: vec![(DataPath::Sendfile, len)],
                fallbacks: Vec::new(),
            });
            return Ok(len);
        }
        // Objects go up -j at a time: each sends its parts one at a time unless parts= says.
        let parts = Some(o.parts.unwrap_or(1));
        let (pipe, put) = transfer::put(client, bucket, &item.key, o.part_size, parts)?;
        let (record, failure) = move_bytes(opts, file.as_fd(), pipe.as_fd())?;
        drop(pipe);
        let bytes = record.bytes();
        tally.merge(record);
        let (_, uploaded) = put.finish(bytes, failure.is_none());
        failed(failure, uploaded, &uri, &item.path)?;
        Ok(bytes)
    })();
    tally.count(&uri, result);
}

/// An S3 failure first (it explains an engine's EPIPE or short end), then the engine's.
fn failed(
    failure: Option<Failure>,
    s3: Option<String>,
    uri: &str,
    path: &Path,
) -> anyhow::Result<()> {
    if let Some(s3) = s3 {
        return Err(anyhow!(s3));
    }
    match failure {
        None => Ok(()),
        Some(Failure::Interrupted) => Err(anyhow!("{uri}: interrupted")),
        Some(Failure::Io(err, _)) => Err(anyhow!("{uri} <-> {}: {err}", path.display())),
    }
}

impl Tally {
    fn merge(&self, record: Record) {
        let mut all = self.record.lock().unwrap_or_else(|e| e.into_inner());
        for (path, bytes) in record.paths {
            all.add(path, bytes);
        }
    }

    fn count(&self, uri: &str, result: anyhow::Result<u64>) {
        match result {
            Ok(bytes) => {
                self.files.fetch_add(1, Ordering::Relaxed);
                self.bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            Err(e) => self.fail(uri, format!("{e:#}")),
        }
    }
}

/// One object's bytes through the engine, as pipe moves them.
fn move_bytes(
    opts: &Options,
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
) -> anyhow::Result<(Record, Option<Failure>)> {
    let src_info = FdInfo::of(src)?;
    let dst_info = FdInfo::of(dst)?;
    let chain = engine::chain(&src_info, &dst_info, opts.via)
        .map_err(|e| UsageError(format!("--via: {e}")))?;
    let middle = (chain.contains(&DataPath::Splice)
        && src_info.kind != FdKind::Pipe
        && dst_info.kind != FdKind::Pipe)
        .then(|| OwnPipe::new().ok())
        .flatten();
    let ends = engine::Ends {
        src,
        src_info,
        dst,
        dst_info,
        reserve: 0,
        tap: None,
    };
    let meter = crate::progress::meter(opts);
    Ok(engine::transfer(&ends, &chain, middle.as_ref(), &meter))
}

fn report(
    opts: &Options,
    cfg: &CopyConfig,
    tally: &Tally,
    listed: Option<u64>,
    client: &Client,
    seconds: f64,
) -> anyhow::Result<ExitCode> {
    let files = tally.files.load(Ordering::Relaxed);
    let bytes = tally.bytes.load(Ordering::Relaxed);
    let record = tally
        .record
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let failures = tally
        .failures
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let requests = client.counts.named();
    let interrupted = crate::sys::process::interrupted();
    let shown = |e: &Endpoint| {
        e.plain_file()
            .map_or_else(|| e.to_string(), |p| p.display().to_string())
    };
    let (src, dst) = (shown(&cfg.sources[0]), shown(&cfg.dest));
    let text = match opts.stats {
        StatsFormat::Json => {
            let mut o = JsonObject::new();
            o.str("command", "copy")
                .num("files", files)
                .num("bytes", bytes)
                .float("seconds", seconds);
            if let Some(listed) = listed {
                o.num("objects_listed", listed);
            }
            o.raw("src", &JsonObject::new().str("uri", &src).finish())
                .raw("dst", &JsonObject::new().str("uri", &dst).finish());
            let mut r = JsonObject::new();
            for (kind, n) in &requests {
                r.num(&crate::report::request_key(kind), *n);
            }
            o.raw("requests", &r.finish());
            crate::report::record_json(&mut o, &record);
            let failed: Vec<String> = failures
                .iter()
                .map(|(what, why)| {
                    JsonObject::new()
                        .str("entry", what)
                        .str("error", why)
                        .finish()
                })
                .collect();
            o.raw("failures", &json_array(&failed));
            let ended = if interrupted {
                "signal"
            } else if failures.is_empty() {
                "eof"
            } else {
                "error"
            };
            o.raw("ended", &json_string(ended));
            o.finish()
        }
        StatsFormat::Text => {
            let made: Vec<String> = requests.iter().map(|(k, n)| format!("{n} {k}")).collect();
            let mut line = format!(
                "zerocat: {files} files, {} {src} -> {dst} (s3: {}) via {}",
                crate::units::amount(bytes, seconds),
                made.join(", "),
                crate::report::route(&record)
            );
            if let Some(listed) = listed {
                line.push_str(&format!("; {listed} objects listed"));
            }
            if !failures.is_empty() {
                line.push_str(&format!("; {} failed", failures.len()));
            }
            line
        }
    };
    opts.print_report(&text);
    if interrupted {
        return Ok(ExitCode::Interrupted);
    }
    if failures.is_empty() {
        Ok(ExitCode::Success)
    } else {
        Err(anyhow!(
            "copy -r: {} of {} entries failed",
            failures.len(),
            failures.len() as u64 + files
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_paths_as_aws_s3_cp_does_and_others_are_refused() {
        assert_eq!(path_of("a/b.txt"), Ok(Some(PathBuf::from("a/b.txt"))));
        assert_eq!(path_of("a b/c+d%e"), Ok(Some(PathBuf::from("a b/c+d%e"))));
        assert_eq!(path_of("dir/"), Ok(None));
        assert_eq!(path_of("/"), Ok(None));
        assert_eq!(path_of(""), Ok(None));
        for bad in ["a//b", "../x", "a/../b", "./a", "a/.", "a\0b", "//"] {
            assert!(path_of(bad).is_err(), "{bad:?}");
        }
        assert_eq!(as_prefix("p"), "p/");
        assert_eq!(as_prefix("p/"), "p/");
        assert_eq!(as_prefix(""), "");
    }
}
