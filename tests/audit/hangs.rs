//! Every blocking wait ends on SIGINT/SIGTERM with 130 and the report: tee with a stalled stdout reader, copy from a FIFO with no writer.
