//! beanstalkd's text protocol, served beside the HTTP API on the same
//! [`Backend`](hourglass_queue::Backend): a tube is a queue, a job is a
//! task, its priority is the task's, its time-to-run the task's own lease,
//! `bury` and `kick` are dead and retry, `pause-tube` is a queue pause. A
//! `put` is answered once the task is as durable as the engine's fsync mode
//! promises.
//!
//! Each module depends only on those listed before it (none imports one
//! that imports it back):
//!
//! - `command`: a command line read into a `Command`;
//! - `framer`: a connection's bytes cut into lines and bodies, bounded;
//! - `reply`: replies, their YAML, and the replies to the engine's refusals;
//! - `counter`: the commands `stats` counts, an enum indexing atomics;
//! - `front`: what all connections share (tubes in use, counts, drain mode)
//!   and the limits;
//! - `stats`: the documents of `stats-job`, `stats-tube` and `stats`;
//! - `session`: one connection: its I/O loop, the jobs it holds, and a
//!   function for each command;
//! - `listener`: where the front listens, and the limit on connections.

mod command;
mod counter;
mod framer;
mod front;
mod listener;
mod reply;
mod session;
mod stats;

pub use front::{
    Access, Front, Options, CONNECTIONS_MAX, IDLE_TIMEOUT, JOB_BYTES_DEFAULT, JOB_COUNTS_MAX, LINE_TIMEOUT, WATCHED_MAX,
};
#[cfg(unix)]
pub use listener::serve_unix;
pub use listener::{serve_tcp, Listen};
