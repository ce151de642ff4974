//! `s3://BUCKET/KEY`: S3 as an endpoint (issue 39). The parts that need no socket:
//!
//! - `sigv4.rs`: AWS Signature Version 4 over `ring` (pure; the AWS test vectors pin it).
//! - `config.rs`: credentials, region and endpoint, found as the AWS CLI finds them;
//!   secrets that print as `***`.
//! - `xml.rs`: S3's XML answers (errors, listings, multipart uploads) over quick-xml.
//! - `error.rs`: an error answer in words, and which ones are retried.
//! - `client.rs`: one signed HTTP/1.1 request per connection, retried with backoff; the
//!   answer's head read so the socket stays at the body.
//! - `transfer.rs`: an object opened for the engine: a GET's socket, or the pipe an
//!   uploader stages into memfd parts (one PUT, or a multipart upload aborted on failure).
//!
//! Each file has its unit tests in `FILE/tests.rs`.

pub mod client;
pub mod config;
pub mod error;
pub mod sigv4;
pub mod transfer;
pub mod xml;

pub use config::{Credentials, Secret, Service, Settings, Target};
pub use transfer::{
    Transfer, DEFAULT_PART_SIZE, MAX_PARTS_IN_FLIGHT, MAX_PART_SIZE, MIN_PART_SIZE, PARTS_IN_FLIGHT,
};
