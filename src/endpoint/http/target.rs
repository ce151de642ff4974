//! The URL of an `http(s)://` endpoint and its options, pure but for the environment's proxy
//! variables ([`env_proxy`]): where to connect, through what, and what to ask.

use url::Url;

use super::super::outbound::{Kind, Via};
pub use super::super::redact_url;
use super::super::{HttpOpts, TlsOpts};

/// Where a request goes: the server itself, or a proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub host: String,
    pub port: u16,
    /// TLS to `host` (https, straight or through a CONNECT/SOCKS tunnel).
    pub tls: Option<TlsOpts>,
    /// A tunnel from the environment (`https_proxy`, `all_proxy=socks5://…`).
    pub tunnel: Option<Via>,
    /// `http_proxy` for an http URL: the request line names the whole URL (absolute
    /// form), sent to the proxy, with its credentials in Proxy-Authorization.
    pub absolute_form: bool,
    pub proxy_auth: Option<String>,
}

/// The host of `url` as a connector takes it (an IPv6 address without brackets).
pub fn host_of(url: &Url) -> String {
    match url.host() {
        Some(url::Host::Ipv6(addr)) => addr.to_string(),
        Some(host) => host.to_string(),
        None => String::new(),
    }
}

/// Where to connect for `url`: the server, or the proxy of `socks5=`/`connect=` or of the
/// environment (as curl reads it: `http_proxy` lower case only, `https_proxy`/`HTTPS_PROXY`,
/// `all_proxy`/`ALL_PROXY`, unless `no_proxy`/`NO_PROXY` names the host).
pub fn route(url: &Url, opts: &HttpOpts) -> anyhow::Result<Route> {
    let https = url.scheme() == "https";
    let mut route = Route {
        host: host_of(url),
        port: url.port_or_known_default().unwrap_or(80),
        tls: https.then(|| opts.connect.tls.clone().unwrap_or_default()),
        tunnel: None,
        absolute_form: false,
        proxy_auth: None,
    };
    if opts.connect.via.is_some() {
        return Ok(route);
    }
    let Some(proxy) = env_proxy(url, &|name| std::env::var(name).ok())? else {
        return Ok(route);
    };
    let auth = match proxy.password() {
        Some(pass) => Some(format!(
            "{}:{}",
            percent_decode(proxy.username()),
            percent_decode(pass)
        )),
        None if !proxy.username().is_empty() => {
            Some(format!("{}:", percent_decode(proxy.username())))
        }
        None => None,
    };
    let port = proxy.port_or_known_default().unwrap_or(1080);
    match proxy.scheme() {
        "socks5" | "socks5h" => {
            route.tunnel = Some(Via {
                kind: Kind::Socks5,
                host: host_of(&proxy),
                port,
                auth,
            })
        }
        "http" if https => {
            route.tunnel = Some(Via {
                kind: Kind::Connect,
                host: host_of(&proxy),
                port,
                auth,
            })
        }
        "http" => {
            route.host = host_of(&proxy);
            route.port = port;
            route.absolute_form = true;
            route.proxy_auth = auth;
        }
        other => anyhow::bail!(
            "the proxy {} of the environment is {other}://: zerocat goes through http:// and \
             socks5:// proxies",
            redact_url(&proxy)
        ),
    }
    Ok(route)
}

/// The proxy the environment names for `url`, as curl reads it; `var` reads a variable.
pub fn env_proxy(url: &Url, var: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Option<Url>> {
    let get = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| var(n).filter(|v| !v.trim().is_empty()))
    };
    let no_proxy = get(&["no_proxy", "NO_PROXY"]).unwrap_or_default();
    let host = host_of(url).to_ascii_lowercase();
    let skipped = no_proxy.split(',').map(str::trim).any(|entry| {
        let entry = entry.trim_start_matches('.').to_ascii_lowercase();
        let entry = entry.trim_start_matches('[').trim_end_matches(']');
        entry == "*"
            || (!entry.is_empty() && (host == entry || host.ends_with(&format!(".{entry}"))))
    });
    if skipped {
        return Ok(None);
    }
    // curl reads http_proxy in lower case only (HTTP_PROXY may come from a CGI request).
    let value = match url.scheme() {
        "https" => get(&["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]),
        _ => get(&["http_proxy", "all_proxy", "ALL_PROXY"]),
    };
    let Some(value) = value else {
        return Ok(None);
    };
    let value = value.trim();
    let with_scheme = if value.contains("://") {
        value.to_string()
    } else {
        format!("http://{value}")
    };
    let proxy = Url::parse(&with_scheme)
        .map_err(|e| anyhow::anyhow!("the proxy of the environment is no URL ({e})"))?;
    if proxy.host().is_none() {
        anyhow::bail!("the proxy of the environment names no host");
    }
    Ok(Some(proxy))
}

/// `%XX` of a URL's user or password, decoded.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The URL's user and password (`user:pass@host`), decoded: Basic credentials.
pub fn userinfo(url: &Url) -> Option<String> {
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    Some(format!(
        "{}:{}",
        percent_decode(url.username()),
        percent_decode(url.password().unwrap_or(""))
    ))
}

pub(crate) use super::super::outbound::base64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::parse_range;
    use crate::endpoint::ByteRange;

    #[test]
    fn base64_of_rfc4648_vectors() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
    }

    #[test]
    fn ranges_parse_and_refuse() {
        assert_eq!(
            parse_range("0-1023"),
            Ok(ByteRange {
                start: 0,
                end: Some(1023)
            })
        );
        assert_eq!(
            parse_range("4096-"),
            Ok(ByteRange {
                start: 4096,
                end: None
            })
        );
        for bad in ["", "-", "-5", "5", "a-", "9-3", "1-2-3", "+1-"] {
            assert!(parse_range(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn environment_proxies_as_curl_reads_them() {
        let url = |u: &str| Url::parse(u).unwrap();
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let http = url("http://example.test/x");
        let https = url("https://api.example.test/x");
        // HTTP_PROXY in upper case is not read (CGI).
        let upper = env(&[("HTTP_PROXY", "http://p:3128")]);
        assert_eq!(env_proxy(&http, &upper).unwrap(), None);
        let lower = env(&[("http_proxy", "p:3128")]);
        assert_eq!(
            env_proxy(&http, &lower).unwrap().unwrap().as_str(),
            "http://p:3128/"
        );
        let both = env(&[
            ("https_proxy", "http://p:3128"),
            ("no_proxy", "localhost,.example.test"),
        ]);
        assert_eq!(env_proxy(&https, &both).unwrap(), None);
        let star = env(&[("ALL_PROXY", "socks5://s:1080"), ("NO_PROXY", "*")]);
        assert_eq!(env_proxy(&https, &star).unwrap(), None);
        let all = env(&[("ALL_PROXY", "socks5://s:1080")]);
        assert_eq!(env_proxy(&https, &all).unwrap().unwrap().scheme(), "socks5");
    }

    #[test]
    fn a_password_is_never_shown() {
        let url = Url::parse("https://user:s3cret@example.test/a#frag").unwrap();
        assert_eq!(redact_url(&url), "https://user:***@example.test/a");
    }
}
