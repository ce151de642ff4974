//! Integration tests: they drive the built binary over real files, pipes and loopback
//! sockets. One test binary, one module per subcommand.

mod rig;
mod util;

mod audit;
mod cli;
mod command;
mod copy;
mod copy_features;
mod dump;
mod exit_idle;
mod faults;
mod http;
mod http_fault;
mod keep_open;
mod listeners;
mod mptcp;
mod names;
mod netopts;
mod outbound;
mod parallel;
mod pipe;
mod probe;
mod relay;
mod relay_pace;
mod resume;
mod s3;
mod tee;
mod terminal;
mod timeouts;
mod tls;
mod udp;
mod udp_stream;
mod upstreams;
mod ux;
mod websocket;
