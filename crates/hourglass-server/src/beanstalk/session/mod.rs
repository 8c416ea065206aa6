//! One connection, from its first byte to its close. A connection that
//! closes gives its reserved jobs back at once, as beanstalkd does.
//!
//! Each module depends only on those listed before it:
//!
//! - `io`: the socket's halves, the framer, the replies not yet sent;
//! - `held`: the jobs the connection has reserved, and their time-to-run;
//! - `state`: the connection's tubes, held jobs and roles;
//! - the commands, a function each, grouped by who sends them:
//!   `producer` (`put`), `reserve` (the three reserves and their wait),
//!   `worker` (what is done with a reserved job: `delete`, `release`,
//!   `bury`, `touch`), `tubes` (`use`, `watch`, `ignore`, the tube lists,
//!   `pause-tube`), `peek` (peeks and kicks), `info` (the three `stats`);
//! - `dispatch`: each frame and command to its function;
//! - this file: the I/O loop.
//!
//! Replies are written once every pipelined command read so far is
//! answered, and before a `reserve` starts to wait.

mod dispatch;
mod held;
mod info;
mod io;
mod peek;
mod producer;
mod reserve;
mod state;
mod tubes;
mod worker;

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use crate::beanstalk::front::Front;
use io::{Flow, Io};
use state::Session;

/// Serves one connection until the peer closes it, sends `quit`, or its I/O fails.
pub(super) async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send>(front: Arc<Front>, stream: S) {
    let (line_timeout, idle_timeout) = (front.options.line_timeout, front.options.idle_timeout);
    let mut session = Session::new(front);
    let mut io = Io::new(stream);
    // When the frame held in part began to arrive.
    let mut partial_since = None;
    'connection: loop {
        while let Some(frame) = io.framer.next() {
            // A frame arrived whole: the next one's clock starts afresh.
            partial_since = None;
            if let Flow::Close = dispatch::frame(&mut session, frame, &mut io).await {
                break 'connection;
            }
        }
        if !io.flush().await {
            break;
        }
        // A frame begun must arrive whole in time; a connection with nothing
        // begun and no job held may idle only so long. Jobs held have their
        // own time-to-run.
        let deadline = if io.framer.held() > 0 {
            Some(*partial_since.get_or_insert_with(Instant::now) + line_timeout)
        } else {
            session.reserved.is_empty().then(|| Instant::now() + idle_timeout)
        };
        let filled = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, io.fill()).await.unwrap_or_else(|_| {
                tracing::debug!(partial = partial_since.is_some(), "a beanstalk connection closed at its deadline");
                false
            }),
            None => io.fill().await,
        };
        if !filled {
            break;
        }
    }
    let _ = io.flush().await;
    session.close().await;
}
