use super::*;

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
    c.resume.fetch_add(1, Ordering::Relaxed);
    assert_eq!(c.named(), vec![("GET", 1), ("retries", 2), ("resumes", 1)]);
}
