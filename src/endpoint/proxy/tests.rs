use super::*;

fn sa(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

fn done(buf: &[u8]) -> Header {
    parse(buf)
        .unwrap_or_else(|e| panic!("{:?} should parse: {e}", String::from_utf8_lossy(buf)))
        .unwrap_or_else(|| panic!("{:?} should be complete", String::from_utf8_lossy(buf)))
}

fn refused(buf: &[u8]) -> String {
    parse(buf).expect_err("must be refused")
}

#[test]
fn v1_examples_of_the_spec() {
    // The spec's own examples (section 2.1), with payload after them.
    let h = done(b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n");
    assert_eq!(h.len, 47);
    assert_eq!(
        h.addresses,
        Some(Addresses::Inet {
            src: sa("192.168.0.1:56324"),
            dst: sa("192.168.0.11:443")
        })
    );
    let worst4 = b"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n";
    assert_eq!(worst4.len(), 56);
    assert_eq!(done(worst4).len, 56);
    let worst6 = b"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff \
ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    assert_eq!(worst6.len(), 104);
    let h = done(worst6);
    assert_eq!(h.len, 104);
    assert_eq!(
        h.addresses.unwrap().source().unwrap(),
        "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
    );
    // UNKNOWN: the rest of the line is ignored; the connection's own ends are used.
    assert_eq!(done(b"PROXY UNKNOWN\r\n").addresses, None);
    assert_eq!(done(b"PROXY UNKNOWN\r\n").len, 15);
    let worst_unknown = b"PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff \
ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    assert_eq!(worst_unknown.len(), 107);
    assert_eq!(done(worst_unknown).len, 107);
}

#[test]
fn v1_truncated_is_incomplete_at_every_cut() {
    let full = b"PROXY TCP6 2001:db8::1 2001:db8::2 4000 80\r\n";
    for cut in 0..full.len() {
        assert_eq!(parse(&full[..cut]), Ok(None), "cut at {cut}");
    }
    assert_eq!(done(full).len, full.len());
}

#[test]
fn v1_hostile_input() {
    // Wrong start, lower case, no CRLF within 107 bytes, a bare LF, bad fields.
    assert!(refused(b"GET / HTTP/1.1\r\n").contains("does not start with a PROXY header"));
    refused(b"proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n");
    let long = [b"PROXY UNKNOWN ".as_slice(), &[b'x'; 200]].concat();
    assert!(refused(&long).contains("longer than 107"));
    refused(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n");
    refused(b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n");
    refused(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n");
    refused(b"PROXY TCP4 1.2.3.400 5.6.7.8 1 2\r\n");
    refused(b"PROXY TCP4 ::1 ::1 1 2\r\n");
    refused(b"PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n");
    refused(b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n");
    refused(b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n");
    refused(b"PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n");
    refused(b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n");
    refused(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 \xff\r\n");
}

fn v2(command: u8, family: u8, body: &[u8]) -> Vec<u8> {
    let mut out = V2_SIGNATURE.to_vec();
    out.push(0x20 | command);
    out.push(family);
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
    out
}

#[test]
fn v2_ipv4_ipv6_unix_and_tlvs() {
    let mut body = vec![192, 0, 2, 1, 198, 51, 100, 7];
    body.extend_from_slice(&5555u16.to_be_bytes());
    body.extend_from_slice(&443u16.to_be_bytes());
    // A TLV after the addresses (PP2_TYPE_AUTHORITY, "example.com") is skipped.
    body.extend_from_slice(&[0x02, 0x00, 11]);
    body.extend_from_slice(b"example.com");
    let mut stream = v2(1, 0x11, &body);
    let header_len = stream.len();
    stream.extend_from_slice(b"payload");
    let h = done(&stream);
    assert_eq!(h.version, Version::V2);
    assert_eq!(h.len, header_len);
    assert_eq!(
        h.addresses,
        Some(Addresses::Inet {
            src: sa("192.0.2.1:5555"),
            dst: sa("198.51.100.7:443")
        })
    );

    let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let dst: Ipv6Addr = "2001:db8::2".parse().unwrap();
    let mut body = [src.octets(), dst.octets()].concat();
    body.extend_from_slice(&[0x0f, 0xa0, 0, 80]);
    let h = done(&v2(1, 0x21, &body));
    assert_eq!(h.addresses.unwrap().source().unwrap(), "[2001:db8::1]:4000");

    let mut body = vec![0u8; 216];
    body[..9].copy_from_slice(b"/run/a.sk");
    body[108..117].copy_from_slice(b"/run/b.sk");
    let h = done(&v2(1, 0x31, &body));
    assert_eq!(
        h.addresses,
        Some(Addresses::Unix {
            src: b"/run/a.sk".to_vec(),
            dst: b"/run/b.sk".to_vec()
        })
    );
}

#[test]
fn v2_local_and_unspec_use_the_real_ends() {
    // LOCAL (a health check) with or without an address block; PROXY with AF_UNSPEC.
    assert_eq!(done(&v2(0, 0x00, &[])).addresses, None);
    assert_eq!(done(&v2(0, 0x11, &[1; 12])).addresses, None);
    assert_eq!(done(&v2(1, 0x00, &[])).addresses, None);
    assert_eq!(done(&v2(0, 0x00, &[])).len, 16);
}

#[test]
fn v2_hostile_input() {
    let good = v2(1, 0x11, &[1; 12]);
    for cut in 0..good.len() {
        assert_eq!(parse(&good[..cut]), Ok(None), "cut at {cut}");
    }
    // A wrong signature byte, version 1 or 3 in the v2 frame, an unknown command.
    let mut wrong = good.clone();
    wrong[7] = b'X';
    refused(&wrong);
    let mut wrong = good.clone();
    wrong[12] = 0x31;
    assert!(refused(&wrong).contains("version 3"));
    refused(&v2(2, 0x11, &[1; 12]));
    // Addresses shorter than the family needs: the length ends before them.
    assert!(refused(&v2(1, 0x11, &[1; 11])).contains("need 12 bytes"));
    refused(&v2(1, 0x21, &[1; 20]));
    refused(&v2(1, 0x31, &[1; 200]));
    // Unknown family; a datagram transport.
    refused(&v2(1, 0x41, &[1; 12]));
    refused(&v2(1, 0x12, &[1; 12]));
    // A length past the end of what was sent is incomplete (the deadline ends it), and a
    // length beyond what we take is refused at once.
    let mut long = good[..16].to_vec();
    long[14..16].copy_from_slice(&100u16.to_be_bytes());
    assert_eq!(parse(&long), Ok(None));
    long[14..16].copy_from_slice(&u16::MAX.to_be_bytes());
    assert!(refused(&long).contains("at most"));
}

#[test]
fn encode_parses_back() {
    let cases = [
        Addresses::Inet {
            src: sa("192.0.2.1:5555"),
            dst: sa("127.0.0.1:80"),
        },
        Addresses::Inet {
            src: sa("[2001:db8::1]:5555"),
            dst: sa("[::1]:80"),
        },
    ];
    for version in [Version::V1, Version::V2] {
        for addresses in &cases {
            let bytes = encode(version, addresses);
            let h = done(&bytes);
            assert_eq!(h.len, bytes.len());
            assert_eq!(h.version, version);
            assert_eq!(h.addresses.as_ref(), Some(addresses));
        }
        // Nothing known: UNKNOWN / LOCAL.
        assert_eq!(done(&encode(version, &Addresses::Unknown)).addresses, None);
    }
    assert_eq!(
        encode(Version::V1, &Addresses::Unknown),
        b"PROXY UNKNOWN\r\n"
    );
    assert_eq!(
        encode(Version::V1, &cases[0]),
        b"PROXY TCP4 192.0.2.1 127.0.0.1 5555 80\r\n"
    );
    // Mapped IPv4 (a dual-stack listener) goes as IPv4; unix paths only in v2.
    let mapped = Addresses::Inet {
        src: sa("[::ffff:192.0.2.1]:5555"),
        dst: sa("[::ffff:127.0.0.1]:80"),
    };
    assert_eq!(encode(Version::V1, &mapped), encode(Version::V1, &cases[0]));
    let unix = Addresses::Unix {
        src: b"/a".to_vec(),
        dst: b"/b".to_vec(),
    };
    assert_eq!(
        done(&encode(Version::V2, &unix)).addresses,
        Some(unix.clone())
    );
    assert_eq!(encode(Version::V1, &unix), b"PROXY UNKNOWN\r\n");
}
