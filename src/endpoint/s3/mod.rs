//! `s3://BUCKET/KEY`: S3 as an endpoint (issue 39). The parts that need no socket:
//!
//! - `sigv4.rs`: AWS Signature Version 4 over `ring` (pure; the AWS test vectors pin it).
//! - `config.rs`: credentials, region and endpoint, found as the AWS CLI finds them;
//!   secrets that print as `***`.
//! - `xml.rs`: S3's XML answers (errors, listings, multipart uploads) over quick-xml.
//! - `error.rs`: an error answer in words, and which ones are retried.
//!
//! Each file has its unit tests in `FILE/tests.rs`.

pub mod config;
pub mod error;
pub mod sigv4;
pub mod xml;

pub use config::{Credentials, Secret, Service, Settings, Target};
