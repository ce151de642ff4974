//! Credentials, region and endpoint, found where the AWS CLI finds them (pure: the
//! environment and the files come in through [`Sources`], so tests hand in their own).
//!
//! - credentials: `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`);
//!   else the profile (`AWS_PROFILE`, else `default`) in the credentials file
//!   (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`), then in the config file
//!   (`AWS_CONFIG_FILE`, else `~/.aws/config`, its sections `[profile NAME]` and
//!   `[default]`); else none: requests go unsigned, as `aws --no-sign-request`.
//! - region: `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's `region`, else `us-east-1`.
//! - endpoint: `,endpoint=URL` on the URI, `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, the
//!   profile's `endpoint_url`, else `https://s3.REGION.amazonaws.com`. A custom endpoint
//!   (MinIO, moto, s3s) is addressed path-style (`/BUCKET/KEY`); AWS's own virtual-hosted
//!   (`BUCKET.s3.REGION.amazonaws.com`) unless the bucket cannot be a host name label (a dot
//!   breaks the certificate's wildcard). The profile's `s3 = addressing_style = path|virtual`
//!   overrides either.
//!
//! A secret never reaches a `Debug`, an error or a report: [`Secret`] prints as `***`.

use std::fmt;
use std::path::{Path, PathBuf};

/// A secret access key or a session token: shown nowhere.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("***")
    }
}

impl Secret {
    pub fn new(text: impl Into<String>) -> Self {
        Secret(text.into())
    }
    /// The secret itself: for the signer and the `x-amz-security-token` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Signing credentials and where they came from (the source is named in errors:
/// "the secret from AWS_SECRET_ACCESS_KEY was refused").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Not a secret (it names the key, as AWS's own errors do), but reports leave it out.
    pub access_key_id: String,
    secret_access_key: Secret,
    session_token: Option<Secret>,
    /// "the environment (AWS_ACCESS_KEY_ID)", "profile 'dev' in /root/.aws/credentials".
    pub source: String,
}

impl Credentials {
    pub fn new(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
        source: impl Into<String>,
    ) -> Self {
        Credentials {
            access_key_id: access_key_id.into(),
            secret_access_key: Secret::new(secret_access_key),
            session_token: session_token.map(Secret::new),
            source: source.into(),
        }
    }
    pub fn secret_access_key(&self) -> &str {
        self.secret_access_key.expose()
    }
    pub fn session_token(&self) -> Option<&str> {
        self.session_token.as_ref().map(Secret::expose)
    }
}

/// Where requests go: scheme, host and port of the service, and how a bucket is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub https: bool,
    /// The host as connected to and as sent in `Host` (brackets kept for IPv6).
    pub host: String,
    pub port: u16,
    /// A prefix the endpoint URL carried (`http://h:9000/s3` → `/s3`), else empty.
    pub base_path: String,
    /// The endpoint was given (not AWS's own): `/BUCKET/KEY` unless the profile says
    /// `addressing_style = virtual`.
    pub custom: bool,
    pub addressing: Addressing,
}

/// `addressing_style` of the profile's `s3` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Addressing {
    /// Path-style for a custom endpoint or a bucket that cannot be a host label, else
    /// virtual-hosted.
    #[default]
    Auto,
    Path,
    Virtual,
}

/// Everything a request needs besides the bucket and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// None: anonymous (unsigned) requests.
    pub credentials: Option<Credentials>,
    pub region: String,
    pub service: Service,
}

/// Where one request goes: what to connect to, the `Host` header and the encoded path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub https: bool,
    /// The name or address to connect to (brackets removed).
    pub connect_host: String,
    pub port: u16,
    /// The `Host` header: the host, and `:PORT` unless the scheme's default.
    pub host_header: String,
    /// The request line's path, URI-encoded once (SigV4's canonical URI as it is).
    pub path: String,
}

/// What the environment and the files are, for [`resolve`].
pub trait Sources {
    /// An environment variable, `None` when unset or empty.
    fn var(&self, name: &str) -> Option<String>;
    /// A file's text; `None` when it does not exist or cannot be read.
    fn read(&self, path: &Path) -> Option<String>;
}

/// The process's own environment and files.
pub struct Process;

impl Sources for Process {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

/// The default region when nothing names one (S3's own default, as the CLI's).
pub const DEFAULT_REGION: &str = "us-east-1";

/// Find credentials, region and endpoint as the AWS CLI does; `uri_endpoint` is the URI's
/// `,endpoint=URL`. An error is a sentence (a named profile that is not there, a profile
/// whose credentials come from a program zerocat does not run, a malformed URL).
pub fn resolve(sources: &dyn Sources, uri_endpoint: Option<&str>) -> Result<Settings, String> {
    let home = sources.var("HOME").map(PathBuf::from);
    let file = |var: &str, name: &str| {
        sources
            .var(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(name)))
    };
    let credentials_path = file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let config_path = file("AWS_CONFIG_FILE", "config");
    let named = sources.var("AWS_PROFILE");
    let profile_name = named.clone().unwrap_or_else(|| "default".into());

    let from_file = |path: &Option<PathBuf>, config: bool| -> Option<(PathBuf, Profile)> {
        let path = path.as_ref()?;
        let text = sources.read(path)?;
        profile(&text, &profile_name, config).map(|p| (path.clone(), p))
    };
    let in_credentials = from_file(&credentials_path, false);
    let in_config = from_file(&config_path, true);
    if let Some(name) = &named {
        if in_credentials.is_none() && in_config.is_none() {
            return Err(format!(
                "the profile '{name}' (AWS_PROFILE) is in neither {} nor {}",
                shown(&credentials_path),
                shown(&config_path)
            ));
        }
    }
    let config = in_config.as_ref().map(|(_, p)| p);
    let credentials = match (
        sources.var("AWS_ACCESS_KEY_ID"),
        sources.var("AWS_SECRET_ACCESS_KEY"),
    ) {
        (Some(id), Some(secret)) => Some(Credentials::new(
            id,
            secret,
            sources.var("AWS_SESSION_TOKEN"),
            "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)",
        )),
        _ => {
            let mut found = None;
            for (path, p) in [&in_credentials, &in_config].into_iter().flatten() {
                if let Some(c) = p.credentials(&profile_name, path)? {
                    found = Some(c);
                    break;
                }
            }
            found
        }
    };
    let region = sources
        .var("AWS_REGION")
        .or_else(|| sources.var("AWS_DEFAULT_REGION"))
        .or_else(|| config.and_then(|p| p.get("region")))
        .unwrap_or_else(|| DEFAULT_REGION.into());
    let addressing = match config.and_then(|p| p.get("s3.addressing_style")).as_deref() {
        Some("path") => Addressing::Path,
        Some("virtual") => Addressing::Virtual,
        _ => Addressing::Auto,
    };
    let ignore_configured = sources
        .var("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let configured = if ignore_configured {
        None
    } else {
        sources
            .var("AWS_ENDPOINT_URL_S3")
            .or_else(|| sources.var("AWS_ENDPOINT_URL"))
            .or_else(|| config.and_then(|p| p.get("s3.endpoint_url")))
            .or_else(|| config.and_then(|p| p.get("endpoint_url")))
    };
    let service = match uri_endpoint.map(str::to_owned).or(configured) {
        Some(url) => {
            let mut s = parse_endpoint(&url)?;
            s.addressing = addressing;
            s
        }
        None => Service {
            https: true,
            host: format!("s3.{region}.amazonaws.com"),
            port: 443,
            base_path: String::new(),
            custom: false,
            addressing,
        },
    };
    Ok(Settings {
        credentials,
        region,
        service,
    })
}

fn shown(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => p.display().to_string(),
        None => "~/.aws (HOME is not set)".into(),
    }
}

/// `http://HOST[:PORT][/PATH]` or `https://…` → a [`Service`] (custom).
pub fn parse_endpoint(url: &str) -> Result<Service, String> {
    let bad = |why: &str| {
        format!("endpoint '{url}': {why}; expected http://HOST[:PORT] or https://HOST[:PORT]")
    };
    let (https, rest) = if let Some(r) = strip_prefix_ci(url, "https://") {
        (true, r)
    } else if let Some(r) = strip_prefix_ci(url, "http://") {
        (false, r)
    } else {
        return Err(bad("not an http:// or https:// URL"));
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], rest[at..].trim_end_matches('/')),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(bad("credentials in the URL are not taken"));
    }
    let default_port = if https { 443 } else { 80 };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let close = v6.find(']').ok_or_else(|| bad("an unclosed '['"))?;
        let after = &v6[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad("a port that is not a number"))?,
            None if after.is_empty() => default_port,
            None => return Err(bad("text after ']'")),
        };
        (format!("[{}]", &v6[..close]), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (
                h.to_owned(),
                p.parse().map_err(|_| bad("a port that is not a number"))?,
            ),
            None => (authority.to_owned(), default_port),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err(bad("no host"));
    }
    Ok(Service {
        https,
        host,
        port,
        base_path: path.to_owned(),
        custom: true,
        addressing: Addressing::Auto,
    })
}

fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

impl Service {
    /// Whether `bucket` goes in the path rather than the host name.
    pub fn path_style(&self, bucket: &str) -> bool {
        match self.addressing {
            Addressing::Path => true,
            Addressing::Virtual => false,
            Addressing::Auto => self.custom || !is_host_label(bucket),
        }
    }

    /// The request for `bucket` and `key` (the key raw; empty for a bucket-level request
    /// such as ListObjectsV2).
    pub fn target(&self, bucket: &str, key: &str) -> Target {
        let encoded_key = super::sigv4::uri_encode(key, false);
        let (host, path) = if self.path_style(bucket) {
            let bucket = super::sigv4::uri_encode(bucket, true);
            let path = if key.is_empty() {
                format!("{}/{bucket}", self.base_path)
            } else {
                format!("{}/{bucket}/{encoded_key}", self.base_path)
            };
            (self.host.clone(), path)
        } else {
            (
                format!("{bucket}.{}", self.host),
                format!("{}/{encoded_key}", self.base_path),
            )
        };
        let default_port = if self.https { 443 } else { 80 };
        let host_header = if self.port == default_port {
            host.clone()
        } else {
            format!("{host}:{}", self.port)
        };
        Target {
            https: self.https,
            connect_host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port: self.port,
            host_header,
            path,
        }
    }
}

/// A bucket name that can be a DNS label under AWS's wildcard certificate: lowercase
/// letters, digits and `-`, 3 to 63, no dot.
fn is_host_label(bucket: &str) -> bool {
    (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !bucket.starts_with('-')
        && !bucket.ends_with('-')
}

/// One profile's `key = value` lines; a nested block (`s3 =` then indented lines) is kept
/// as `s3.KEY`.
#[derive(Debug, Default)]
struct Profile(Vec<(String, String)>);

impl Profile {
    fn get(&self, key: &str) -> Option<String> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    }

    /// The profile's static keys; an error when it names a way to get credentials that
    /// zerocat does not follow (a program, SSO, a role), rather than going on unsigned.
    fn credentials(&self, name: &str, path: &Path) -> Result<Option<Credentials>, String> {
        if let (Some(id), Some(secret)) = (
            self.get("aws_access_key_id"),
            self.get("aws_secret_access_key"),
        ) {
            return Ok(Some(Credentials::new(
                id,
                secret,
                self.get("aws_session_token"),
                format!("profile '{name}' in {}", path.display()),
            )));
        }
        for key in [
            "credential_process",
            "sso_session",
            "sso_start_url",
            "role_arn",
            "web_identity_token_file",
        ] {
            if self.get(key).is_some() {
                return Err(format!(
                    "profile '{name}' in {} gets its credentials through {key}, which \
                     zerocat does not follow; export them first: eval \"$(aws configure \
                     export-credentials --profile {name} --format env)\"",
                    path.display()
                ));
            }
        }
        Ok(None)
    }
}

/// The profile `name` of an INI file: `[name]` in the credentials file; `[profile name]`
/// (or `[name]` for `default`) in the config file. None when there is no such section.
fn profile(text: &str, name: &str, config: bool) -> Option<Profile> {
    let wanted = |section: &str| {
        let section = section.split_whitespace().collect::<Vec<_>>();
        match section.as_slice() {
            ["profile", n] => config && *n == name,
            [n] => *n == name && (!config || name == "default"),
            _ => false,
        }
    };
    let mut found: Option<Profile> = None;
    let mut inside = false;
    let mut block: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if let Some(section) = trimmed.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            inside = wanted(section.trim());
            if inside && found.is_none() {
                found = Some(Profile::default());
            }
            block = None;
            continue;
        }
        if !inside {
            continue;
        }
        let Some((key, value)) = trimmed.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim().to_owned(), value.trim().to_owned());
        let nested = line.starts_with([' ', '\t']);
        let entries = &mut found.as_mut().expect("inside a section").0;
        match (&block, nested) {
            (Some(parent), true) => entries.push((format!("{parent}.{key}"), value)),
            _ => {
                block = value.is_empty().then(|| key.clone());
                entries.push((key, value));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests;
