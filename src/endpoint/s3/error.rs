//! An S3 error answer in words, with the next step: what was refused, S3's code in
//! parentheses (for searching), and what to change. Pure.

use super::xml::ErrorBody;

/// Whether the answer asks to try again later: 500, 503, `SlowDown`, `InternalError`,
/// `RequestTimeout` (the server gave up waiting for the body), `ServiceUnavailable`.
pub fn is_retryable(status: u16, code: Option<&str>) -> bool {
    matches!(status, 500 | 502 | 503 | 504)
        || matches!(
            code,
            Some("SlowDown" | "InternalError" | "RequestTimeout" | "ServiceUnavailable")
        )
}

/// What a request was about, for the sentence.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// `s3://BUCKET/KEY` (or `s3://BUCKET/` for a listing).
    pub uri: &'a str,
    pub bucket: &'a str,
    /// Where the credentials came from; None for an unsigned request.
    pub credentials: Option<&'a str>,
}

/// The sentence for an error answer of `status` with S3's `<Error>` body (None when the
/// body was not one: a HEAD, a proxy's HTML page).
pub fn in_words(status: u16, body: Option<&ErrorBody>, asked: Asked) -> String {
    let code = body.map(|b| b.code.as_str()).unwrap_or("");
    let uri = asked.uri;
    let creds = match asked.credentials {
        Some(source) => format!("the credentials from {source}"),
        None => "an unsigned request (no credentials were found: AWS_ACCESS_KEY_ID, \
                 AWS_PROFILE, ~/.aws/credentials)"
            .into(),
    };
    let said = match body {
        Some(b) if !b.message.is_empty() => format!("; the server said: {}", b.message),
        _ => String::new(),
    };
    match code {
        "NoSuchKey" => format!("{uri}: no such object (NoSuchKey)"),
        "NoSuchBucket" => format!(
            "{uri}: the bucket '{}' does not exist (NoSuchBucket)",
            asked.bucket
        ),
        "NoSuchUpload" => format!(
            "{uri}: the multipart upload is gone (NoSuchUpload): aborted or completed by \
             someone else"
        ),
        "AccessDenied" => format!("{uri}: access denied (AccessDenied) to {creds}{said}"),
        "SignatureDoesNotMatch" => format!(
            "{uri}: the server refused the request's signature (SignatureDoesNotMatch): the \
             secret access key of {creds} is not the one the server holds for that access key"
        ),
        "InvalidAccessKeyId" => format!(
            "{uri}: the server does not know the access key ID (InvalidAccessKeyId) of {creds}"
        ),
        "ExpiredToken" | "TokenRefreshRequired" => {
            format!("{uri}: the session token of {creds} has expired ({code}): get new credentials")
        }
        "RequestTimeTooSkewed" => {
            format!("{uri}: {}", skew_words(body.expect("a code has a body")))
        }
        "SlowDown" | "ServiceUnavailable" | "InternalError" => {
            format!("{uri}: the server stayed busy ({code}, HTTP {status}){said}")
        }
        "PermanentRedirect"
        | "AuthorizationHeaderMalformed"
        | "IllegalLocationConstraintException" => {
            format!(
                "{uri}: the bucket is in another region ({code}): set AWS_REGION or the \
                 profile's region{said}"
            )
        }
        "" => match status {
            403 => format!("{uri}: access denied (HTTP 403) to {creds}"),
            404 => format!("{uri}: not found (HTTP 404)"),
            301 => format!("{uri}: the bucket is in another region (HTTP 301): set AWS_REGION"),
            _ => format!("{uri}: the server answered HTTP {status}"),
        },
        _ => format!("{uri}: {code} (HTTP {status}){said}"),
    }
}

/// `RequestTimeTooSkewed` names the skew: "this machine's clock is 2 h 03 min behind the
/// server's".
fn skew_words(body: &ErrorBody) -> String {
    let skew = match (&body.request_time, &body.server_time) {
        (Some(ours), Some(theirs)) => match (unix_seconds(ours), unix_seconds(theirs)) {
            (Some(ours), Some(theirs)) => Some(theirs - ours),
            _ => None,
        },
        _ => None,
    };
    let allowed = body
        .max_skew_ms
        .map(|ms| format!(" (S3 allows {})", span(ms as i64 / 1000)))
        .unwrap_or_default();
    match skew {
        Some(s) if s > 0 => format!(
            "this machine's clock is {} behind the server's (RequestTimeTooSkewed){allowed}: \
             set the clock (chrony, ntpdate, timedatectl set-ntp true)",
            span(s)
        ),
        Some(s) if s < 0 => format!(
            "this machine's clock is {} ahead of the server's (RequestTimeTooSkewed){allowed}: \
             set the clock (chrony, ntpdate, timedatectl set-ntp true)",
            span(-s)
        ),
        _ => format!(
            "this machine's clock and the server's differ too much \
             (RequestTimeTooSkewed){allowed}: set the clock"
        ),
    }
}

/// "45 s", "16 min 40 s", "2 h 03 min", "3 d 4 h".
fn span(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min {:02} s", s / 60, s % 60),
        s if s < 86_400 => format!("{} h {:02} min", s / 3600, s / 60 % 60),
        s => format!("{} d {} h", s / 86_400, s / 3600 % 24),
    }
}

/// `20150830T123600Z` (SigV4's form) or `2015-08-30T12:36:00Z` / `…:00.000Z` (ISO 8601,
/// S3's ServerTime) to seconds since the epoch.
pub fn unix_seconds(text: &str) -> Option<i64> {
    let digits: String = text
        .trim()
        .split('.')
        .next()?
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    if digits.len() != 14 {
        return None;
    }
    let n = |r: std::ops::Range<usize>| digits[r].parse::<i64>().ok();
    let days = crate::units::days_from_civil(n(0..4)?, n(4..6)? as u32, n(6..8)? as u32);
    Some(days * 86_400 + n(8..10)? * 3600 + n(10..12)? * 60 + n(12..14)?)
}

#[cfg(test)]
mod tests;
