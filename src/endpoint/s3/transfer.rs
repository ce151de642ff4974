//! An `s3://BUCKET/KEY` opened for the engine.
//!
//! - As a source: a signed GET whose body the http endpoint's pump splices into a pipe the
//!   engine reads (`endpoint/http/body.rs`); a body cut short is resumed there with
//!   `Range` + `If-Match` of its ETag, into the same pipe, so every sink sees one body, and
//!   an object replaced meanwhile is refused ("the object changed after N bytes").
//!   [`Transfer::finish`] takes the pump's verdict and checks the bytes against
//!   Content-Length, so a cut that could not be mended is a failure, never a short object.
//! - As a sink: the engine writes into a pipe; an uploader thread splices it into a memfd
//!   part by part (no user copy; the part stays there so a retried request sends it again)
//!   and sends each with sendfile. What fits in one part (`part-size=`, 8 MiB as the AWS
//!   CLI) is one PUT, a 0-byte stream an empty object; more is a multipart upload, parts
//!   sent by `parts=N` threads ([`PARTS_IN_FLIGHT`] unless given; copy's `-j N`) while the
//!   next is staged (memory: parts in flight + 1, times the part size, in memfds: page
//!   cache, not the process's RSS, which holds one 1 MiB window a sender while it hashes).
//!   Nothing is created until the run says the stream ended well:
//!   on a failure or a signal the multipart upload is aborted (AbortMultipartUpload) and a
//!   single PUT never sent.

use std::os::fd::OwnedFd;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

use anyhow::{anyhow, Context};
use nix::fcntl::OFlag;

use super::client::{Body, Call, Client, Head, Kind};
use super::xml;
use crate::endpoint::http::{BodyPump, PUMP_FINISH};
use crate::endpoint::S3Opts;
use crate::sys::memfd::Staged;

/// The part size when `part-size=` is not given: the AWS CLI's multipart chunk size.
pub const DEFAULT_PART_SIZE: u64 = 8 << 20;
/// S3's smallest part (all but the last).
pub const MIN_PART_SIZE: u64 = 5 << 20;
/// S3's largest part.
pub const MAX_PART_SIZE: u64 = 5 << 30;
/// S3's most parts in one upload.
pub const MAX_PARTS: u32 = 10_000;
/// Parts sent at once while the next is staged, when `parts=` does not say.
pub const PARTS_IN_FLIGHT: usize = 4;
/// The most `parts=` takes: 64 parts of 8 MiB in flight is half a GiB of memfds already.
pub const MAX_PARTS_IN_FLIGHT: usize = 64;

/// An S3 endpoint's side of a run: what to check or commit when the engine is done.
pub struct Transfer {
    client: Client,
    uri: String,
    job: Job,
}

impl std::fmt::Debug for Transfer {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_struct("Transfer")
            .field("uri", &self.uri)
            .finish_non_exhaustive()
    }
}

enum Job {
    /// A GET of this many bytes, its body pumped (and resumed) by the http endpoint.
    Get { length: u64, pump: Box<BodyPump> },
    /// The uploader thread; the run's verdict goes to it once the engine is done.
    Put {
        verdict: Sender<bool>,
        thread: JoinHandle<Result<(), String>>,
        /// The uploader's failure, set before it closes its end of the pipe (so an EPIPE
        /// the engine meets is explained by then).
        failure: Arc<Mutex<Option<String>>>,
    },
}

impl Transfer {
    /// The requests made so far, by kind: `[("GET", 1)]`.
    pub fn requests(&self) -> Vec<(&'static str, u64)> {
        self.client.counts.named()
    }

    /// A failure already known (an uploader that gave up): it explains the engine's EPIPE.
    pub fn failure(&self) -> Option<String> {
        match &self.job {
            Job::Put { failure, .. } => failure.lock().ok().and_then(|f| f.clone()),
            Job::Get { .. } => None,
        }
    }

    /// The engine is done and the engine's fd is closed: `delivered` bytes went through it,
    /// `complete` says whether the stream ended well (EOF, no failure, no signal). A GET
    /// checks its length; an upload is completed (or its single PUT sent) when `complete`,
    /// else aborted. Returns the requests made and the failure, in words.
    pub fn finish(
        self,
        delivered: u64,
        complete: bool,
    ) -> (Vec<(&'static str, u64)>, Option<String>) {
        let failure = match self.job {
            Job::Get { length, pump } => {
                let end = pump.finish(PUMP_FINISH);
                self.client
                    .counts
                    .add_resumes(&end.resumes, end.resume_failed.as_ref());
                end.error.or_else(|| {
                    (complete && delivered != length).then(|| {
                        format!(
                            "{}: the object ended at {delivered} of its {length} bytes (the \
                             connection was cut)",
                            self.uri
                        )
                    })
                })
            }
            Job::Put {
                verdict, thread, ..
            } => {
                let _ = verdict.send(complete);
                match thread.join() {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(e),
                    Err(_) => Some(format!("{}: the uploader panicked", self.uri)),
                }
            }
        };
        (self.client.counts.named(), failure)
    }
}

/// Open `s3://bucket/key` as a source: the pipe its GET's body is pumped into, and its
/// [`Transfer`].
pub fn open_source(opts: &S3Opts, bucket: &str, key: &str) -> anyhow::Result<(OwnedFd, Transfer)> {
    get(&Client::from_opts(opts)?, bucket, key)
}

/// [`open_source`] with a client of the caller's (a tree's objects share its counts).
pub fn get(client: &Client, bucket: &str, key: &str) -> anyhow::Result<(OwnedFd, Transfer)> {
    let client = client.clone();
    let uri = format!("s3://{bucket}/{key}");
    let (body, pump, length) = client.open_body(&Call {
        kind: Kind::Get,
        method: "GET",
        bucket,
        key,
        query: &[],
        headers: &[],
        body: Body::Empty,
    })?;
    Ok((
        body,
        Transfer {
            client,
            uri,
            job: Job::Get {
                length,
                pump: Box::new(pump),
            },
        },
    ))
}

/// Open `s3://bucket/key` as a sink: the write end of the pipe the uploader reads, and
/// its [`Transfer`].
pub fn open_sink(opts: &S3Opts, bucket: &str, key: &str) -> anyhow::Result<(OwnedFd, Transfer)> {
    put(
        &Client::from_opts(opts)?,
        bucket,
        key,
        opts.part_size,
        opts.parts,
    )
}

/// [`open_sink`] with a client of the caller's; `parts`: sent at once (None:
/// [`PARTS_IN_FLIGHT`]).
pub fn put(
    client: &Client,
    bucket: &str,
    key: &str,
    part_size: Option<u64>,
    parts: Option<usize>,
) -> anyhow::Result<(OwnedFd, Transfer)> {
    let client = client.clone();
    let uri = format!("s3://{bucket}/{key}");
    let part_size = part_size.unwrap_or(DEFAULT_PART_SIZE);
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("pipe")?;
    crate::sys::pipe::grow_pipe(std::os::fd::AsFd::as_fd(&read));
    let (verdict, verdict_rx) = mpsc::channel();
    let failure = Arc::new(Mutex::new(None));
    let upload = Upload {
        client: client.clone(),
        uri: uri.clone(),
        bucket: bucket.to_owned(),
        key: key.to_owned(),
        part_size,
        parts: parts
            .unwrap_or(PARTS_IN_FLIGHT)
            .clamp(1, MAX_PARTS_IN_FLIGHT),
    };
    let shared = failure.clone();
    let thread = thread::Builder::new()
        .name("s3-upload".into())
        .spawn(move || {
            let result = upload.run(read, verdict_rx, &shared);
            if let Err(e) = &result {
                shared.lock().map(|mut f| *f = Some(e.clone())).ok();
            }
            result
        })
        .context("cannot start the uploader")?;
    Ok((
        write,
        Transfer {
            client,
            uri,
            job: Job::Put {
                verdict,
                thread,
                failure,
            },
        },
    ))
}

/// A regular file of `len` bytes (at most a part) as the object `bucket/key`: one PUT,
/// its body sent from the file with sendfile, on the caller's thread.
pub fn put_file(
    client: &Client,
    bucket: &str,
    key: &str,
    file: std::fs::File,
    len: u64,
) -> anyhow::Result<()> {
    let body = Staged::holding(file.into(), len as usize);
    client.call(&Call {
        kind: Kind::Put,
        method: "PUT",
        bucket,
        key,
        query: &[],
        headers: &[],
        body: Body::Staged(&body),
    })?;
    Ok(())
}

struct Upload {
    client: Client,
    uri: String,
    bucket: String,
    key: String,
    part_size: u64,
    /// Parts sent at once.
    parts: usize,
}

/// The size of part `number` (from 1): the part size, doubled every 1,000 parts so a
/// stream of unknown length fits in S3's 10,000 parts (8 MiB parts: about 8 TB in all).
fn part_size_of(base: u64, number: u32) -> u64 {
    (base << ((number - 1) / 1000).min(20)).min(MAX_PART_SIZE)
}

impl Upload {
    fn call<'a>(
        &'a self,
        kind: Kind,
        method: &'a str,
        query: &'a [(String, String)],
        body: Body<'a>,
    ) -> Call<'a> {
        Call {
            kind,
            method,
            bucket: &self.bucket,
            key: &self.key,
            query,
            headers: &[],
            body,
        }
    }

    fn run(
        self,
        pipe: OwnedFd,
        verdict: Receiver<bool>,
        failure: &Mutex<Option<String>>,
    ) -> Result<(), String> {
        let fail = |e: anyhow::Error| format!("{e:#}");
        let staged_err = |e: nix::errno::Errno| format!("{}: staging a part: {e}", self.uri);
        let mut first = Staged::new(c"zerocat-s3-part").map_err(staged_err)?;
        let ended = first
            .fill_from(std::os::fd::AsFd::as_fd(&pipe), self.part_size as usize)
            .map_err(staged_err)?;
        if ended {
            drop(pipe);
            // The whole stream is one part: one PUT, once the run says it is whole.
            if !verdict.recv().unwrap_or(false) {
                return Ok(());
            }
            let body = Body::Staged(&first);
            self.client
                .call(&self.call(Kind::Put, "PUT", &[], body))
                .map_err(fail)?;
            return Ok(());
        }
        let created = self
            .client
            .call(&self.call(
                Kind::Other,
                "POST",
                &[("uploads".into(), String::new())],
                Body::Empty,
            ))
            .map_err(fail)?;
        let upload_id = xml::upload_id(&created.1).map_err(|e| format!("{}: {e}", self.uri))?;
        let result = self.send_parts(first, &pipe, &upload_id, failure);
        // The engine's next write meets EPIPE once the pipe is closed: the failure is
        // recorded first (by send_parts) so it explains that.
        drop(pipe);
        let parts = match result {
            Ok(parts) if verdict.recv().unwrap_or(false) => parts,
            Ok(_) => return self.abort(&upload_id, None),
            Err(e) => return self.abort(&upload_id, Some(e)),
        };
        let body = xml::complete_body(&parts);
        let query = [("uploadId".to_owned(), upload_id.clone())];
        let done =
            self.client
                .call(&self.call(Kind::Other, "POST", &query, Body::Bytes(body.as_bytes())));
        let answer = match done {
            Ok((_, answer)) => answer,
            Err(e) => return self.abort(&upload_id, Some(fail(e))),
        };
        match xml::completed(&answer) {
            Ok(Ok(_etag)) => Ok(()),
            Ok(Err(e)) => {
                let words = self.client.failure(
                    &self.call(Kind::Other, "POST", &query, Body::Empty),
                    200,
                    &answer,
                );
                let _ = e;
                self.abort(&upload_id, Some(format!("{words:#}")))
            }
            Err(e) => self.abort(&upload_id, Some(format!("{}: {e}", self.uri))),
        }
    }

    /// Stage and send every part; the numbers and ETags in order.
    fn send_parts(
        &self,
        first: Staged,
        pipe: &OwnedFd,
        upload_id: &str,
        failure: &Mutex<Option<String>>,
    ) -> Result<Vec<(u32, String)>, String> {
        let etags: Arc<Mutex<Vec<(u32, String)>>> = Arc::default();
        let error: Arc<Mutex<Option<String>>> = Arc::default();
        // A rendezvous channel: a part is staged while the senders are busy, never more.
        let (tx, rx) = mpsc::sync_channel::<(u32, Staged)>(0);
        let rx = Arc::new(Mutex::new(rx));
        let (free_tx, free_rx) = mpsc::channel::<Staged>();
        thread::scope(|scope| {
            for _ in 0..self.parts {
                let rx = rx.clone();
                let etags = etags.clone();
                let error = error.clone();
                let free_tx = free_tx.clone();
                scope.spawn(move || loop {
                    let next = rx.lock().ok().and_then(|r| r.recv().ok());
                    let Some((number, part)) = next else { return };
                    if error.lock().map(|e| e.is_some()).unwrap_or(true) {
                        continue;
                    }
                    let query = [
                        ("partNumber".to_owned(), number.to_string()),
                        ("uploadId".to_owned(), upload_id.to_owned()),
                    ];
                    let sent = self.client.call(&self.call(
                        Kind::Part,
                        "PUT",
                        &query,
                        Body::Staged(&part),
                    ));
                    match sent.map(|(head, _)| etag_of(&head)) {
                        Ok(Some(etag)) => etags.lock().expect("etags").push((number, etag)),
                        Ok(None) => {
                            let e =
                                format!("{}: part {number} was answered without an ETag", self.uri);
                            keep_first(&error, e);
                        }
                        Err(e) => {
                            keep_first(&error, format!("{e:#}"));
                        }
                    };
                    let _ = free_tx.send(part);
                });
            }
            drop(free_tx);
            let mut number = 1u32;
            let mut part = first;
            loop {
                if tx.send((number, part)).is_err() {
                    break;
                }
                if let Some(e) = error.lock().ok().and_then(|e| e.clone()) {
                    failure.lock().map(|mut f| *f = Some(e)).ok();
                    break;
                }
                if number == MAX_PARTS {
                    let e = format!("{}: the stream needs more than {MAX_PARTS} parts", self.uri);
                    keep_first(&error, e);
                    break;
                }
                number += 1;
                part = match free_rx.try_recv() {
                    Ok(mut reused) => match reused.clear() {
                        Ok(()) => reused,
                        Err(e) => {
                            keep_first(&error, format!("{}: {e}", self.uri));
                            break;
                        }
                    },
                    Err(_) => match Staged::new(c"zerocat-s3-part") {
                        Ok(p) => p,
                        Err(e) => {
                            keep_first(&error, format!("{}: memfd: {e}", self.uri));
                            break;
                        }
                    },
                };
                let size = part_size_of(self.part_size, number) as usize;
                match part.fill_from(std::os::fd::AsFd::as_fd(pipe), size) {
                    Ok(ended) if ended && part.is_empty() => break,
                    Ok(ended) => {
                        if ended {
                            let _ = tx.send((number, part));
                            break;
                        }
                    }
                    Err(e) => {
                        keep_first(&error, format!("{}: reading the stream: {e}", self.uri));
                        break;
                    }
                }
            }
            drop(tx);
        });
        if let Some(e) = error.lock().ok().and_then(|e| e.clone()) {
            failure.lock().map(|mut f| *f = Some(e.clone())).ok();
            return Err(e);
        }
        let mut parts = std::mem::take(&mut *etags.lock().expect("etags"));
        parts.sort_by_key(|(n, _)| *n);
        Ok(parts)
    }

    /// AbortMultipartUpload; `why` is the failure to return (None: the run was cut, which
    /// the run reports itself).
    fn abort(&self, upload_id: &str, why: Option<String>) -> Result<(), String> {
        let query = [("uploadId".to_owned(), upload_id.to_owned())];
        let aborted = self
            .client
            .call(&self.call(Kind::Other, "DELETE", &query, Body::Empty));
        match (why, aborted) {
            (None, Ok(_)) => Ok(()),
            (None, Err(e)) => Err(format!("{e:#} (aborting the multipart upload {upload_id}: its parts are left)")),
            (Some(why), Ok(_)) => Err(format!("{why} (the multipart upload was aborted)")),
            (Some(why), Err(e)) => Err(format!(
                "{why}; aborting the multipart upload {upload_id} failed too, its parts are left: {e:#}"
            )),
        }
    }
}

/// Record `e` unless a failure is recorded already (the first one explains the rest).
fn keep_first(slot: &Mutex<Option<String>>, e: String) {
    if let Ok(mut f) = slot.lock() {
        f.get_or_insert(e);
    }
}

fn etag_of(head: &Head) -> Option<String> {
    head.get("etag").map(str::to_owned)
}

/// Every object under `prefix` (ListObjectsV2, every page). Keys come as XML text, not
/// `encoding-type=url`: servers disagree on whether a `+` in it is a space (AWS, botocore)
/// or a `+` (s3s), and a key with `+` must not change name on the way.
pub fn list(client: &Client, bucket: &str, prefix: &str) -> anyhow::Result<Vec<xml::Object>> {
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut query = vec![
            ("list-type".to_owned(), "2".to_owned()),
            ("prefix".to_owned(), prefix.to_owned()),
        ];
        if let Some(t) = &token {
            query.push(("continuation-token".into(), t.clone()));
        }
        let body = list_page(client, bucket, &query)?;
        let page = xml::list_objects(&body).map_err(|e| anyhow!("s3://{bucket}/{prefix}: {e}"))?;
        all.extend(page.objects);
        match page.next {
            Some(next) if Some(&next) != token.as_ref() => token = Some(next),
            Some(_) => {
                return Err(anyhow!(
                    "s3://{bucket}/{prefix}: the listing repeats its continuation token"
                ))
            }
            None => return Ok(all),
        }
    }
}

/// One page of a bucket's listing (objects or uploads): a GET on the bucket with `query`.
fn list_page(client: &Client, bucket: &str, query: &[(String, String)]) -> anyhow::Result<Vec<u8>> {
    let (_, body) = client.call(&Call {
        kind: Kind::List,
        method: "GET",
        bucket,
        key: "",
        query,
        headers: &[],
        body: Body::Empty,
    })?;
    Ok(body)
}

/// Every in-progress multipart upload of `bucket` (ListMultipartUploads, all pages): for
/// tests and for the user's cleanup.
pub fn in_progress(client: &Client, bucket: &str) -> anyhow::Result<Vec<xml::Upload>> {
    let mut all = Vec::new();
    let mut markers: Option<(String, String)> = None;
    loop {
        let mut query = vec![("uploads".to_owned(), String::new())];
        if let Some((key, id)) = &markers {
            query.push(("key-marker".into(), key.clone()));
            query.push(("upload-id-marker".into(), id.clone()));
        }
        let body = list_page(client, bucket, &query)?;
        let page = xml::list_uploads(&body).map_err(|e| anyhow!("s3://{bucket}/: {e}"))?;
        all.extend(page.uploads);
        match page.next {
            Some(next) => markers = Some(next),
            None => return Ok(all),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_grow_every_thousand_so_a_long_stream_fits() {
        assert_eq!(part_size_of(8 << 20, 1), 8 << 20);
        assert_eq!(part_size_of(8 << 20, 1000), 8 << 20);
        assert_eq!(part_size_of(8 << 20, 1001), 16 << 20);
        assert_eq!(
            part_size_of(8 << 20, 10_000),
            MAX_PART_SIZE.min((8 << 20) << 9)
        );
        let total: u64 = (1..=MAX_PARTS).map(|n| part_size_of(8 << 20, n)).sum();
        assert!(total > 8_000_000_000_000, "{total}");
    }
}
