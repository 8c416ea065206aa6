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

use crate::beanstalk::front::Front;
use io::{Flow, Io};
use state::Session;

/// Serves one connection until the peer closes it, sends `quit`, or its I/O fails.
pub(super) async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send>(front: Arc<Front>, stream: S) {
    let mut session = Session::new(front);
    let mut io = Io::new(stream);
    'connection: loop {
        while let Some(frame) = io.framer.next() {
            if let Flow::Close = dispatch::frame(&mut session, frame, &mut io).await {
                break 'connection;
            }
        }
        if !io.flush().await || !io.fill().await {
            break;
        }
    }
    let _ = io.flush().await;
    session.close().await;
}
