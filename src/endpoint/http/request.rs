//! The request head, as bytes: the request line, the headers zerocat always sends, then the
//! caller's.

use std::fmt::Write as _;

use super::target::{base64, userinfo, Route};
use super::{Request, RequestBody};

/// The head of `request` sent along `route`. Defaults zerocat sends unless the caller gave
/// the same header: `Host` (the URL's), `User-Agent`, `Accept: */*`; always
/// `Accept-Encoding: identity` (the body is moved as it comes, never decompressed) and,
/// unless `keep_alive`, `Connection: close` (one request per connection). Either way the body ends where the
/// framing says, and nothing follows it.
pub fn head(request: &Request, route: &Route, keep_alive: bool) -> Vec<u8> {
    let url = &request.url;
    let origin_form = match (&request.target, url.query()) {
        (Some(target), _) => target.clone(),
        (None, Some(query)) => format!("{}?{query}", url.path()),
        (None, None) => url.path().to_string(),
    };
    let target = if route.absolute_form {
        format!("{}://{}{origin_form}", url.scheme(), host_header(url))
    } else {
        origin_form
    };
    let mut text = format!("{} {target} HTTP/1.1\r\n", request.method);
    let given = |name: &str| {
        request
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    // One Host, first (RFC 9112 3.2: a server answers two with 400): the caller's, if given
    // (a virtual host behind an address), in the URL's place.
    match request
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
    {
        Some((name, value)) => {
            let _ = write!(text, "{name}: {value}\r\n");
        }
        None => {
            let _ = write!(text, "Host: {}\r\n", host_header(url));
        }
    }
    if !given("user-agent") {
        let _ = write!(
            text,
            "User-Agent: zerocat/{}\r\n",
            env!("CARGO_PKG_VERSION")
        );
    }
    if !given("accept") {
        text.push_str("Accept: */*\r\n");
    }
    text.push_str("Accept-Encoding: identity\r\n");
    if !keep_alive {
        text.push_str("Connection: close\r\n");
    }
    if let (Some(credentials), false) = (userinfo(url), given("authorization")) {
        let _ = write!(
            text,
            "Authorization: Basic {}\r\n",
            base64(credentials.as_bytes())
        );
    }
    if let Some(credentials) = &route.proxy_auth {
        let _ = write!(
            text,
            "Proxy-Authorization: Basic {}\r\n",
            base64(credentials.as_bytes())
        );
    }
    match request.body {
        RequestBody::None => {}
        RequestBody::Direct(n) => {
            let _ = write!(text, "Content-Length: {n}\r\n");
        }
        RequestBody::Length(n) => {
            let _ = write!(text, "Content-Length: {n}\r\nExpect: 100-continue\r\n");
        }
        RequestBody::Chunked => {
            text.push_str("Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n");
        }
    }
    for (name, value) in &request.headers {
        if !name.eq_ignore_ascii_case("host") {
            let _ = write!(text, "{name}: {value}\r\n");
        }
    }
    text.push_str("\r\n");
    text.into_bytes()
}

/// The `Host` header of `url`: its host, and `:PORT` when the URL names one other than the
/// scheme's (what a signer must sign as sent).
pub fn host_header(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(headers: &[(&str, &str)]) -> String {
        let request = Request {
            method: "GET".into(),
            url: url::Url::parse("http://127.0.0.1:8080/x").unwrap(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            body: RequestBody::None,
            target: None,
        };
        let route = Route {
            host: "127.0.0.1".into(),
            port: 8080,
            tls: None,
            tunnel: None,
            absolute_form: false,
            proxy_auth: None,
        };
        String::from_utf8(head(&request, &route, false)).unwrap()
    }

    #[test]
    fn a_host_the_caller_gives_replaces_the_urls_in_its_place() {
        let text = sent(&[("host", "example.org"), ("X-A", "1")]);
        let hosts: Vec<&str> = text
            .lines()
            .filter(|l| l.to_ascii_lowercase().starts_with("host:"))
            .collect();
        assert_eq!(hosts, ["host: example.org"], "{text}");
        assert!(
            text.starts_with("GET /x HTTP/1.1\r\nhost: example.org\r\n"),
            "{text}"
        );
        assert!(text.ends_with("X-A: 1\r\n\r\n"), "{text}");
    }

    #[test]
    fn without_one_the_host_is_the_urls() {
        let text = sent(&[]);
        assert!(
            text.starts_with("GET /x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"),
            "{text}"
        );
    }
}
