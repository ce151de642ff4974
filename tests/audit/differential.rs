//! Differential test of copy -r against cp -a: random trees, auto and --via userspace, tmpfs and ext4, and the same with one file failing.
