use super::*;

#[test]
fn base64_matches_rfc4648_vectors() {
    for (plain, coded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foobar", "Zm9vYmFy"),
        ("user:pass", "dXNlcjpwYXNz"),
    ] {
        assert_eq!(base64(plain.as_bytes()), coded, "{plain}");
    }
}

#[test]
fn socks5_request_sends_a_name_for_the_proxy_to_resolve() {
    assert_eq!(
        socks5_request("localhost", 22).unwrap(),
        b"\x05\x01\x00\x03\x09localhost\x00\x16"
    );
    assert_eq!(
        socks5_request("127.0.0.1", 80).unwrap(),
        [5, 1, 0, 1, 127, 0, 0, 1, 0, 80]
    );
    let v6 = socks5_request("::1", 443).unwrap();
    assert_eq!(&v6[..4], [5, 1, 0, 4]);
    assert_eq!(v6.len(), 4 + 16 + 2);
    assert!(socks5_request(&"a".repeat(256), 1).is_err());
}

#[test]
fn socks5_greeting_offers_only_what_it_will_send() {
    assert_eq!(socks5_greeting(false), [5, 1, 0]);
    assert_eq!(socks5_greeting(true), [5, 1, 2]);
    assert_eq!(socks5_method([5, 0], false), Ok(Method::None));
    assert_eq!(socks5_method([5, 2], true), Ok(Method::Password));
    assert!(socks5_method([5, 2], false).is_err());
    assert!(socks5_method([5, 0xff], false)
        .unwrap_err()
        .contains(AUTH_ENV));
    assert!(socks5_method([4, 0], false).unwrap_err().contains("SOCKS5"));
}

#[test]
fn socks5_password_message_is_rfc1929() {
    assert_eq!(socks5_password("u:pw").unwrap(), b"\x01\x01u\x02pw");
    // The password may hold ':' itself; the user name ends at the first.
    assert_eq!(socks5_password("u:a:b").unwrap(), b"\x01\x01u\x03a:b");
    assert!(socks5_password("nocolon").is_err());
}

#[test]
fn socks5_reply_names_the_refusal_in_words() {
    let err = socks5_reply_rest([5, 5, 0, 1], "localhost", 9).unwrap_err();
    assert!(err.contains("connection refused"), "{err}");
    assert!(err.contains("localhost:9"), "{err}");
    assert!(socks5_reply_rest([5, 2, 0, 1], "h", 1)
        .unwrap_err()
        .contains("not allowed by ruleset"));
    assert_eq!(socks5_reply_rest([5, 0, 0, 1], "h", 1), Ok(Rest::Fixed(6)));
    assert_eq!(socks5_reply_rest([5, 0, 0, 4], "h", 1), Ok(Rest::Fixed(18)));
    assert_eq!(
        socks5_reply_rest([5, 0, 0, 3], "h", 1),
        Ok(Rest::NameLength)
    );
    assert!(socks5_reply_rest([5, 0, 0, 9], "h", 1).is_err());
    assert!(socks5_reply_rest([b'H', b'T', b'T', b'P'], "h", 1).is_err());
}

#[test]
fn connect_request_carries_basic_auth() {
    let plain = String::from_utf8(connect_request("localhost", 22, None).unwrap()).unwrap();
    assert_eq!(
        plain,
        "CONNECT localhost:22 HTTP/1.1\r\nHost: localhost:22\r\n\r\n"
    );
    let v6 = String::from_utf8(connect_request("::1", 22, None).unwrap()).unwrap();
    assert!(v6.starts_with("CONNECT [::1]:22 HTTP/1.1\r\n"), "{v6}");
    let auth = String::from_utf8(connect_request("h", 1, Some("user:pass")).unwrap()).unwrap();
    assert!(auth.contains("\r\nProxy-Authorization: Basic dXNlcjpwYXNz\r\n\r\n"));
}

#[test]
fn connect_status_takes_2xx_and_quotes_the_rest() {
    assert!(connect_status(b"HTTP/1.1 200 Connection established\r\n\r\n", "h", 1).is_ok());
    assert!(connect_status(b"HTTP/1.0 200 OK\r\nX: y\r\n\r\n", "h", 1).is_ok());
    let err = connect_status(b"HTTP/1.1 403 Forbidden\r\n\r\n", "h", 1).unwrap_err();
    assert!(err.contains("'HTTP/1.1 403 Forbidden'"), "{err}");
    let err = connect_status(b"SSH-2.0-x\r\n\r\n", "h", 1).unwrap_err();
    assert!(err.contains("does not speak HTTP"), "{err}");
}

/// Runs a handshake against a scripted proxy on a socket pair: the proxy reads what it is
/// sent and answers `replies` in turn, then sends `stream`, which must stay unread.
fn scripted(
    via: &Via,
    host: &str,
    replies: &[&[u8]],
    stream: &[u8],
) -> (Result<(), Refused>, Vec<u8>) {
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;
    let (ours, mut theirs) = UnixStream::pair().unwrap();
    // All replies at once, then the stream: a reader that over-reads would swallow it.
    let mut all: Vec<u8> = replies.concat();
    all.extend_from_slice(stream);
    theirs.write_all(&all).unwrap();
    theirs.shutdown(std::net::Shutdown::Write).unwrap();
    let result = handshake(ours.as_fd(), via, host, 22, Duration::from_secs(5));
    let mut rest = vec![0u8; stream.len()];
    if result.is_ok() {
        (&ours).read_exact(&mut rest).unwrap();
    }
    (result, rest)
}

fn via(kind: Kind, auth: Option<&str>) -> Via {
    Via {
        kind,
        host: "127.0.0.1".into(),
        port: 1080,
        auth: auth.map(str::to_string),
    }
}

#[test]
fn the_handshake_never_reads_past_the_reply() {
    let stream = b"SSH-2.0-stream starts here\r\n";
    // SOCKS5, a domain name as the bound address (its length byte then the name).
    let (result, rest) = scripted(
        &via(Kind::Socks5, None),
        "localhost",
        &[&[5, 0], b"\x05\x00\x00\x03\x09localhost\x00\x16"],
        stream,
    );
    result.unwrap();
    assert_eq!(rest, stream);
    // SOCKS5 with a password, an IPv6 bound address.
    let mut v6 = vec![5, 0, 0, 4];
    v6.extend_from_slice(&[0; 18]);
    let (result, rest) = scripted(
        &via(Kind::Socks5, Some("u:p")),
        "::1",
        &[&[5, 2], &[1, 0], &v6],
        stream,
    );
    result.unwrap();
    assert_eq!(rest, stream);
    // HTTP CONNECT with headers after the status line.
    let (result, rest) = scripted(
        &via(Kind::Connect, None),
        "localhost",
        &[b"HTTP/1.1 200 Connection established\r\nProxy-agent: x\r\n\r\n"],
        stream,
    );
    result.unwrap();
    assert_eq!(rest, stream);
}

#[test]
fn a_refusing_or_closing_proxy_is_named() {
    let (result, _) = scripted(
        &via(Kind::Connect, None),
        "localhost",
        &[b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"],
        b"",
    );
    let err = result.unwrap_err().to_string();
    assert!(err.starts_with("connect proxy 127.0.0.1:1080: "), "{err}");
    assert!(
        err.contains("'HTTP/1.1 407 Proxy Authentication Required'"),
        "{err}"
    );
    let (result, _) = scripted(&via(Kind::Socks5, None), "localhost", &[&[5]], b"");
    let err = result.unwrap_err().to_string();
    assert!(err.contains("closed the connection in the middle"), "{err}");
}
