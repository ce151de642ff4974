use super::*;

#[test]
fn chunked_answers_are_joined() {
    let answer = b"4\r\nWiki\r\n5;x=y\r\npedia\r\n0\r\n\r\n";
    assert_eq!(
        dechunk(answer).unwrap(),
        Some((b"Wikipedia".to_vec(), answer.len()))
    );
    // What follows the answer (on a kept-alive connection) is not taken.
    let trailers = b"1\r\na\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1";
    assert_eq!(
        dechunk(trailers).unwrap(),
        Some((b"a".to_vec(), trailers.len() - 8))
    );
    // Not all there yet: read on.
    assert_eq!(dechunk(b"4\r\nWi").unwrap(), None);
    assert_eq!(dechunk(b"4\r\nWiki\r\n0\r\n").unwrap(), None);
    assert!(dechunk(b"zz\r\n").is_err());
    assert!(dechunk(b"1\r\nab\r\n").is_err());
}

#[test]
fn counts_name_only_what_was_made() {
    let c = Counts::default();
    c.get.fetch_add(1, Ordering::Relaxed);
    c.retry.fetch_add(2, Ordering::Relaxed);
    assert_eq!(c.named(), vec![("GET", 1), ("retries", 2)]);
    c.resume.fetch_add(1, Ordering::Relaxed);
    assert_eq!(c.named(), vec![("GET", 1), ("retries", 2), ("resumes", 1)]);
}
