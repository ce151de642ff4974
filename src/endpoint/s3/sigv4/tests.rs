//! The AWS SigV4 test suite's vectors (aws-sig-v4-test-suite, 2015-08-30, service
//! "service") and the S3 documentation's examples (2013-05-24, "examplebucket", the
//! documentation's example keys). Each asserts the canonical request, the hash in the
//! string to sign and the signature, so a failure says which step is wrong.

use super::*;

fn suite_credentials() -> Credentials {
    Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        None,
        "the suite",
    )
}

fn s3_credentials() -> Credentials {
    Credentials::new(
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        None,
        "the S3 documentation",
    )
}

const SUITE: Scope = Scope {
    region: "us-east-1",
    service: "service",
};
const S3: Scope = Scope {
    region: "us-east-1",
    service: "s3",
};

fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    headers(pairs)
}

fn suite_headers(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut h = headers(&[
        ("Host", "example.amazonaws.com"),
        ("X-Amz-Date", "20150830T123600Z"),
    ]);
    h.extend(headers(extra));
    h
}

fn string_to_sign_hash(signed: &Signed) -> &str {
    signed.string_to_sign.lines().last().unwrap()
}

#[test]
fn get_vanilla() {
    let h = suite_headers(&[]);
    let signed = sign(
        &suite_credentials(),
        SUITE,
        "20150830T123600Z",
        &Request {
            method: "GET",
            path: "/",
            query: &[],
            headers: &h,
            payload_hash: EMPTY_SHA256,
        },
    );
    assert_eq!(
        signed.canonical_request,
        format!(
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n\
             host;x-amz-date\n{EMPTY_SHA256}"
        )
    );
    assert_eq!(
        signed.string_to_sign,
        "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n\
         bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"
    );
    assert_eq!(
        signed.authorization,
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
         SignedHeaders=host;x-amz-date, \
         Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    );
}

#[test]
fn get_vanilla_query_order_key_case_sorts_by_name() {
    let h = suite_headers(&[]);
    let q = query(&[("Param2", "value2"), ("Param1", "value1")]);
    let signed = sign(
        &suite_credentials(),
        SUITE,
        "20150830T123600Z",
        &Request {
            method: "GET",
            path: "/",
            query: &q,
            headers: &h,
            payload_hash: EMPTY_SHA256,
        },
    );
    assert_eq!(
        signed.canonical_request.lines().nth(2),
        Some("Param1=value1&Param2=value2")
    );
    assert_eq!(
        string_to_sign_hash(&signed),
        "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0"
    );
    assert_eq!(
        signed.signature,
        "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
    );
}

#[test]
fn post_x_www_form_urlencoded_signs_the_body_hash_and_content_type() {
    let h = suite_headers(&[("Content-Type", "application/x-www-form-urlencoded")]);
    let payload = sha256_hex(b"Param1=value1");
    assert_eq!(
        payload,
        "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"
    );
    let signed = sign(
        &suite_credentials(),
        SUITE,
        "20150830T123600Z",
        &Request {
            method: "POST",
            path: "/",
            query: &[],
            headers: &h,
            payload_hash: &payload,
        },
    );
    assert_eq!(
        signed.canonical_request,
        format!(
            "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\n\
             host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n\
             content-type;host;x-amz-date\n{payload}"
        )
    );
    assert_eq!(
        string_to_sign_hash(&signed),
        "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281"
    );
    assert_eq!(
        signed.signature,
        "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"
    );
}

#[test]
fn get_utf8_encodes_the_path_once_in_uppercase_hex() {
    let h = suite_headers(&[]);
    let path = uri_encode("/ሴ", false);
    assert_eq!(path, "/%E1%88%B4");
    let signed = sign(
        &suite_credentials(),
        SUITE,
        "20150830T123600Z",
        &Request {
            method: "GET",
            path: &path,
            query: &[],
            headers: &h,
            payload_hash: EMPTY_SHA256,
        },
    );
    assert_eq!(
        sha256_hex(signed.canonical_request.as_bytes()),
        "2a0a97d02205e45ce2e994789806b19270cfbbb0921b278ccf58f5249ac42102"
    );
    assert_eq!(
        signed.signature,
        "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"
    );
}

#[test]
fn get_header_value_trim_and_key_duplicate() {
    let h = suite_headers(&[("My-Header1", " value1"), ("My-Header2", " \"a   b   c\"")]);
    let signed = sign(
        &suite_credentials(),
        SUITE,
        "20150830T123600Z",
        &Request {
            method: "GET",
            path: "/",
            query: &[],
            headers: &h,
            payload_hash: EMPTY_SHA256,
        },
    );
    assert!(signed
        .canonical_request
        .contains("my-header1:value1\nmy-header2:\"a b c\"\n"));
    assert_eq!(
        signed.signature,
        "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"
    );

    let h = suite_headers(&[
        ("My-Header1", "value2"),
        ("My-Header1", "value2"),
        ("My-Header1", "value1"),
    ]);
    let signed = sign(
        &suite_credentials(),
        SUITE,
        "20150830T123600Z",
        &Request {
            method: "GET",
            path: "/",
            query: &[],
            headers: &h,
            payload_hash: EMPTY_SHA256,
        },
    );
    assert!(signed
        .canonical_request
        .contains("my-header1:value2,value2,value1\n"));
    assert_eq!(
        signed.signature,
        "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"
    );
}

/// The S3 documentation's "GET Object" example: the first 10 bytes of test.txt.
#[test]
fn s3_documentation_get_object_example() {
    let h = headers(&[
        ("Host", "examplebucket.s3.amazonaws.com"),
        ("Range", "bytes=0-9"),
        ("x-amz-content-sha256", EMPTY_SHA256),
        ("x-amz-date", "20130524T000000Z"),
    ]);
    let signed = sign(
        &s3_credentials(),
        S3,
        "20130524T000000Z",
        &Request {
            method: "GET",
            path: "/test.txt",
            query: &[],
            headers: &h,
            payload_hash: EMPTY_SHA256,
        },
    );
    assert_eq!(
        signed.canonical_request,
        format!(
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n\
             x-amz-content-sha256:{EMPTY_SHA256}\nx-amz-date:20130524T000000Z\n\n\
             host;range;x-amz-content-sha256;x-amz-date\n{EMPTY_SHA256}"
        )
    );
    assert_eq!(
        signed.string_to_sign,
        "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n\
         7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972"
    );
    assert_eq!(
        signed.authorization,
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
         SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
         Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    );
}

/// The S3 documentation's "PUT Object" example: a key with `$`, encoded once.
#[test]
fn s3_documentation_put_object_example_encodes_the_key_once() {
    let payload = sha256_hex(b"Welcome to Amazon S3.");
    assert_eq!(
        payload,
        "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"
    );
    let h = headers(&[
        ("Date", "Fri, 24 May 2013 00:00:00 GMT"),
        ("Host", "examplebucket.s3.amazonaws.com"),
        ("x-amz-content-sha256", &payload),
        ("x-amz-date", "20130524T000000Z"),
        ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
    ]);
    let path = format!("/{}", uri_encode("test$file.text", false));
    assert_eq!(path, "/test%24file.text");
    let signed = sign(
        &s3_credentials(),
        S3,
        "20130524T000000Z",
        &Request {
            method: "PUT",
            path: &path,
            query: &[],
            headers: &h,
            payload_hash: &payload,
        },
    );
    assert_eq!(
        signed.signature,
        "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
    );
}

/// The S3 documentation's "GET Bucket (List Objects)" and "GET Bucket Lifecycle" examples:
/// query parameters, one of them without a value.
#[test]
fn s3_documentation_list_and_lifecycle_examples_sign_the_query() {
    let h = headers(&[
        ("Host", "examplebucket.s3.amazonaws.com"),
        ("x-amz-content-sha256", EMPTY_SHA256),
        ("x-amz-date", "20130524T000000Z"),
    ]);
    let sign_query = |q: &[(String, String)]| {
        sign(
            &s3_credentials(),
            S3,
            "20130524T000000Z",
            &Request {
                method: "GET",
                path: "/",
                query: q,
                headers: &h,
                payload_hash: EMPTY_SHA256,
            },
        )
    };
    let list = sign_query(&query(&[("prefix", "J"), ("max-keys", "2")]));
    assert_eq!(
        list.canonical_request.lines().nth(2),
        Some("max-keys=2&prefix=J")
    );
    assert_eq!(
        list.signature,
        "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
    );
    let lifecycle = sign_query(&query(&[("lifecycle", "")]));
    assert_eq!(
        lifecycle.canonical_request.lines().nth(2),
        Some("lifecycle=")
    );
    assert_eq!(
        lifecycle.signature,
        "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"
    );
}

#[test]
fn keys_with_spaces_plus_percent_and_unicode_are_encoded_once() {
    assert_eq!(
        uri_encode("dir/a b+c%d~é.txt", false),
        "dir/a%20b%2Bc%25d~%C3%A9.txt"
    );
    assert_eq!(uri_encode("a/b", true), "a%2Fb");
    assert_eq!(
        canonical_query(&query(&[("prefix", "a b/"), ("list-type", "2")])),
        "list-type=2&prefix=a%20b%2F"
    );
}

#[test]
fn amz_date_is_basic_iso_8601_utc() {
    assert_eq!(amz_date(1_440_938_160), "20150830T123600Z");
    assert_eq!(amz_date(1_369_353_600), "20130524T000000Z");
}

#[test]
fn a_payload_hashed_in_pieces_is_the_payload_hashed_whole() {
    let payload: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
    let pieces = sha256_hex_pieces::<()>(|add| {
        for chunk in payload.chunks(4096 + 7) {
            add(chunk);
        }
        Ok(())
    });
    assert_eq!(pieces, Ok(sha256_hex(&payload)));
    assert_eq!(
        sha256_hex_pieces::<()>(|_| Ok(())),
        Ok(EMPTY_SHA256.to_owned())
    );
}
