//! WebSocket (RFC 6455) endpoints: `ws://HOST:PORT/PATH`, `wss://…` (client) and
//! `ws-listen:[HOST:]PORT[/PATH]` (server, with `cert=`/`key=` for wss). A TCP stream
//! crosses as binary frames; the peer's close frame is this direction's EOF and zerocat's
//! EOF is its close frame (a half-close: the other way goes on until its own close).
//!
//! - this file: the protocol, pure: the HTTP upgrade (parsed with httparse), frame headers,
//!   masking, the close codes, streaming UTF-8 checks of text messages.
//! - `bridge.rs`: a connection's two threads between the network fd (the TCP socket, or
//!   the plaintext fd of its TLS) and one end of a socketpair whose other end the engine
//!   or the relay sees as any unix socket.
//!
//! Sec-WebSocket-Accept is ring's SHA-1 (ring is already a dependency); base64 is a
//! dozen lines here: the protocol only ever encodes (a 16-byte key, a 20-byte digest) and
//! never decodes, which does not pay for a crate.

pub mod bridge;

use std::fmt::Write as _;

/// The GUID of RFC 6455 §1.3.
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Close codes (RFC 6455 §7.4.1).
pub const NORMAL: u16 = 1000;
pub const PROTOCOL_ERROR: u16 = 1002;
pub const INVALID_DATA: u16 = 1007;
pub const INTERNAL_ERROR: u16 = 1011;

pub const OP_CONTINUATION: u8 = 0;
pub const OP_TEXT: u8 = 1;
pub const OP_BINARY: u8 = 2;
pub const OP_CLOSE: u8 = 8;
pub const OP_PING: u8 = 9;
pub const OP_PONG: u8 = 10;

pub(crate) use super::outbound::base64;

/// Sec-WebSocket-Accept for a Sec-WebSocket-Key.
pub fn accept_key(key: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{GUID}").as_bytes(),
    );
    base64(digest.as_ref())
}

/// The client's upgrade request.
pub fn request(host: &str, port: u16, path: &str, key: &str) -> String {
    let mut text = String::new();
    let _ = write!(
        text,
        "GET {path} HTTP/1.1\r\nHost: {}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nUser-Agent: zerocat\r\n\r\n",
        if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_string()
        }
    );
    text
}

/// Where the head of an HTTP message ends (after its blank line), if it has.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn header<'a>(headers: &'a [httparse::Header<'_>], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .and_then(|h| std::str::from_utf8(h.value).ok())
        .map(str::trim)
}

fn has_token(value: Option<&str>, token: &str) -> bool {
    value.is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
}

/// The server's check of an upgrade request (a whole head): the response to send, and
/// whether it is the 101 that starts the WebSocket.
pub fn answer(head: &[u8], want_path: Option<&str>) -> (String, bool) {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let refuse = |status: &str, why: &str| {
        (
            format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{why}\n",
                why.len() + 1
            ),
            false,
        )
    };
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return refuse("400 Bad Request", "not an HTTP request"),
    }
    if req.method != Some("GET") {
        return refuse("405 Method Not Allowed", "a WebSocket upgrade is a GET");
    }
    let path = req.path.unwrap_or("");
    let bare = path.split('?').next().unwrap_or(path);
    if want_path.is_some_and(|want| want != bare) {
        return refuse("404 Not Found", "no WebSocket at this path");
    }
    let headers = req.headers;
    if !has_token(header(headers, "Upgrade"), "websocket")
        || !has_token(header(headers, "Connection"), "upgrade")
    {
        return refuse("426 Upgrade Required", "this is a WebSocket endpoint");
    }
    if header(headers, "Sec-WebSocket-Version") != Some("13") {
        return (
            "HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\nContent-Length: 0\r\n\r\n"
                .into(),
            false,
        );
    }
    let Some(key) = header(headers, "Sec-WebSocket-Key").filter(|k| k.len() == 24) else {
        return refuse("400 Bad Request", "no valid Sec-WebSocket-Key");
    };
    (
        format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {}\r\n\r\n",
            accept_key(key)
        ),
        true,
    )
}

/// The client's check of the server's answer (a whole head).
pub fn check_answer(head: &[u8], key: &str) -> Result<(), String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err("the server's answer is not HTTP".into()),
    }
    if resp.code != Some(101) {
        return Err(format!(
            "the server answered {} {} to the WebSocket upgrade",
            resp.code.unwrap_or(0),
            resp.reason.unwrap_or("")
        ));
    }
    if header(resp.headers, "Sec-WebSocket-Accept") != Some(accept_key(key).as_str()) {
        return Err("the server's Sec-WebSocket-Accept does not match the key".into());
    }
    Ok(())
}

/// A frame header, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub fin: bool,
    pub opcode: u8,
    pub mask: Option<[u8; 4]>,
    pub len: u64,
    /// Bytes the header took.
    pub size: usize,
}

/// A frame the peer must not send: the close code, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub code: u16,
    pub why: &'static str,
}

fn violation(code: u16, why: &'static str) -> Violation {
    Violation { code, why }
}

/// Parses a frame header at the start of `buf`: None while it is incomplete. `server`:
/// we are the server, so frames must be masked (and unmasked ones the client's).
pub fn parse_header(buf: &[u8], server: bool) -> Result<Option<Header>, Violation> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let (b0, b1) = (buf[0], buf[1]);
    if b0 & 0x70 != 0 {
        return Err(violation(
            PROTOCOL_ERROR,
            "reserved bits set without an extension",
        ));
    }
    let opcode = b0 & 0x0f;
    let fin = b0 & 0x80 != 0;
    let masked = b1 & 0x80 != 0;
    let (len, mut size) = match b1 & 0x7f {
        126 => {
            if buf.len() < 4 {
                return Ok(None);
            }
            (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4)
        }
        127 => {
            if buf.len() < 10 {
                return Ok(None);
            }
            let len = u64::from_be_bytes(buf[2..10].try_into().expect("8 bytes"));
            if len >> 63 != 0 {
                return Err(violation(PROTOCOL_ERROR, "a length with its top bit set"));
            }
            (len, 10)
        }
        n => (u64::from(n), 2),
    };
    match opcode {
        OP_CONTINUATION | OP_TEXT | OP_BINARY => {}
        OP_CLOSE | OP_PING | OP_PONG => {
            if !fin {
                return Err(violation(PROTOCOL_ERROR, "a fragmented control frame"));
            }
            if len > 125 {
                return Err(violation(PROTOCOL_ERROR, "a control frame over 125 bytes"));
            }
        }
        _ => return Err(violation(PROTOCOL_ERROR, "an unknown opcode")),
    }
    if server && !masked {
        return Err(violation(PROTOCOL_ERROR, "an unmasked frame from a client"));
    }
    if !server && masked {
        return Err(violation(PROTOCOL_ERROR, "a masked frame from a server"));
    }
    let mask = if masked {
        if buf.len() < size + 4 {
            return Ok(None);
        }
        let key = buf[size..size + 4].try_into().expect("4 bytes");
        size += 4;
        Some(key)
    } else {
        None
    };
    Ok(Some(Header {
        fin,
        opcode,
        mask,
        len,
        size,
    }))
}

/// A frame header to send: FIN set, `mask` for a client's frame.
pub fn frame_header(opcode: u8, len: u64, mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(14);
    out.push(0x80 | opcode);
    let bit = if mask.is_some() { 0x80 } else { 0 };
    match len {
        0..=125 => out.push(bit | len as u8),
        126..=0xffff => {
            out.push(bit | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(bit | 127);
            out.extend_from_slice(&len.to_be_bytes());
        }
    }
    if let Some(key) = mask {
        out.extend_from_slice(&key);
    }
    out
}

/// XORs `buf` with the masking key, `buf` starting `offset` bytes into the payload.
pub fn apply_mask(buf: &mut [u8], key: [u8; 4], offset: u64) {
    let shift = (offset % 4) as usize;
    let rotated: [u8; 4] = std::array::from_fn(|i| key[(i + shift) % 4]);
    let wide = u64::from_ne_bytes([
        rotated[0], rotated[1], rotated[2], rotated[3], rotated[0], rotated[1], rotated[2],
        rotated[3],
    ]);
    let mut chunks = buf.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let v = u64::from_ne_bytes(chunk[..].try_into().expect("8 bytes")) ^ wide;
        chunk.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= rotated[i % 4];
    }
}

/// The UTF-8 check of a text message that arrives in pieces: the bytes of a character
/// cut at a piece's end wait for the next piece.
#[derive(Debug, Default)]
pub struct Utf8Check {
    pending: Vec<u8>,
}

impl Utf8Check {
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), Violation> {
        let joined;
        let text: &[u8] = if self.pending.is_empty() {
            bytes
        } else {
            joined = [self.pending.as_slice(), bytes].concat();
            &joined
        };
        match std::str::from_utf8(text) {
            Ok(_) => {
                self.pending.clear();
                Ok(())
            }
            Err(e) if e.error_len().is_none() && text.len() - e.valid_up_to() < 4 => {
                self.pending = text[e.valid_up_to()..].to_vec();
                Ok(())
            }
            Err(_) => Err(violation(INVALID_DATA, "a text message that is not UTF-8")),
        }
    }

    /// The message ended: no character may be left cut.
    pub fn end(&mut self) -> Result<(), Violation> {
        if self.pending.is_empty() {
            Ok(())
        } else {
            self.pending.clear();
            Err(violation(INVALID_DATA, "a text message that is not UTF-8"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_example_key_gives_the_rfc_example_accept() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
    }

    #[test]
    fn a_request_gets_a_101_only_when_it_is_a_websocket_upgrade_for_the_path() {
        let req = request("example.com", 80, "/ssh", "dGhlIHNhbXBsZSBub25jZQ==");
        let (text, ok) = answer(req.as_bytes(), Some("/ssh"));
        assert!(ok, "{text}");
        assert!(text.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
        check_answer(text.as_bytes(), "dGhlIHNhbXBsZSBub25jZQ==").unwrap();
        assert!(!answer(req.as_bytes(), Some("/other")).1);
        assert!(answer(req.as_bytes(), None).1);
        let plain = b"GET /ssh HTTP/1.1\r\nHost: x\r\n\r\n";
        assert!(!answer(plain, Some("/ssh")).1);
    }

    #[test]
    fn headers_round_trip_and_faults_are_named_with_their_codes() {
        for len in [0u64, 125, 126, 65_535, 65_536, 1 << 40] {
            for mask in [None, Some([1, 2, 3, 4])] {
                let h = frame_header(OP_BINARY, len, mask);
                let parsed = parse_header(&h, mask.is_some()).unwrap().unwrap();
                assert_eq!((parsed.len, parsed.mask, parsed.size), (len, mask, h.len()));
            }
        }
        let mut huge = frame_header(OP_BINARY, 1 << 40, None);
        huge[2] |= 0x80; // 2^63 and more
        assert_eq!(parse_header(&huge, false).unwrap_err().code, PROTOCOL_ERROR);
        let unmasked = frame_header(OP_BINARY, 3, None);
        assert_eq!(
            parse_header(&unmasked, true).unwrap_err().code,
            PROTOCOL_ERROR
        );
        let mut ping = frame_header(OP_PING, 0, None);
        ping[0] &= 0x7f; // FIN cleared: a fragmented control frame
        assert_eq!(parse_header(&ping, false).unwrap_err().code, PROTOCOL_ERROR);
        assert_eq!(parse_header(&[0x82], false), Ok(None));
    }

    #[test]
    fn masking_twice_gives_the_bytes_back_at_any_offset() {
        let data: Vec<u8> = (0..100u8).collect();
        let key = [0xde, 0xad, 0xbe, 0xef];
        let mut whole = data.clone();
        apply_mask(&mut whole, key, 0);
        for (i, b) in whole.iter().enumerate() {
            assert_eq!(*b, data[i] ^ key[i % 4]);
        }
        let (a, b) = whole.split_at_mut(37);
        apply_mask(a, key, 0);
        apply_mask(b, key, 37);
        assert_eq!(whole, data);
    }

    #[test]
    fn utf8_cut_between_pieces_is_fine_and_invalid_bytes_are_1007() {
        let text = "zéro€".as_bytes();
        let mut check = Utf8Check::default();
        for piece in text.chunks(1) {
            check.feed(piece).unwrap();
        }
        check.end().unwrap();
        assert_eq!(check.feed(b"\xff").unwrap_err().code, INVALID_DATA);
        let mut cut = Utf8Check::default();
        cut.feed(&"€".as_bytes()[..2]).unwrap();
        assert_eq!(cut.end().unwrap_err().code, INVALID_DATA);
    }
}
