//! copy's metadata and security: setuid/setgid under --preserve by a non-root user, existing destination directories' modes, O_NOFOLLOW on sources, --special --preserve modes.
