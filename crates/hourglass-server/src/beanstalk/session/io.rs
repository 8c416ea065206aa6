//! The connection itself: its two halves, its framing, and the replies it
//! has yet to send. Replies pile up in `out` while pipelined commands are
//! answered, and go out in one write before the next read.

use bytes::BufMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};

use crate::beanstalk::framer::{Framer, READ_BYTES};

/// Whether the connection goes on after a frame.
pub(super) enum Flow {
    Go,
    Close,
}

/// The two halves of the connection and its framing.
pub(super) struct Io<S> {
    read: ReadHalf<S>,
    write: WriteHalf<S>,
    pub(super) framer: Framer,
    /// Replies not yet written.
    pub(super) out: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Io<S> {
    pub(super) fn new(stream: S) -> Io<S> {
        let (read, write) = tokio::io::split(stream);
        Io { read, write, framer: Framer::default(), out: Vec::with_capacity(READ_BYTES) }
    }

    /// Reads more bytes into the framer; `false` once the peer has closed.
    /// Cancel-safe: a read that did not finish took nothing.
    pub(super) async fn fill(&mut self) -> bool {
        // Straight into the framer's buffer: a chunk on the stack made this
        // future, and every command's that reads while it waits, 16 KiB to
        // zero and to move on every read (BENCHMARKS.md, "The beanstalk
        // front reads into its framer's buffer").
        let mut room = self.framer.room().limit(READ_BYTES);
        matches!(self.read.read_buf(&mut room).await, Ok(n) if n > 0)
    }

    /// Writes the replies so far; `false` if the peer is gone.
    pub(super) async fn flush(&mut self) -> bool {
        if self.out.is_empty() {
            return true;
        }
        let sent = self.write.write_all(&self.out).await.is_ok();
        self.out.clear();
        sent
    }
}
