//! S3's XML bodies, read with quick-xml into a small tree, then into the few shapes zerocat
//! needs: an `<Error>`, a ListObjectsV2 page, the uploads of CreateMultipartUpload,
//! CompleteMultipartUpload and ListMultipartUploads; and the one body zerocat writes,
//! CompleteMultipartUpload's list of parts. Pure: bytes in, values out.
//!
//! quick-xml rather than string search: S3 escapes `&`, `<` and quotes in keys and
//! messages, may answer with a declaration, namespaces or whitespace between elements,
//! and a key can contain `</Key>`.

use quick_xml::events::Event;
use quick_xml::Reader;

/// An element: its local name (namespace prefix dropped), its text, its children.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Element {
    pub name: String,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    /// The first child named `name`.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }
    /// Every child named `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }
    /// The text of the first child named `name`.
    pub fn text_of(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.as_str())
    }
}

/// Parse a whole document into its root element.
pub fn parse(body: &[u8]) -> Result<Element, String> {
    let text = std::str::from_utf8(body).map_err(|_| "the XML body is not UTF-8".to_owned())?;
    let mut reader = Reader::from_str(text);
    let mut stack: Vec<Element> = Vec::new();
    let bad = |e: &dyn std::fmt::Display| format!("the XML body does not parse: {e}");
    loop {
        match reader.read_event().map_err(|e| bad(&e))? {
            Event::Start(start) => stack.push(Element {
                name: String::from_utf8_lossy(start.local_name().as_ref()).into_owned(),
                ..Element::default()
            }),
            Event::Empty(start) => {
                let element = Element {
                    name: String::from_utf8_lossy(start.local_name().as_ref()).into_owned(),
                    ..Element::default()
                };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(element),
                    None => return Ok(element),
                }
            }
            Event::Text(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t.xml10_content().map_err(|e| bad(&e))?);
                }
            }
            Event::CData(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t.decode().map_err(|e| bad(&e))?);
                }
            }
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref().map_err(|e| bad(&e))? {
                    Some(c) => c.to_string(),
                    None => {
                        let name = r.decode().map_err(|e| bad(&e))?;
                        quick_xml::escape::unescape(&format!("&{name};"))
                            .map_err(|e| bad(&e))?
                            .into_owned()
                    }
                };
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&resolved);
                }
            }
            Event::End(_) => {
                let done = stack.pop().ok_or_else(|| bad(&"a stray end tag"))?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(done),
                    None => return Ok(done),
                }
            }
            Event::Eof => return Err(bad(&"it ends inside an element or has none")),
            _ => {}
        }
    }
}

/// S3's `<Error>`: the code and message, and the fields some codes add.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
    /// `RequestTimeTooSkewed`: the request's time and the server's, as sent.
    pub request_time: Option<String>,
    pub server_time: Option<String>,
    pub max_skew_ms: Option<u64>,
    pub request_id: Option<String>,
}

/// An `<Error>` document; None when the body is something else (a success, HTML, empty).
pub fn error(body: &[u8]) -> Option<ErrorBody> {
    let root = parse(body).ok()?;
    if root.name != "Error" {
        return None;
    }
    let owned = |name| root.text_of(name).map(str::to_owned);
    Some(ErrorBody {
        code: owned("Code").unwrap_or_default(),
        message: owned("Message").unwrap_or_default(),
        request_time: owned("RequestTime"),
        server_time: owned("ServerTime"),
        max_skew_ms: root
            .text_of("MaxAllowedSkewMilliseconds")
            .and_then(|t| t.trim().parse().ok()),
        request_id: owned("RequestId"),
    })
}

/// One object of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub key: String,
    pub size: u64,
    pub etag: Option<String>,
}

/// One page of ListObjectsV2.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListPage {
    pub objects: Vec<Object>,
    /// `CommonPrefixes` when a delimiter was asked.
    pub prefixes: Vec<String>,
    /// The token for the next page; None on the last one.
    pub next: Option<String>,
}

/// A ListObjectsV2 result. Keys are URL-decoded when the server says it encoded them
/// (`<EncodingType>url</EncodingType>`; zerocat does not ask for it, see
/// [`super::transfer::list`]).
pub fn list_objects(body: &[u8]) -> Result<ListPage, String> {
    let root = expect(body, "ListBucketResult")?;
    let url = root
        .text_of("EncodingType")
        .is_some_and(|t| t.eq_ignore_ascii_case("url"));
    let decode = |text: &str| -> Result<String, String> {
        if url {
            url_decode(text)
        } else {
            Ok(text.to_owned())
        }
    };
    let mut page = ListPage::default();
    for c in root.all("Contents") {
        let key = decode(c.text_of("Key").ok_or("a listed object without a Key")?)?;
        let size = c
            .text_of("Size")
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| format!("the object '{key}' is listed without a Size"))?;
        page.objects.push(Object {
            key,
            size,
            etag: c.text_of("ETag").map(str::to_owned),
        });
    }
    for p in root.all("CommonPrefixes") {
        if let Some(prefix) = p.text_of("Prefix") {
            page.prefixes.push(decode(prefix)?);
        }
    }
    let truncated = root
        .text_of("IsTruncated")
        .is_some_and(|t| t.trim() == "true");
    if truncated {
        let token = root
            .text_of("NextContinuationToken")
            .filter(|t| !t.is_empty())
            .ok_or("a truncated listing without a NextContinuationToken")?;
        page.next = Some(token.to_owned());
    }
    Ok(page)
}

/// CreateMultipartUpload's `UploadId`.
pub fn upload_id(body: &[u8]) -> Result<String, String> {
    let root = expect(body, "InitiateMultipartUploadResult")?;
    root.text_of("UploadId")
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| "CreateMultipartUpload answered without an UploadId".into())
}

/// CompleteMultipartUpload's answer: the object's ETag. The server may answer 200 OK with
/// an `<Error>` body (the upload did not complete): that is an error here, never a success.
pub fn completed(body: &[u8]) -> Result<Result<String, ErrorBody>, String> {
    if let Some(e) = error(body) {
        return Ok(Err(e));
    }
    // S3 names it CompleteMultipartUploadResult; moto CompleteMultipartUploadResponse.
    let root = parse(body)?;
    if !root.name.starts_with("CompleteMultipartUpload") {
        return Err(format!(
            "expected <CompleteMultipartUploadResult>, the server sent <{}>",
            root.name
        ));
    }
    Ok(Ok(root.text_of("ETag").unwrap_or_default().to_owned()))
}

/// One in-progress multipart upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub key: String,
    pub upload_id: String,
}

/// One page of ListMultipartUploads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UploadsPage {
    pub uploads: Vec<Upload>,
    /// `key-marker` and `upload-id-marker` of the next page; None on the last.
    pub next: Option<(String, String)>,
}

/// A ListMultipartUploads result.
pub fn list_uploads(body: &[u8]) -> Result<UploadsPage, String> {
    let root = expect(body, "ListMultipartUploadsResult")?;
    let uploads = root
        .all("Upload")
        .map(|u| Upload {
            key: u.text_of("Key").unwrap_or_default().to_owned(),
            upload_id: u.text_of("UploadId").unwrap_or_default().to_owned(),
        })
        .collect();
    let next = root
        .text_of("IsTruncated")
        .is_some_and(|t| t.trim() == "true")
        .then(|| {
            (
                root.text_of("NextKeyMarker").unwrap_or_default().to_owned(),
                root.text_of("NextUploadIdMarker")
                    .unwrap_or_default()
                    .to_owned(),
            )
        });
    Ok(UploadsPage { uploads, next })
}

/// The body of CompleteMultipartUpload: each part's number and ETag, in order.
pub fn complete_body(parts: &[(u32, String)]) -> String {
    let mut body = String::from("<CompleteMultipartUpload>");
    for (number, etag) in parts {
        body.push_str(&format!(
            "<Part><PartNumber>{number}</PartNumber><ETag>{}</ETag></Part>",
            quick_xml::escape::escape(etag.as_str())
        ));
    }
    body.push_str("</CompleteMultipartUpload>");
    body
}

fn expect(body: &[u8], root: &str) -> Result<Element, String> {
    let element = parse(body)?;
    if element.name == root {
        Ok(element)
    } else {
        Err(format!(
            "expected <{root}>, the server sent <{}>",
            element.name
        ))
    }
}

/// `%XX` to bytes, `+` to a space (the form encoding S3's `EncodingType=url` uses).
fn url_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("'{text}' is not URL-encoded as announced"))?;
                out.push(hex);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("the key '{text}' is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests;
