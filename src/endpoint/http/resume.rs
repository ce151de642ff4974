//! Resuming a body that stopped short (issue 38 item 4, AIStore's ObjectFile job): the
//! rules, pure. Which validator a first response offers for `If-Range` ([`Validator`]),
//! what a later answer must be to be spliced after the bytes already delivered
//! ([`check_continuation`]), how long to wait between attempts ([`Backoff`]), and what the
//! report says of each resume ([`Resume`]); and [`Resumer`], what the body's pump
//! (`body.rs`) calls when the body stops short: it reconnects with backoff, asks for the rest
//! with `Range` + `If-Range`, and hands back the answer only when it continues the same
//! version at the exact offset, so the pump splices it into the same pipe and every sink
//! behind it (file, pipe, socket, tee's fan-out) sees one unbroken body.
//!
//! The one promise: bytes of two versions of an object never meet in a sink. A 200 to a
//! ranged request is the whole object again (it changed, or the server ignores ranges): it
//! is refused, never spliced after the first part. A 206 is taken only when its
//! Content-Range starts exactly at the offset asked, its total is the first answer's, and
//! whatever validator it names is the first answer's. A first answer without a strong
//! ETag or a usable Last-Modified gets no resume at all (HAZARDS §3).

use std::fmt;
use std::time::{Duration, Instant};

use super::{Client, Framing, Request, Response, ResponseHead, Sent};

/// `--retries`, `--retry-wait` and `--idle-timeout` as an http source takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumePolicy {
    /// Reconnections in a row that make no headway ([`HEADWAY`]) before giving up (0:
    /// never resume).
    pub retries: u32,
    /// The wait before the second attempt after a cut; doubled after each failed one.
    pub wait: Duration,
    /// No byte of the body for this long counts as a cut.
    pub idle: Duration,
}

/// `--retries 5`, `--retry-wait 1s`, `--idle-timeout 30s`.
pub const DEFAULT_POLICY: ResumePolicy = ResumePolicy {
    retries: 5,
    wait: Duration::from_secs(1),
    idle: Duration::from_secs(30),
};

impl Default for ResumePolicy {
    fn default() -> ResumePolicy {
        DEFAULT_POLICY
    }
}

/// Why a body cannot be resumed at all, for the report (`resume: off (…)`).
pub fn no_resume_reason(head: &ResponseHead, policy: &ResumePolicy) -> Option<&'static str> {
    if policy.retries == 0 {
        return Some("--retries 0");
    }
    if !matches!(head.status, 200 | 206) {
        return Some("not a 200 or 206");
    }
    if validator_of(head).is_none() {
        return Some("no strong ETag or Last-Modified: no blind resume");
    }
    None
}

fn validator_of(head: &ResponseHead) -> Option<Validator> {
    Validator::of(
        head.etag(),
        head.header("last-modified"),
        head.header("date"),
    )
}

/// What the body's pump needs to continue a body that stopped short: the request to send
/// again, the first answer's validator and extent, the policy, and the resumes so far.
#[derive(Debug)]
pub struct Resumer {
    client: Client,
    request: Request,
    validator: Validator,
    /// The object offset of the body's first byte (range=START, or where `copy --resume`
    /// continues a partial file).
    start: u64,
    /// The last byte asked (range=START-END), inclusive.
    end: Option<u64>,
    /// The object's length, as the first answer said it.
    total: Option<u64>,
    backoff: Backoff,
    pub idle: Duration,
    /// The furthest offset a resume continued at: beyond it is progress.
    furthest: u64,
    /// When the connection now moving the body was taken (its answer accepted).
    since: Instant,
    pub resumes: Vec<Resume>,
    /// The resume that gave up (the body ends there): where, why, its reconnections.
    pub failed: Option<Resume>,
}

impl Resumer {
    /// The resumer of `first`, the answer to `request` (which asked from object offset
    /// `start`); None when it cannot be resumed ([`no_resume_reason`]).
    pub fn new(
        client: &Client,
        request: &Request,
        first: &ResponseHead,
        start: u64,
        policy: &ResumePolicy,
    ) -> Option<Resumer> {
        if no_resume_reason(first, policy).is_some() {
            return None;
        }
        let validator = validator_of(first)?;
        let (end, total) = match (first.status, first.content_range(), first.framing) {
            (206, Some((_, end, total)), _) => (Some(end), total),
            (_, _, Framing::Length(n)) => (None, Some(start + n)),
            _ => (None, None),
        };
        let mut request = request.clone();
        request.headers.retain(|(n, _)| {
            !n.eq_ignore_ascii_case("range") && !super::Precondition::is_precondition_header(n)
        });
        Some(Resumer {
            client: client.clone(),
            request,
            validator,
            start,
            end: end.filter(|&e| Some(e + 1) != total),
            total,
            backoff: Backoff::new(policy.retries, policy.wait),
            idle: policy.idle,
            furthest: start,
            since: Instant::now(),
            resumes: Vec::new(),
            failed: None,
        })
    }

    /// How messages name `url` (the client's [`Client::shown`]).
    pub fn shown(&self, url: &url::Url) -> String {
        self.client.shown(url)
    }

    /// The validator the resumes are conditional on.
    pub fn validator(&self) -> &Validator {
        &self.validator
    }

    /// After `delivered` bytes of the body (from the first answer's first byte), stopped
    /// by `cause`: reconnects until an answer continues at exactly that offset, with the
    /// backoff of [`Backoff`]. Ok: that answer, its head read, its framing what the pump
    /// moves next (a 206 that says neither length nor chunked is taken as long as its
    /// Content-Range). Err: why not, in words (the object changed, attempts used up).
    pub fn reconnect(&mut self, delivered: u64, cause: Cause) -> Result<Response, String> {
        let mut tried = 0;
        let resumed = self.try_resume(delivered, cause, &mut tried);
        if resumed.is_err() {
            self.failed = Some(Resume {
                offset: self.start + delivered,
                cause,
                attempts: tried,
            });
        }
        resumed
    }

    /// [`Resumer::reconnect`]; `tried` counts its reconnections, answered or not.
    fn try_resume(
        &mut self,
        delivered: u64,
        cause: Cause,
        tried: &mut u32,
    ) -> Result<Response, String> {
        let offset = self.start + delivered;
        let shown = self.client.shown(&self.request.url);
        // Headway starts the count over, and so the next attempt goes at once; a connection
        // that broke after a few bytes, quickly, is one more failed attempt, so a server
        // that cuts every connection early is not hammered with immediate reconnections.
        if offset > self.furthest {
            let moved = offset - self.furthest;
            self.furthest = offset;
            if moved >= HEADWAY || self.since.elapsed() >= self.backoff.wait {
                self.backoff.progressed();
            }
        }
        let mut last = String::new();
        // `tried`: this resume's own reconnections (the count in a row may include earlier
        // ones).
        loop {
            let Some(wait) = self.backoff.next_wait() else {
                let attempts = self.backoff.attempts();
                let word = cause.word();
                return Err(if last.is_empty() {
                    format!(
                        "{shown}: the body stopped after {offset} bytes ({word}); {attempts} \
                         attempt(s) in a row to resume each broke before moving {} KiB or \
                         lasting --retry-wait",
                        HEADWAY / 1024
                    )
                } else {
                    format!(
                        "{shown}: the body stopped after {offset} bytes ({word}); {attempts} \
                         attempt(s) to resume there failed, the last: {last}"
                    )
                });
            };
            if !pause(wait) {
                return Err(format!(
                    "{shown}: interrupted while waiting to resume at {offset}"
                ));
            }
            *tried += 1;
            let mut request = self.request.clone();
            let range = match self.end {
                Some(end) => format!("bytes={offset}-{end}"),
                None => format!("bytes={offset}-"),
            };
            request.headers.push(("Range".to_string(), range));
            let (name, value) = self.client.precondition.header(&self.validator);
            request.headers.push((name.to_string(), value));
            let mut response = match self.client.exchange(&request) {
                Ok(Sent::Answered(response)) => response,
                Ok(Sent::Continue(..)) => unreachable!("a GET has no body to continue"),
                Err(e) => {
                    last = format!("{e:#}");
                    continue;
                }
            };
            let answer = Answer::of(&response.head);
            match check_continuation(&answer, offset, self.end, self.total, &self.validator) {
                Ok(carried) => {
                    match response.head.framing {
                        Framing::Length(n) if n != carried => {
                            return Err(format!(
                                "{shown}: the answer to the resume at {offset} says \
                                 Content-Range of {carried} bytes and Content-Length {n}"
                            ));
                        }
                        Framing::UntilClose => response.head.framing = Framing::Length(carried),
                        _ => {}
                    }
                    self.resumes.push(Resume {
                        offset,
                        cause,
                        attempts: *tried,
                    });
                    self.since = Instant::now();
                    return Ok(response);
                }
                Err(refusal) if refusal.may_pass() => {
                    last = refusal_text(&refusal, offset);
                }
                Err(refusal) => return Err(format!("{shown}: {}", refusal_text(&refusal, offset))),
            }
        }
    }
}

/// Sleeps `wait` in short naps; false when SIGINT/SIGTERM came meanwhile.
fn pause(wait: Duration) -> bool {
    let until = Instant::now() + wait;
    loop {
        if crate::sys::process::interrupted() {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// What the first answer offered to make a later ranged request conditional on the same
/// version: `If-Range: VALUE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Validator {
    /// A strong entity tag, as sent (quotes included).
    ETag(String),
    /// An HTTP date, as sent, at least a second older than the answer's Date.
    LastModified(String),
}

impl Validator {
    /// The validator of a first answer: its ETag when strong (a weak `W/"…"` never goes
    /// in If-Range, RFC 9110 §13.1.5), else its Last-Modified when it is at least a second
    /// older than the answer's Date (a date within the second of the answer may name two
    /// versions written in that second); else none, and no resume.
    pub fn of(
        etag: Option<&str>,
        last_modified: Option<&str>,
        date: Option<&str>,
    ) -> Option<Validator> {
        if let Some(tag) = etag.map(str::trim) {
            if is_strong_etag(tag) {
                return Some(Validator::ETag(tag.to_string()));
            }
        }
        let lm = last_modified.map(str::trim)?;
        let lm_secs = http_date_seconds(lm)?;
        let date_secs = http_date_seconds(date?.trim())?;
        (date_secs > lm_secs).then(|| Validator::LastModified(lm.to_string()))
    }

    /// The value of `If-Range`.
    pub fn if_range(&self) -> &str {
        match self {
            Validator::ETag(v) | Validator::LastModified(v) => v,
        }
    }

    /// Does a later answer's ETag / Last-Modified contradict this one? An answer that names
    /// none contradicts nothing (If-Range already asked the server to compare).
    pub fn contradicted_by(&self, etag: Option<&str>, last_modified: Option<&str>) -> bool {
        match self {
            Validator::ETag(v) => etag.is_some_and(|e| e.trim() != v),
            Validator::LastModified(v) => last_modified.is_some_and(|l| l.trim() != v),
        }
    }

    /// How the validator is kept with a partial file and in the report: `etag "…"` or
    /// `last-modified DATE`.
    pub fn to_line(&self) -> String {
        match self {
            Validator::ETag(v) => format!("etag {v}"),
            Validator::LastModified(v) => format!("last-modified {v}"),
        }
    }

    /// The inverse of [`Validator::to_line`].
    pub fn from_line(line: &str) -> Option<Validator> {
        let (kind, value) = line.trim().split_once(' ')?;
        match kind {
            "etag" if is_strong_etag(value) => Some(Validator::ETag(value.to_string())),
            "last-modified" if http_date_seconds(value).is_some() => {
                Some(Validator::LastModified(value.to_string()))
            }
            _ => None,
        }
    }
}

impl fmt::Display for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_line())
    }
}

/// `"…"` with no `W/` in front: a strong entity tag (RFC 9110 §8.8.3).
fn is_strong_etag(tag: &str) -> bool {
    tag.len() >= 2
        && tag.starts_with('"')
        && tag.ends_with('"')
        && !tag[1..tag.len() - 1].contains('"')
}

/// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, the only
/// form RFC 9110 lets a server send); None for anything else.
fn http_date_seconds(date: &str) -> Option<i64> {
    let rest = date.split_once(", ")?.1;
    let mut parts = rest.split(' ');
    let day: i64 = parts.next()?.parse().ok()?;
    let month = parts.next()?;
    let year: i64 = parts.next()?.parse().ok()?;
    let time = parts.next()?;
    if parts.next()? != "GMT" || parts.next().is_some() {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? as i64 + 1;
    let mut hms = time.split(':').map(|x| x.parse::<i64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let days = crate::units::days_from_civil(year, month as u32, day as u32);
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

/// `Content-Range: bytes START-END/TOTAL` (TOTAL may be `*`): (start, end inclusive, total).
pub fn parse_content_range(value: &str) -> Option<(u64, u64, Option<u64>)> {
    let spec = value.trim().strip_prefix("bytes ")?;
    let (range, total) = spec.split_once('/')?;
    let (start, end) = range.split_once('-')?;
    let start: u64 = start.trim().parse().ok()?;
    let end: u64 = end.trim().parse().ok()?;
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse().ok()?),
    };
    if end < start || total.is_some_and(|t| end >= t) {
        return None;
    }
    Some((start, end, total))
}

/// What a later answer to `Range: bytes=OFFSET-[END]` + `If-Range` says, in the terms
/// [`check_continuation`] needs.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub status: u16,
    pub content_range: Option<&'a str>,
    pub etag: Option<&'a str>,
    pub last_modified: Option<&'a str>,
}

impl<'a> Answer<'a> {
    /// What a response head says to a continuation.
    pub fn of(head: &'a ResponseHead) -> Answer<'a> {
        Answer {
            status: head.status,
            content_range: head.header("content-range"),
            etag: head.etag(),
            last_modified: head.header("last-modified"),
        }
    }
}

/// Why a later answer cannot continue the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 200: the whole object again. It changed since the first answer (If-Range said so),
    /// or the server ignores ranges: either way not spliced after the first part. 412: the
    /// If-Match of an S3 resume failed, another version is there.
    Changed { status: u16 },
    /// A 206 that names another validator than the first answer's.
    OtherVersion { named: String },
    /// A 206 whose Content-Range is missing, unparsable or not the bytes asked for.
    WrongRange { got: Option<String>, want: String },
    /// Any other status (a 416, a 5xx...): may pass, worth another attempt.
    Status(u16),
}

impl Refusal {
    /// Another attempt may get a good answer (a 5xx, a 429, a 408); the others are final.
    pub fn may_pass(&self) -> bool {
        matches!(self, Refusal::Status(s) if *s >= 500 || *s == 429 || *s == 408)
    }
}

/// The message of a refused continuation after `delivered` bytes of the body.
pub fn refusal_text(refusal: &Refusal, delivered: u64) -> String {
    match refusal {
        Refusal::Changed { status: 412 } => format!(
            "the object changed after {delivered} bytes (asked to resume at {delivered} if it \
             was still the same version, the server answered 412 Precondition Failed: another \
             version is there now; nothing of it was written)"
        ),
        Refusal::Changed { status } => format!(
            "the object changed after {delivered} bytes (asked to resume at {delivered}, the \
             server answered {status} with the whole object: another version, or a server \
             that ignores ranges; nothing of it was written)"
        ),
        Refusal::OtherVersion { named } => format!(
            "the object changed after {delivered} bytes (the part that would continue it is \
             of another version: {named})"
        ),
        Refusal::WrongRange { got, want } => format!(
            "the server answered the resume at {delivered} with Content-Range {}, not {want}",
            got.as_deref()
                .map_or("(none)".to_string(), |g| format!("'{g}'"))
        ),
        Refusal::Status(s) => format!("the server answered the resume at {delivered} with {s}"),
    }
}

/// Checks a later answer to `Range: bytes=OFFSET-` (`end`: the last byte asked, inclusive,
/// when the request had one) against the first answer: 206, Content-Range exactly
/// `OFFSET-…/TOTAL` (TOTAL the first answer's when it said one), no other validator.
/// `total`: the object's length as the first answer gave it. Ok: the bytes the answer
/// carries.
pub fn check_continuation(
    answer: &Answer<'_>,
    offset: u64,
    end: Option<u64>,
    total: Option<u64>,
    validator: &Validator,
) -> Result<u64, Refusal> {
    match answer.status {
        206 => {}
        // 200: If-Range found another version and sent it whole; 412: If-Match (S3) found
        // another version.
        200 | 412 => {
            return Err(Refusal::Changed {
                status: answer.status,
            })
        }
        s => return Err(Refusal::Status(s)),
    }
    if validator.contradicted_by(answer.etag, answer.last_modified) {
        return Err(Refusal::OtherVersion {
            named: answer
                .etag
                .or(answer.last_modified)
                .unwrap_or_default()
                .to_string(),
        });
    }
    let want_end = end.or(total.map(|t| t - 1));
    let want = format!(
        "bytes {offset}-{}/{}",
        want_end.map_or("…".to_string(), |e| e.to_string()),
        total.map_or("*".to_string(), |t| t.to_string())
    );
    let wrong = || Refusal::WrongRange {
        got: answer.content_range.map(str::to_string),
        want: want.clone(),
    };
    let (start, last, got_total) = answer
        .content_range
        .and_then(parse_content_range)
        .ok_or_else(wrong)?;
    let total_ok = match (total, got_total) {
        (Some(t), Some(g)) => t == g,
        _ => true,
    };
    if start != offset || want_end.is_some_and(|e| last != e) || !total_ok {
        return Err(wrong());
    }
    Ok(last - start + 1)
}

/// Why a body stopped short: each resume says it in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The connection was reset (ECONNRESET, EPIPE, ETIMEDOUT...).
    Reset,
    /// The server closed before Content-Length.
    Eof,
    /// A chunked body ended before its last chunk.
    ChunkedCut,
    /// No byte for `--idle-timeout`.
    Idle,
}

impl Cause {
    pub fn word(self) -> &'static str {
        match self {
            Cause::Reset => "reset",
            Cause::Eof => "closed early",
            Cause::ChunkedCut => "chunked body cut",
            Cause::Idle => "idle",
        }
    }
}

/// One resume, for the report: where the body continued, and why it had to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    pub offset: u64,
    pub cause: Cause,
    /// Attempts it took (1: the first reconnection answered); of one that gave up, the
    /// reconnections it made (0: the attempts in a row were used up before it).
    pub attempts: u32,
}

impl Resume {
    /// Its reconnections that did not continue the body: all of one that gave up
    /// (`continued` false), all but the last of one that continued it.
    pub fn failed_attempts(&self, continued: bool) -> u32 {
        if continued {
            self.attempts.saturating_sub(1)
        } else {
            self.attempts
        }
    }
}

/// How far a connection must carry the body, or how long (`--retry-wait`), for its cut to
/// count as headway: the count of attempts starts over and the next one goes at once. A
/// connection cut sooner is one more failed attempt (the waits keep doubling), so a server
/// that breaks every connection after a few bytes sees `--retries` reconnections, spaced
/// out, not one per few bytes (bench/NOTEBOOK.md#http-targets).
pub const HEADWAY: u64 = 1 << 20;

/// `--retries N` and `--retry-wait D`: after a cut, the first reconnection goes at once
/// (the connection dropped; the server is likely fine; curl and wget wait 1 s before
/// theirs), each failed one waits twice the last wait, starting at `wait`. Headway
/// ([`HEADWAY`]) starts the count over: `retries` bounds the attempts in a row that get
/// nowhere, not a long download's cuts.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub retries: u32,
    pub wait: Duration,
    failed: u32,
}

impl Backoff {
    pub fn new(retries: u32, wait: Duration) -> Backoff {
        Backoff {
            retries,
            wait,
            failed: 0,
        }
    }

    /// The body made headway since the last attempt: the count starts over.
    pub fn progressed(&mut self) {
        self.failed = 0;
    }

    /// Before the next attempt: how long to wait, or None when `retries` attempts in a row
    /// failed.
    pub fn next_wait(&mut self) -> Option<Duration> {
        if self.failed >= self.retries {
            return None;
        }
        self.failed += 1;
        Some(match self.failed {
            1 => Duration::ZERO,
            n => self.wait.saturating_mul(1 << (n - 2).min(16)),
        })
    }

    /// Attempts made since the last progress.
    pub fn attempts(&self) -> u32 {
        self.failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LM: &str = "Mon, 02 Jan 2006 15:04:05 GMT";

    #[test]
    fn a_strong_etag_first_then_a_last_modified_a_second_old() {
        let v = |e, l, d| Validator::of(e, l, d);
        assert_eq!(
            v(Some("\"a1\""), Some(LM), None),
            Some(Validator::ETag("\"a1\"".into()))
        );
        assert_eq!(
            v(
                Some("W/\"a1\""),
                Some(LM),
                Some("Mon, 02 Jan 2006 15:04:06 GMT")
            ),
            Some(Validator::LastModified(LM.into())),
            "a weak ETag is passed over"
        );
        assert_eq!(v(Some("W/\"a1\""), None, None), None);
        assert_eq!(v(None, Some(LM), Some(LM)), None, "the same second as Date");
        assert_eq!(v(None, Some(LM), None), None, "no Date to compare with");
        assert_eq!(v(None, Some("yesterday"), Some(LM)), None);
        assert_eq!(v(None, None, None), None);
        assert_eq!(
            v(Some("a1"), None, None),
            None,
            "an unquoted tag is no ETag"
        );
    }

    #[test]
    fn http_dates_are_read_exactly() {
        assert_eq!(
            http_date_seconds("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(http_date_seconds("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(http_date_seconds("Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(http_date_seconds("Sun, 06 Nov 1994 08:49:37 UTC"), None);
    }

    #[test]
    fn validator_lines_round_trip() {
        for v in [
            Validator::ETag("\"x-1\"".into()),
            Validator::LastModified(LM.into()),
        ] {
            assert_eq!(Validator::from_line(&v.to_line()), Some(v));
        }
        assert_eq!(Validator::from_line("etag W/\"x\""), None);
        assert_eq!(Validator::from_line("garbage"), None);
    }

    #[test]
    fn content_range_is_parsed_strictly() {
        assert_eq!(parse_content_range("bytes 0-9/10"), Some((0, 9, Some(10))));
        assert_eq!(parse_content_range("bytes 5-9/*"), Some((5, 9, None)));
        assert_eq!(parse_content_range("bytes 5-10/10"), None, "past the end");
        assert_eq!(parse_content_range("bytes 9-5/10"), None);
        assert_eq!(parse_content_range("bytes */10"), None);
        assert_eq!(parse_content_range("items 0-9/10"), None);
    }

    #[test]
    fn only_the_right_206_continues() {
        let v = Validator::ETag("\"v1\"".into());
        let answer = |status, cr, etag| Answer {
            status,
            content_range: cr,
            etag,
            last_modified: None,
        };
        let check = |a: Answer<'_>| check_continuation(&a, 100, None, Some(1000), &v);
        assert_eq!(
            check(answer(206, Some("bytes 100-999/1000"), Some("\"v1\""))),
            Ok(900)
        );
        assert_eq!(
            check(answer(206, Some("bytes 100-999/1000"), None)),
            Ok(900)
        );
        assert_eq!(
            check(answer(200, None, Some("\"v2\""))),
            Err(Refusal::Changed { status: 200 })
        );
        assert_eq!(
            check(answer(200, None, Some("\"v1\""))),
            Err(Refusal::Changed { status: 200 })
        );
        assert_eq!(
            check(answer(412, None, None)),
            Err(Refusal::Changed { status: 412 }),
            "If-Match failed: another version"
        );
        assert!(matches!(
            check(answer(206, Some("bytes 100-999/1000"), Some("\"v2\""))),
            Err(Refusal::OtherVersion { .. })
        ));
        for wrong in [
            "bytes 107-999/1000",
            "bytes 100-998/1000",
            "bytes 100-999/1001",
            "junk",
        ] {
            assert!(
                matches!(
                    check(answer(206, Some(wrong), None)),
                    Err(Refusal::WrongRange { .. })
                ),
                "{wrong}"
            );
        }
        assert!(matches!(
            check(answer(206, None, None)),
            Err(Refusal::WrongRange { .. })
        ));
        assert_eq!(check(answer(503, None, None)), Err(Refusal::Status(503)));
        assert!(Refusal::Status(503).may_pass() && !Refusal::Status(416).may_pass());
        // a bounded range (copy -j): the end asked must be the end given
        let a = answer(206, Some("bytes 100-199/1000"), None);
        assert_eq!(
            check_continuation(&a, 100, Some(199), Some(1000), &v),
            Ok(100)
        );
        assert!(check_continuation(&a, 100, Some(299), Some(1000), &v).is_err());
    }

    #[test]
    fn the_first_retry_goes_at_once_then_waits_double() {
        let mut b = Backoff::new(4, Duration::from_millis(100));
        let waits: Vec<_> = std::iter::from_fn(|| b.next_wait()).collect();
        assert_eq!(
            waits,
            [0, 100, 200, 400].map(Duration::from_millis).to_vec()
        );
        b.progressed();
        assert_eq!(
            b.next_wait(),
            Some(Duration::ZERO),
            "progress starts the count over"
        );
        assert_eq!(Backoff::new(0, Duration::ZERO).next_wait(), None);
    }
}
