use super::*;

#[test]
fn an_error_body_with_escapes_and_a_declaration() {
    let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>NoSuchKey</Code><Message>The key &quot;a&amp;b&quot; &#x263A; does not exist.</Message>
<Key>a&amp;b</Key><RequestId>4442587FB7D0A2F9</RequestId></Error>"#;
    let e = error(body).unwrap();
    assert_eq!(e.code, "NoSuchKey");
    assert_eq!(e.message, "The key \"a&b\" \u{263A} does not exist.");
    assert_eq!(e.request_id.as_deref(), Some("4442587FB7D0A2F9"));
    assert_eq!(error(b"<html>nope</html>"), None);
    assert_eq!(error(b""), None);
}

#[test]
fn a_skew_error_keeps_both_times() {
    let body = b"<Error><Code>RequestTimeTooSkewed</Code><Message>m</Message>\
<RequestTime>20260101T000000Z</RequestTime><ServerTime>2026-01-01T02:03:00Z</ServerTime>\
<MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds></Error>";
    let e = error(body).unwrap();
    assert_eq!(e.request_time.as_deref(), Some("20260101T000000Z"));
    assert_eq!(e.server_time.as_deref(), Some("2026-01-01T02:03:00Z"));
    assert_eq!(e.max_skew_ms, Some(900_000));
}

#[test]
fn a_list_objects_v2_page_with_namespace_and_continuation() {
    let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <Contents><Key>p/a&lt;/Key&gt;</Key><Size>10</Size><ETag>&quot;abc&quot;</ETag></Contents>
  <Contents><Key>p/b</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified><Size>0</Size></Contents>
  <NextContinuationToken>tok/en==</NextContinuationToken>
</ListBucketResult>"#;
    let page = list_objects(body).unwrap();
    assert_eq!(
        page.objects,
        vec![
            Object {
                key: "p/a</Key>".into(),
                size: 10,
                etag: Some("\"abc\"".into())
            },
            Object {
                key: "p/b".into(),
                size: 0,
                etag: None
            },
        ]
    );
    assert_eq!(page.next.as_deref(), Some("tok/en=="));

    let last =
        b"<ListBucketResult><IsTruncated>false</IsTruncated><EncodingType>url</EncodingType>\
<Contents><Key>a%20b%2Bc+d%0A</Key><Size>1</Size></Contents>\
<CommonPrefixes><Prefix>dir%2F</Prefix></CommonPrefixes></ListBucketResult>";
    let page = list_objects(last).unwrap();
    assert_eq!(page.objects[0].key, "a b+c d\n");
    assert_eq!(page.prefixes, vec!["dir/".to_string()]);
    assert_eq!(page.next, None);

    let broken = b"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
    assert!(list_objects(broken)
        .unwrap_err()
        .contains("NextContinuationToken"));
    let wrong = b"<Error><Code>AccessDenied</Code></Error>";
    assert!(list_objects(wrong).unwrap_err().contains("<Error>"));
}

#[test]
fn multipart_answers() {
    let created = b"<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>\
<UploadId>VXBsb2FkIElE</UploadId></InitiateMultipartUploadResult>";
    assert_eq!(upload_id(created).unwrap(), "VXBsb2FkIElE");

    let done = b"<CompleteMultipartUploadResult><ETag>&quot;3858f62230ac3c915f300c664312c11f-9&quot;</ETag>\
</CompleteMultipartUploadResult>";
    assert_eq!(
        completed(done).unwrap(),
        Ok("\"3858f62230ac3c915f300c664312c11f-9\"".into())
    );
    let moto = b"<CompleteMultipartUploadResponse><ETag>e</ETag></CompleteMultipartUploadResponse>";
    assert_eq!(completed(moto).unwrap(), Ok("e".into()));
    // 200 OK with an <Error> body: not done.
    let failed = b"<?xml version=\"1.0\"?>\n<Error><Code>InternalError</Code><Message>try again</Message></Error>";
    assert_eq!(
        completed(failed).unwrap().unwrap_err().code,
        "InternalError"
    );

    let listed = b"<ListMultipartUploadsResult><Bucket>b</Bucket>\
<IsTruncated>true</IsTruncated><NextKeyMarker>k2</NextKeyMarker><NextUploadIdMarker>u2</NextUploadIdMarker>\
<Upload><Key>k1</Key><UploadId>u1</UploadId></Upload><Upload><Key>k2</Key><UploadId>u2</UploadId></Upload>\
</ListMultipartUploadsResult>";
    let UploadsPage { uploads, next } = list_uploads(listed).unwrap();
    assert_eq!(uploads.len(), 2);
    assert_eq!(
        uploads[1],
        Upload {
            key: "k2".into(),
            upload_id: "u2".into()
        }
    );
    assert_eq!(next, Some(("k2".into(), "u2".into())));
}

#[test]
fn the_complete_body_lists_parts_in_order_escaped() {
    let body = complete_body(&[(1, "\"a\"".into()), (2, "b&c".into())]);
    assert_eq!(
        body,
        "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;a&quot;</ETag></Part>\
<Part><PartNumber>2</PartNumber><ETag>b&amp;c</ETag></Part></CompleteMultipartUpload>"
    );
    // And it reads back as what was written.
    let root = parse(body.as_bytes()).unwrap();
    let etags: Vec<_> = root
        .all("Part")
        .map(|p| p.text_of("ETag").unwrap().to_owned())
        .collect();
    assert_eq!(etags, vec!["\"a\"", "b&c"]);
}

#[test]
fn malformed_xml_is_an_error_not_a_panic() {
    for body in [&b"<a><b></a>"[..], b"<a>", b"\xff\xfe", b"</a>"] {
        assert!(parse(body).is_err(), "{:?}", String::from_utf8_lossy(body));
    }
}
