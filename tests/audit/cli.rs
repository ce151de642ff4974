//! Command line and endpoint options: mode=, options that do not fit a source, exact --limit/--size, single-valued options given twice.
