//! The outside audit of 0.1 (issue 13, "bytes are sacred"): one regression test per finding,
//! each failing on 0.1.0 and passing since. Split by family; every test asserts the bytes,
//! the exit code and the report.

mod children;
mod cli;
mod copy_data;
mod copy_files;
mod copy_meta;
mod differential;
mod hangs;
mod relay;
