//! `copy --resume URL FILE` and `copy -j N URL FILE` (issue 38 items 4-5): an object
//! downloaded into a regular file by ranged GETs, each body pumped by the http endpoint
//! (which resumes it on its own when it stops short, `endpoint/http/resume.rs`) and
//! moved into the file by the engine's chain, at the range's offset.
//!
//! `--resume`: the validator of the object a partial file holds (its strong ETag, or its
//! Last-Modified) is kept with the file — the extended attribute `user.zerocat.etag`, or,
//! where the filesystem refuses user xattrs (tmpfs before 6.6, some NFS), a hidden sidecar
//! `.NAME.zerocat-etag` beside it. The next `copy --resume` asks `Range: bytes=LEN-` with
//! `If-Range:` that validator: a 206 at LEN is appended, a 200 (the object changed) is
//! written from the start over the old bytes, never after them (curl `-C -` appends
//! blindly). A file without a kept validator is fetched again from the start.
//!
//! `-j N`: a one-byte probe learns the object's length and validator; N ranges are then
//! fetched at once, each with `If-Range`, into a temporary in the destination's directory,
//! renamed over the destination only when every range is whole (the `--atomic` rules): the
//! file appears whole or not at all. An object that changes between two ranges makes a 200
//! (If-Range), which fails the copy: never two versions in one file.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use nix::errno::Errno;
use nix::unistd::Whence;
use url::Url;

use crate::endpoint::http::resume::{
    check_continuation, refusal_text, Answer, Resume, ResumePolicy, Resumer, Validator,
};
use crate::endpoint::http::{
    redact_url, resolve_headers, BodyPump, Client, HttpOpts, Request, RequestBody, Response, Sent,
    PUMP_FINISH,
};
use crate::endpoint::s3::client::Counts;
use crate::engine::meter::Meter;
use crate::engine::{self, Ends, Failure, Record};
use crate::exit::{ExitCode, UsageError};
use crate::options::Options;
use crate::report::{HttpInfo, HttpResume, Named, Report};
use crate::sys::fdkind::{FdInfo, FdKind};

use super::atomic::{written_through, Temp};
use super::entry::Kind;

/// The extended attribute the validator is kept in.
pub const XATTR: &str = "user.zerocat.etag";
/// The least bytes a range of `-j` gets: below it, fewer connections.
const MIN_PART: u64 = 1 << 20;

/// Where the validator of a partial file is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    Xattr,
    Sidecar,
}

impl Kept {
    pub fn word(self) -> &'static str {
        match self {
            Kept::Xattr => "xattr user.zerocat.etag",
            Kept::Sidecar => "sidecar .NAME.zerocat-etag",
        }
    }
}

/// `.NAME.zerocat-etag` beside `dest`.
fn sidecar_of(dest: &Path) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(dest.file_name().unwrap_or_default());
    name.push(".zerocat-etag");
    dest.with_file_name(name)
}

/// Keeps `v` with the file: its xattr, else (the filesystem refuses) the sidecar.
fn keep(file: BorrowedFd<'_>, dest: &Path, v: &Validator) -> anyhow::Result<Kept> {
    let line = v.to_line();
    match crate::sys::xattr::set(file, XATTR, line.as_bytes()) {
        Ok(()) => {
            let _ = std::fs::remove_file(sidecar_of(dest));
            Ok(Kept::Xattr)
        }
        Err(Errno::ENOTSUP | Errno::EPERM | Errno::EACCES | Errno::ENOSPC | Errno::E2BIG) => {
            std::fs::write(sidecar_of(dest), format!("{line}\n")).with_context(|| {
                format!(
                    "cannot keep the validator in {}",
                    sidecar_of(dest).display()
                )
            })?;
            Ok(Kept::Sidecar)
        }
        Err(e) => Err(anyhow!(
            "cannot keep the validator with {}: {e}",
            dest.display()
        )),
    }
}

/// The validator kept with the file, and where.
fn kept(file: BorrowedFd<'_>, dest: &Path) -> Option<(Validator, Kept)> {
    if let Ok(Some(bytes)) = crate::sys::xattr::get(file, XATTR) {
        return Validator::from_line(&String::from_utf8_lossy(&bytes)).map(|v| (v, Kept::Xattr));
    }
    let text = std::fs::read_to_string(sidecar_of(dest)).ok()?;
    Validator::from_line(text.lines().next()?).map(|v| (v, Kept::Sidecar))
}

/// Forgets any validator kept with the file (its object had none).
fn forget(file: BorrowedFd<'_>, dest: &Path) {
    let _ = crate::sys::xattr::remove(file, XATTR);
    let _ = std::fs::remove_file(sidecar_of(dest));
}

/// What one run did, for the report.
struct Done {
    record: Record,
    info: HttpInfo,
    error: Option<String>,
    interrupted: bool,
    /// GETs sent (the probe, the ranges), resumes not counted.
    gets: u64,
    /// The bodies' resumes that continued them, and those that gave up.
    resumes: Vec<Resume>,
    gave_up: Vec<Resume>,
}

/// `copy [--resume] [-j N] URL FILE`.
pub fn run(
    opts: &Options,
    url: &Url,
    http: &HttpOpts,
    dest: &Path,
    resume: bool,
    jobs: usize,
    policy: &ResumePolicy,
) -> anyhow::Result<ExitCode> {
    if http.range.is_some() {
        return Err(UsageError(
            "copy --resume / -j fetch the whole object: range= is for pipe".to_string(),
        )
        .into());
    }
    let get = Request {
        method: "GET".to_string(),
        url: url.clone(),
        headers: resolve_headers(http)?,
        body: RequestBody::None,
        target: None,
    };
    download(
        opts,
        &Client::new(http.clone()),
        &get,
        dest,
        resume,
        jobs,
        policy,
        None,
    )
}

/// [`run`] with the client and the GET of the caller's: an `s3://` object's (signed at
/// each request, held to one version by If-Match, named by its `s3://` URI). `s3`: the
/// S3 endpoint's request counts, which the report then shows as `pipe s3://…` does, in
/// place of the http exchange.
#[allow(clippy::too_many_arguments)]
pub fn download(
    opts: &Options,
    client: &Client,
    get: &Request,
    dest: &Path,
    resume: bool,
    jobs: usize,
    policy: &ResumePolicy,
    s3: Option<&Counts>,
) -> anyhow::Result<ExitCode> {
    let url = &get.url;
    // A FIFO or a device is a stream: -j would rename its temporary over it, --resume
    // has no length to continue from.
    if let Some(kind) = not_a_regular_file(dest) {
        return Err(UsageError(format!(
            "copy -j / --resume fill a regular file; '{}' is a {kind} (use pipe)",
            dest.display()
        ))
        .into());
    }
    opts.print_plan(&format!(
        "plan: copy {} -> '{}': {}{}",
        client.shown(url),
        dest.display(),
        if jobs > 1 {
            format!("{jobs} ranged GETs into a temporary renamed over it")
        } else {
            "one GET".to_string()
        },
        if resume {
            ", resume a partial file"
        } else {
            ""
        }
    ));
    if opts.explain {
        return Ok(ExitCode::Success);
    }
    let started = Instant::now();
    let meter = crate::progress::meter(opts);
    let done = if jobs > 1 {
        ranged(client, get, dest, jobs, policy, &meter)?
    } else {
        single(client, get, dest, resume, policy, &meter)?
    };
    let seconds = started.elapsed().as_secs_f64();
    let ending = match (&done.error, done.interrupted) {
        (_, true) => crate::report::Ending::Signal,
        (Some(e), _) => crate::report::Ending::Error(e.clone()),
        (None, false) => crate::report::Ending::Eof,
    };
    let socket = FdInfo::assumed(FdKind::Socket);
    let src = match s3 {
        Some(counts) => {
            counts.get.fetch_add(done.gets, Ordering::Relaxed);
            counts.add_resumes(&done.resumes, None);
            for failed in &done.gave_up {
                counts.add_resumes(&[], Some(failed));
            }
            Named {
                requests: counts.named(),
                ..Named::of(client.shown(url), &socket)
            }
        }
        None => Named {
            http: Some(done.info),
            ..Named::of(redact_url(url), &socket)
        },
    };
    let report = Report {
        command: "copy",
        src,
        dst: Named::of(dest.display().to_string(), &FdInfo::assumed(FdKind::File)),
        record: done.record,
        seconds,
        moving_seconds: meter.moving_seconds(),
        ending,
        connections: None,
        refused: None,
        dump: None,
    };
    opts.print_report(&report.render(opts.stats));
    if done.interrupted {
        return Ok(ExitCode::Interrupted);
    }
    if let Some(e) = done.error {
        return Err(anyhow!(e));
    }
    Ok(ExitCode::Success)
}

/// What `dest` is when it exists and is no regular file (symlinks followed): "fifo"...
fn not_a_regular_file(dest: &Path) -> Option<&'static str> {
    let kind = Kind::of(std::fs::metadata(dest).ok()?.file_type());
    (kind != Kind::File).then(|| kind.word())
}

/// The request `get` with a Range added, held to `same` version by the client's
/// precondition (If-Range, or S3's If-Match).
fn ranged_request(
    client: &Client,
    get: &Request,
    range: String,
    same: Option<&Validator>,
) -> Request {
    let mut r = get.clone();
    r.headers.push(("Range".to_string(), range));
    if let Some(v) = same {
        let (name, value) = client.precondition.header(v);
        r.headers.push((name.to_string(), value));
    }
    r
}

fn answered(client: &Client, request: &Request) -> anyhow::Result<Response> {
    match client.exchange(request)? {
        Sent::Answered(response) => Ok(response),
        Sent::Continue(..) => unreachable!("a GET has no body to continue"),
    }
}

/// One GET into the file, in place: appended after a kept prefix (`--resume`) when the
/// server proves the same version, else from the start.
fn single(
    client: &Client,
    get: &Request,
    dest: &Path,
    resume: bool,
    policy: &ResumePolicy,
    meter: &Arc<Meter>,
) -> anyhow::Result<Done> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        // a partial file is kept until the answer says whether it continues
        .truncate(false)
        .mode(0o666)
        .open(dest)
        .with_context(|| format!("cannot open '{}'", dest.display()))?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        bail!("'{}' is not a regular file", dest.display());
    }
    let len = meta.len();
    let kept_before = if resume && len > 0 {
        kept(file.as_fd(), dest)
    } else {
        None
    };
    let request = match &kept_before {
        Some((v, _)) => ranged_request(client, get, format!("bytes={len}-"), Some(v)),
        None => get.clone(),
    };
    let mut response = answered(client, &request)?;
    let mut gets = 1;
    if kept_before.is_some() && response.head.status == 412 {
        // If-Match (S3): another version is there now; it is fetched whole, from the start,
        // over the old bytes.
        drop(response);
        response = answered(client, get)?;
        gets += 1;
    }
    let shown = client.shown(&response.url);
    let head = response.head.clone();
    let mut start = 0;
    match (&kept_before, head.status) {
        (Some((v, _)), 206) => {
            let answer = Answer::of(&head);
            check_continuation(&answer, len, None, None, v)
                .map_err(|r| anyhow!("{shown}: {}", refusal_text(&r, len)))?;
            start = len;
        }
        (Some(_), 416) => {
            // Range not satisfiable at the file's length, under If-Range of the same
            // version: the file is whole already.
            let total = head
                .header("content-range")
                .and_then(|c| c.strip_prefix("bytes */"))
                .and_then(|t| t.trim().parse::<u64>().ok());
            if total == Some(len) {
                return Ok(Done {
                    record: Record::default(),
                    info: info_of(&response, len, 1, Vec::new(), kept_before.map(|k| k.1)),
                    error: None,
                    interrupted: false,
                    gets,
                    resumes: Vec::new(),
                    gave_up: Vec::new(),
                });
            }
            bail!("{shown}: the server answered 416 to a resume at {len}");
        }
        (_, 200) => {}
        (_, _) if !head.is_success() => bail!(client.refusal(response)),
        (_, status) => bail!("{shown}: the server answered {status} to a GET of the whole object"),
    }
    // The validator goes with the file before its first new byte.
    let validator = Validator::of(
        head.etag(),
        head.header("last-modified"),
        head.header("date"),
    );
    let kept_in = match &validator {
        Some(v) => Some(keep(file.as_fd(), dest, v)?),
        None => {
            forget(file.as_fd(), dest);
            None
        }
    };
    if start == 0 {
        nix::unistd::ftruncate(file.as_fd(), 0).context("cannot truncate")?;
    }
    nix::unistd::lseek(file.as_raw_fd(), start as i64, Whence::SeekSet)?;
    let resumer = Resumer::new(client, get, &head, start, policy);
    let info = info_of(&response, start, 1, Vec::new(), kept_in);
    let what = format!("'{}'", dest.display());
    let mut done = whole_body_into(response, resumer, file.as_fd(), meter, info, &what)?;
    done.gets = gets;
    Ok(done)
}

/// The body (resumed wherever it is cut) into `file` from its offset on; the report's
/// figures from the pump; `what` names the file in an error.
fn whole_body_into(
    response: Response,
    resumer: Option<Resumer>,
    file: BorrowedFd<'_>,
    meter: &Meter,
    mut info: HttpInfo,
    what: &str,
) -> anyhow::Result<Done> {
    let (body, pump) = response.into_resumable_body(resumer)?;
    let (record, failure) = into_file(body, file, meter, u64::MAX)?;
    let end = pump.finish(PUMP_FINISH);
    info.spliced = end.spliced;
    info.copied = end.copied;
    info.resumes = end.resumes.iter().map(resume_of).collect();
    let gave_up = end.resume_failed.into_iter().collect();
    let interrupted = matches!(failure, Some(Failure::Interrupted));
    let error = end.error.or(failure.and_then(|f| match f {
        Failure::Io(e, _) => Some(format!("{what}: {e}")),
        Failure::Interrupted => None,
    }));
    Ok(Done {
        record,
        info,
        error,
        interrupted,
        gets: 1,
        resumes: end.resumes,
        gave_up,
    })
}

fn resume_of(r: &crate::endpoint::http::resume::Resume) -> HttpResume {
    HttpResume {
        offset: r.offset,
        cause: r.cause.word(),
        attempts: r.attempts,
    }
}

fn info_of(
    response: &Response,
    resumed_from: u64,
    ranges: u32,
    resumes: Vec<HttpResume>,
    kept: Option<Kept>,
) -> HttpInfo {
    let head = &response.head;
    HttpInfo {
        method: "GET".to_string(),
        status: head.status,
        reason: head.reason.clone(),
        url: redact_url(&response.url),
        etag: head.etag().map(str::to_string),
        redirects: response.redirects,
        framing: head.framing.word(),
        length: match head.framing {
            crate::endpoint::http::Framing::Length(n) => Some(n),
            _ => None,
        },
        resumes,
        resumed_from,
        ranges,
        validator_kept: kept.map(Kept::word),
        tls: response.conn.tls.as_ref().map(|s| s.info.clone()),
        ..HttpInfo::default()
    }
}

/// Moves a body's pipe into `file` (at its offset) through the engine's chain, at most
/// `limit` bytes.
fn into_file(
    body: OwnedFd,
    file: BorrowedFd<'_>,
    meter: &Meter,
    limit: u64,
) -> anyhow::Result<(Record, Option<Failure>)> {
    let src_info = FdInfo::of(body.as_fd())?;
    let dst_info = FdInfo::of(file)?;
    let chain = engine::chain(&src_info, &dst_info, engine::Via::Auto)
        .map_err(|e| anyhow!("no path from the body to the file: {e}"))?;
    let ends = Ends {
        src: body.as_fd(),
        src_info,
        dst: file,
        dst_info,
        reserve: 0,
        tap: None,
    };
    let got = engine::transfer_upto(&ends, &chain, None, meter, limit);
    drop(body);
    Ok(got)
}

/// `-j N`: a probe, then N ranges at once into a temporary renamed over `dest`.
fn ranged(
    client: &Client,
    get: &Request,
    dest: &Path,
    jobs: usize,
    policy: &ResumePolicy,
    meter: &Arc<Meter>,
) -> anyhow::Result<Done> {
    let probe = answered(
        client,
        &ranged_request(client, get, "bytes=0-0".to_string(), None),
    )?;
    let shown = client.shown(&probe.url);
    let head = probe.head.clone();
    let validator = Validator::of(
        head.etag(),
        head.header("last-modified"),
        head.header("date"),
    );
    let total = match (head.status, head.content_range(), &validator) {
        (206, Some((0, 0, Some(total))), Some(_)) => total,
        // No ranges, or no validator to hold the ranges to one version: one connection.
        (200, ..) | (206, ..) => {
            drop(probe);
            let mut done = single_into_temp(client, get, dest, policy, meter)?;
            done.gets += 1;
            return Ok(done);
        }
        _ if !head.is_success() => bail!(client.refusal(probe)),
        (status, ..) => bail!("{shown}: the server answered {status} to a probe of one byte"),
    };
    drop(probe);
    let validator = validator.expect("matched above");
    let parts = (jobs as u64).min(total.div_ceil(MIN_PART)).max(1);
    let size = total.div_ceil(parts);
    let temp = temporary(dest)?;
    nix::unistd::ftruncate(temp.as_fd(), total as i64).context("cannot size the temporary")?;
    let results: Vec<anyhow::Result<(Record, Option<Failure>, crate::endpoint::http::PumpEnd)>> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..parts)
                .map(|i| {
                    let (a, b) = (i * size, ((i + 1) * size).min(total) - 1);
                    let (temp, validator) = (&temp, &validator);
                    scope.spawn(move || {
                        fetch_part(client, get, temp, a, b, total, validator, policy, meter)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow!("a range's thread panicked")))
                })
                .collect()
        });
    let mut record = Record::default();
    let mut error = None;
    let mut interrupted = false;
    let mut resumes = Vec::new();
    let (mut continued, mut gave_up) = (Vec::new(), Vec::new());
    let (mut spliced, mut copied) = (0, 0);
    for r in results {
        match r {
            Ok((rec, failure, end)) => {
                record.merge(&rec);
                spliced += end.spliced;
                copied += end.copied;
                resumes.extend(end.resumes.iter().map(resume_of));
                continued.extend(end.resumes);
                gave_up.extend(end.resume_failed);
                interrupted |= matches!(failure, Some(Failure::Interrupted));
                let failed = end.error.or(failure.and_then(|f| match f {
                    Failure::Io(e, _) => {
                        Some(format!("the temporary of '{}': {e}", dest.display()))
                    }
                    Failure::Interrupted => None,
                }));
                error = error.or(failed);
            }
            Err(e) => error = error.or(Some(format!("{e:#}"))),
        }
    }
    resumes.sort_by_key(|r| r.offset);
    if error.is_none() && !interrupted && record.bytes() != total {
        error = Some(format!(
            "{shown}: {} of {total} bytes arrived",
            record.bytes()
        ));
    }
    if error.is_none() && !interrupted {
        commit(temp, dest)?;
    }
    let info = HttpInfo {
        method: "GET".to_string(),
        status: 206,
        reason: "Partial Content".to_string(),
        url: shown,
        etag: head.etag().map(str::to_string),
        framing: head.framing.word(),
        length: Some(total),
        spliced,
        copied,
        resumes,
        ranges: parts as u32,
        ..HttpInfo::default()
    };
    Ok(Done {
        record,
        info,
        error,
        interrupted,
        // The probe and the ranges.
        gets: 1 + parts,
        resumes: continued,
        gave_up,
    })
}

/// One range `a..=b` of `-j` into the temporary at `a`, resumed on its own.
#[allow(clippy::too_many_arguments)]
fn fetch_part(
    client: &Client,
    get: &Request,
    temp: &Temp,
    a: u64,
    b: u64,
    total: u64,
    validator: &Validator,
    policy: &ResumePolicy,
    meter: &Meter,
) -> anyhow::Result<(Record, Option<Failure>, crate::endpoint::http::PumpEnd)> {
    let request = ranged_request(client, get, format!("bytes={a}-{b}"), Some(validator));
    let response = answered(client, &request)?;
    let shown = client.shown(&response.url);
    let head = &response.head;
    let answer = Answer::of(head);
    check_continuation(&answer, a, Some(b), Some(total), validator)
        .map_err(|r| anyhow!("{shown}: range {a}-{b}: {}", refusal_text(&r, a)))?;
    let resumer = Resumer::new(client, get, head, a, policy);
    let (body, pump): (OwnedFd, BodyPump) = response.into_resumable_body(resumer)?;
    // An open file description of its own: its offset is this range's.
    let fd = reopen(temp)?;
    nix::unistd::lseek(fd.as_raw_fd(), a as i64, Whence::SeekSet)?;
    let (record, failure) = into_file(body, fd.as_fd(), meter, b - a + 1)?;
    let end = pump.finish(PUMP_FINISH);
    Ok((record, failure, end))
}

/// `-j` against a server without ranges (or without a validator): the whole object on one
/// connection, still into a temporary renamed over the destination.
fn single_into_temp(
    client: &Client,
    get: &Request,
    dest: &Path,
    policy: &ResumePolicy,
    meter: &Arc<Meter>,
) -> anyhow::Result<Done> {
    let response = answered(client, get)?;
    if !response.head.is_success() {
        bail!(client.refusal(response));
    }
    let temp = temporary(dest)?;
    let head = response.head.clone();
    let resumer = Resumer::new(client, get, &head, 0, policy);
    let info = info_of(&response, 0, 1, Vec::new(), None);
    let what = format!("the temporary of '{}'", dest.display());
    let done = whole_body_into(response, resumer, temp.as_fd(), meter, info, &what)?;
    if done.error.is_none() && !done.interrupted {
        commit(temp, dest)?;
    }
    Ok(done)
}

/// The `--atomic` temporary of `dest` (atomic.rs): an O_TMPFILE, or a hidden named file;
/// beside the file a symlink at `dest` names, which the rename then replaces.
fn temporary(dest: &Path) -> anyhow::Result<Temp> {
    let target = written_through(dest).map_err(|why| anyhow!("'{}': {why}", dest.display()))?;
    Temp::create(&target, 0o666)
        .with_context(|| format!("cannot create a temporary beside '{}'", dest.display()))
}

/// An open file description of the temporary's own (`/proc/self/fd/N` opened again): its
/// offset is one range's, whatever the other threads do.
fn reopen(temp: &Temp) -> anyhow::Result<File> {
    OpenOptions::new()
        .write(true)
        .open(format!("/proc/self/fd/{}", temp.raw_fd()))
        .context("cannot open the temporary again")
}

fn commit(temp: Temp, dest: &Path) -> anyhow::Result<()> {
    temp.commit(false)
        .map_err(|e| anyhow!("cannot rename the temporary over '{}': {e}", dest.display()))
}
