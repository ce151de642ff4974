//! AWS Signature Version 4 (the header form S3 takes), pure: a request description and
//! credentials in, the canonical request, the string to sign and the `Authorization` value
//! out. Nothing here opens a socket or reads the clock.
//!
//! A small module over `ring`'s HMAC-SHA256 and SHA-256 rather than the `aws-sigv4` crate:
//! that crate brings the AWS SDK's runtime types (`aws-smithy-runtime-api`, `aws-smithy-http`,
//! `aws-credential-types`, `http` 0.2 and 1.x, `time`, `zeroize`, …) to sign what is, for
//! S3's header form, four HMACs over strings. The AWS test-suite vectors and the S3
//! documentation's examples (`sigv4/tests.rs`) pin every step.
//!
//! S3's rules, which differ from the generic suite's services: the path is URI-encoded
//! once (never twice) and never normalised (`a/./b` and `a//b` are keys of their own).

use std::fmt::Write as _;

use ring::{digest, hmac};

use super::config::Credentials;
use crate::units::hex;

/// The algorithm name that starts the string to sign and the `Authorization` value.
pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// `x-amz-content-sha256` of a request whose body is not hashed (S3 only).
pub const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";

/// The SHA-256 of no bytes, hex: the payload hash of a GET.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// What is signed about one request. Header names may be in any case; the host header
/// must be among them. Every header given is signed.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The path as sent on the request line, already URI-encoded ([`uri_encode`] without
    /// encoding `/`): it is the canonical URI as it is.
    pub path: &'a str,
    /// Query parameters, raw (not encoded); [`canonical_query`] encodes and sorts them.
    pub query: &'a [(String, String)],
    pub headers: &'a [(String, String)],
    /// Hex SHA-256 of the body, [`EMPTY_SHA256`] or [`UNSIGNED_PAYLOAD`].
    pub payload_hash: &'a str,
}

/// Where the signature applies: `20130524/us-east-1/s3/aws4_request`.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub region: &'a str,
    pub service: &'a str,
}

/// A signature and the strings it came from (the strings say which line is wrong when a
/// server answers `SignatureDoesNotMatch`; never shown with a secret in them — they have
/// none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub canonical_request: String,
    pub string_to_sign: String,
    /// The value of the `Authorization` header.
    pub authorization: String,
    pub signature: String,
}

/// Sign `request` at `amz_date` (`20150830T123600Z`, [`amz_date`]; it must also be the
/// request's `x-amz-date` header).
pub fn sign(credentials: &Credentials, scope: Scope, amz_date: &str, request: &Request) -> Signed {
    let date = &amz_date[..8.min(amz_date.len())];
    let (canonical_headers, signed_headers) = canonical_headers(request.headers);
    let canonical_request = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        request.method,
        request.path,
        canonical_query(request.query),
        canonical_headers,
        signed_headers,
        request.payload_hash
    );
    let credential_scope = format!("{date}/{}/{}/aws4_request", scope.region, scope.service);
    let string_to_sign = format!(
        "{ALGORITHM}\n{amz_date}\n{credential_scope}\n{}",
        sha256_hex(canonical_request.as_bytes())
    );
    let key = signing_key(credentials.secret_access_key(), date, scope);
    let signature = hex(hmac::sign(&key, string_to_sign.as_bytes()).as_ref());
    let authorization = format!(
        "{ALGORITHM} Credential={}/{credential_scope}, SignedHeaders={signed_headers}, \
         Signature={signature}",
        credentials.access_key_id
    );
    Signed {
        canonical_request,
        string_to_sign,
        authorization,
        signature,
    }
}

/// HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request").
fn signing_key(secret: &str, date: &str, scope: Scope) -> hmac::Key {
    let mut key = hmac::Key::new(hmac::HMAC_SHA256, format!("AWS4{secret}").as_bytes());
    for part in [date, scope.region, scope.service, "aws4_request"] {
        let tag = hmac::sign(&key, part.as_bytes());
        key = hmac::Key::new(hmac::HMAC_SHA256, tag.as_ref());
    }
    key
}

/// Lowercased names, values trimmed with inner runs of spaces made one, sorted by name;
/// a name given twice has its values joined with `,` in the order given. Returns the
/// block (each line ending in `\n`) and the `;`-joined names.
fn canonical_headers(headers: &[(String, String)]) -> (String, String) {
    let mut lines: Vec<(String, String)> = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let name = name.trim().to_ascii_lowercase();
        let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
        match lines.iter_mut().find(|(n, _)| *n == name) {
            Some((_, joined)) => {
                joined.push(',');
                joined.push_str(&value);
            }
            None => lines.push((name, value)),
        }
    }
    lines.sort_by(|a, b| a.0.cmp(&b.0));
    let mut block = String::new();
    for (name, value) in &lines {
        let _ = writeln!(block, "{name}:{value}");
    }
    let names = lines
        .iter()
        .map(|(n, _)| n.as_str())
        .collect::<Vec<_>>()
        .join(";");
    (block, names)
}

/// `a=1&b=2`: each name and value URI-encoded (`/` too), sorted by encoded name then value
/// (bytewise, not by locale). The same string goes on the request line, so what is sent is
/// what was signed.
pub fn canonical_query(query: &[(String, String)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (uri_encode(k, true), uri_encode(v, true)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// SigV4's URI encoding: every byte but `A-Z a-z 0-9 - . _ ~` as `%XX` (uppercase hex),
/// `/` kept when `encode_slash` is false (a path), encoded when true (a query value).
pub fn uri_encode(text: &str, encode_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b'/' if !encode_slash => out.push('/'),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// Hex SHA-256 of `bytes` (a payload hash, the hash of a canonical request).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, bytes).as_ref())
}

/// Hex SHA-256 of the bytes `feed` hands over piece by piece (a staged part, a window at a
/// time); `feed`'s failure is returned as it is.
pub fn sha256_hex_pieces<E>(
    feed: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<(), E>,
) -> Result<String, E> {
    let mut context = digest::Context::new(&digest::SHA256);
    feed(&mut |piece| context.update(piece))?;
    Ok(hex(context.finish().as_ref()))
}

/// Seconds since the epoch as SigV4's basic ISO 8601 form: `20150830T123600Z`.
pub fn amz_date(unix_secs: u64) -> String {
    let (y, m, d) = crate::units::civil_from_days((unix_secs / 86_400) as i64);
    let rest = unix_secs % 86_400;
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests;
