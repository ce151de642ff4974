//! The subcommands: each opens its endpoints, asks the engine to move the bytes, and
//! reports. Nothing below `cmd` imports a command.

pub mod common;
pub mod copy;
pub mod pipe;
pub mod probe;
pub mod relay;
pub mod tee;
