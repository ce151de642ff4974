//! copy's files: two sources with one name, /proc and /sys files, --resume's whole-prefix check, holes onto a block device.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::util::{
    assert_bytes_eq, data, json_report, run, stderr_text, tempdir, write_file, zerocat,
};

/// Runs `zerocat --stats json copy FLAGS ARGS...`: (exit code, report, stderr).
fn copy(flags: &[&str], args: &[&Path]) -> (i32, Value, String) {
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "copy"]).args(flags).args(args);
    let out = run(cmd);
    (
        out.status.code().unwrap_or(-1),
        json_report(&out.stderr),
        stderr_text(&out),
    )
}

#[test]
fn copy_refuses_a_second_source_with_the_name_of_a_just_created_file() {
    let dir = tempdir();
    let first = data(5000);
    let second = b"the other x".to_vec();
    fs::create_dir_all(dir.path().join("m/a")).unwrap();
    fs::create_dir_all(dir.path().join("m/b")).unwrap();
    fs::create_dir(dir.path().join("dst")).unwrap();
    let a = write_file(&dir.path().join("m/a"), "x", &first);
    let b = write_file(&dir.path().join("m/b"), "x", &second);
    let dst = dir.path().join("dst");
    let (code, report, err) = copy(&[], &[&a, &b, &dst]);
    assert_eq!(code, 1, "{err}");
    assert_bytes_eq(&fs::read(dst.join("x")).unwrap(), &first, "the first copy");
    assert!(err.contains("will not overwrite just-created"), "{err}");
    let entries = report["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{report}");
    assert_eq!(entries[0]["src"], a.to_str().unwrap());
    assert!(entries[0]["error"].is_null(), "{report}");
    assert_eq!(entries[0]["bytes"], first.len() as u64);
    assert_eq!(entries[1]["src"], b.to_str().unwrap());
    assert!(
        entries[1]["error"]
            .as_str()
            .unwrap()
            .contains("just-created"),
        "{report}"
    );
    assert_eq!(report["files"], 1);
    assert_eq!(report["failed"], 1);
}
