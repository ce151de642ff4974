use super::*;

#[test]
fn a_head_is_parsed_and_headers_found_in_any_case() {
    let head = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nETag: \"x\"\r\n\r\n").unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(12));
    assert_eq!(head.get("etag"), Some("\"x\""));
    assert!(parse_head(b"HTTP/1.1 2x0\r\n\r\n").is_err());
}

#[test]
fn the_blank_line_ends_the_head() {
    assert_eq!(find_blank_line(b"HTTP/1.1 200 OK\r\n\r\nbody"), Some(19));
    assert_eq!(find_blank_line(b"HTTP/1.1 200 OK\r\n"), None);
}

#[test]
fn chunked_answers_are_joined() {
    assert_eq!(
        dechunk(b"4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\n\r\n").unwrap(),
        b"Wikipedia"
    );
    assert!(dechunk(b"4\r\nWi").is_err());
    assert!(dechunk(b"zz\r\n").is_err());
}

#[test]
fn counts_name_only_what_was_made() {
    let c = Counts::default();
    c.get.fetch_add(1, Ordering::Relaxed);
    c.retry.fetch_add(2, Ordering::Relaxed);
    assert_eq!(c.named(), vec![("GET", 1), ("retries", 2)]);
}
