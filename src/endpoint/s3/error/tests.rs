use super::*;
use crate::endpoint::s3::xml;

const ASKED: Asked = Asked {
    uri: "s3://b/k",
    bucket: "b",
    credentials: Some("the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"),
};

fn words(status: u16, body: &str) -> String {
    in_words(status, xml::error(body.as_bytes()).as_ref(), ASKED)
}

#[test]
fn each_code_in_words() {
    let w = words(
        404,
        "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>",
    );
    assert_eq!(w, "s3://b/k: no such object (NoSuchKey)");
    let w = words(404, "<Error><Code>NoSuchBucket</Code></Error>");
    assert_eq!(w, "s3://b/k: the bucket 'b' does not exist (NoSuchBucket)");
    let w = words(403, "<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match</Message></Error>");
    assert!(
        w.contains("refused the request's signature (SignatureDoesNotMatch)"),
        "{w}"
    );
    assert!(w.contains("AWS_SECRET_ACCESS_KEY"), "{w}");
    let w = words(
        403,
        "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>",
    );
    assert!(
        w.contains("access denied (AccessDenied)") && w.contains("Access Denied"),
        "{w}"
    );
    let w = words(
        503,
        "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
    );
    assert!(w.contains("stayed busy (SlowDown, HTTP 503)"), "{w}");
    let anonymous = Asked {
        credentials: None,
        ..ASKED
    };
    let w = in_words(403, None, anonymous);
    assert!(w.contains("HTTP 403") && w.contains("unsigned"), "{w}");
    let w = words(
        400,
        "<Error><Code>Weird</Code><Message>odd</Message></Error>",
    );
    assert_eq!(w, "s3://b/k: Weird (HTTP 400); the server said: odd");
}

#[test]
fn clock_skew_names_the_skew_and_its_direction() {
    let behind = "<Error><Code>RequestTimeTooSkewed</Code><RequestTime>20260101T000000Z</RequestTime>\
<ServerTime>2026-01-01T02:03:00Z</ServerTime><MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds></Error>";
    let w = words(403, behind);
    assert!(w.contains("clock is 2 h 03 min behind the server's (RequestTimeTooSkewed) (S3 allows 15 min 00 s)"), "{w}");
    let ahead =
        "<Error><Code>RequestTimeTooSkewed</Code><RequestTime>20260101T001640Z</RequestTime>\
<ServerTime>2026-01-01T00:00:00.000Z</ServerTime></Error>";
    let w = words(403, ahead);
    assert!(w.contains("16 min 40 s ahead"), "{w}");
}

#[test]
fn retried_answers() {
    assert!(is_retryable(503, Some("SlowDown")));
    assert!(is_retryable(500, None));
    assert!(is_retryable(400, Some("RequestTimeout")));
    assert!(!is_retryable(403, Some("AccessDenied")));
    assert!(!is_retryable(404, Some("NoSuchKey")));
}

#[test]
fn times_in_both_forms() {
    assert_eq!(unix_seconds("20150830T123600Z"), Some(1_440_938_160));
    assert_eq!(
        unix_seconds("2015-08-30T12:36:00.000Z"),
        Some(1_440_938_160)
    );
    assert_eq!(unix_seconds("yesterday"), None);
}
