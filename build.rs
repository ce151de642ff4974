//! Embeds the commit zerocat is built from (`zerocat version --verbose`): `git rev-parse
//! --short HEAD` where the source is a git checkout, "unknown" in a tarball or crate build.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let checkout = Path::new(".git").exists();
    let commit = checkout
        .then(|| git(&["rev-parse", "--short", "HEAD"]))
        .flatten();
    if commit.is_some() {
        // A new commit moves HEAD (detached) or the branch it names: rebuild then. In a
        // worktree .git is a file; the paths come from git itself.
        if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
            println!("cargo:rerun-if-changed={dir}/HEAD");
        }
        if let (Some(common), Some(head_ref)) = (
            git(&["rev-parse", "--git-common-dir"]),
            git(&["symbolic-ref", "-q", "HEAD"]),
        ) {
            println!("cargo:rerun-if-changed={common}/{head_ref}");
            println!("cargo:rerun-if-changed={common}/packed-refs");
        }
    }
    let commit = commit.unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=ZEROCAT_COMMIT={commit}");
}
