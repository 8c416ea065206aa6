//! Cuts the bytes of one connection into command lines and job bodies,
//! however the reads split them, holding a bounded number of bytes: a line
//! past [`LINE_BYTES_MAX`] is discarded to its end and answered
//! `BAD_FORMAT`; a body is held only once its `put` was accepted, and a
//! body too big is counted off, never held. Pure: no I/O.

use super::command::LINE_BYTES_MAX;

/// Bytes read from the socket at a time: room for pipelined commands, and
/// with [`LINE_BYTES_MAX`] the bound on what a connection buffers beside the
/// job body it is reading.
pub const READ_BYTES: usize = 16 * 1024;

/// The most bytes a connection may hold unframed while a `reserve` waits:
/// what arrives meanwhile is answered after the reserve, and a connection
/// found holding this much while it waits is closed. A read is at most
/// [`READ_BYTES`], so a waiting connection holds less than twice this.
pub const WAITING_HELD_MAX: usize = READ_BYTES;

/// A buffer's spare room kept between frames: a buffer grown for a job body
/// longer than a read shrinks back to a read's worth once the body is
/// framed. (Room made exactly for a read grows by the tail of a line at
/// most, which stays under this.)
const SPARE_KEPT_MAX: usize = READ_BYTES + LINE_BYTES_MAX;

const _: () = assert!(LINE_BYTES_MAX <= READ_BYTES && READ_BYTES < SPARE_KEPT_MAX);

/// What the bytes so far make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A command line, without its `\r\n`.
    Line(Vec<u8>),
    /// A line that was too long, or held a `\r` not followed by `\n`: its
    /// bytes were dropped up to its end.
    Malformed,
    /// The body a [`Framer::body`] asked for, with the two bytes after it
    /// (which should be `\r\n`).
    Body(Vec<u8>),
    /// The bytes a [`Framer::skip`] asked to drop are gone.
    Skipped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Line,
    /// Dropping a malformed line up to its `\r\n`.
    EndOfLine,
    Body(usize),
    Skip(u64),
}

/// The framing state of one connection.
#[derive(Debug)]
pub struct Framer {
    /// Bytes read; those before `start` are framed already, and dropped
    /// before the next read (one move a read, not one a frame).
    buffer: Vec<u8>,
    start: usize,
    want: Want,
}

impl Default for Framer {
    fn default() -> Self {
        Framer { buffer: Vec::new(), start: 0, want: Want::Line }
    }
}

impl Framer {
    /// The buffer the next read appends to, at most [`READ_BYTES`]: its
    /// framed bytes dropped, and room made for a read. The socket reads
    /// straight into it.
    pub fn room(&mut self) -> &mut Vec<u8> {
        self.buffer.drain(..self.start);
        self.start = 0;
        let held = self.buffer.len();
        let spare = self.buffer.capacity() - held;
        if held <= READ_BYTES && spare > SPARE_KEPT_MAX {
            self.buffer.shrink_to(held + READ_BYTES);
        } else if spare < READ_BYTES {
            if held < READ_BYTES {
                // Exact: a connection holds a read's worth, not twice that.
                self.buffer.reserve_exact(READ_BYTES);
            } else {
                // A body longer than a read grows as its bytes come (not
                // by its declared size), doubling: no copy a read.
                self.buffer.reserve(READ_BYTES);
            }
        }
        &mut self.buffer
    }

    /// Bytes that came in (what a read into [`room`](Framer::room) does).
    #[cfg(test)]
    pub fn push(&mut self, bytes: &[u8]) {
        self.room().extend_from_slice(bytes);
    }

    /// After a `put`'s line: the next `bytes` and the `\r\n` after them are its body.
    pub fn body(&mut self, bytes: usize) {
        self.want = Want::Body(bytes + 2);
    }

    /// After a `put` too big: drops the next `bytes` and the `\r\n` after them.
    pub fn skip(&mut self, bytes: u64) {
        self.want = Want::Skip(bytes + 2);
    }

    /// The next frame, if the bytes so far complete one.
    pub fn next(&mut self) -> Option<Frame> {
        loop {
            let pending = &self.buffer[self.start..];
            match self.want {
                Want::Line | Want::EndOfLine => {
                    let malformed = self.want == Want::EndOfLine;
                    // The first `\r` ends the line, and must be followed by `\n`.
                    match pending.iter().position(|&b| b == b'\r') {
                        Some(at) if at + 1 < pending.len() => {
                            if pending[at + 1] != b'\n' {
                                // A lone `\r`: malformed, dropped up to the end of the line.
                                self.start += at + 1;
                                self.want = Want::EndOfLine;
                                continue;
                            }
                            let line = (!malformed && at + 2 <= LINE_BYTES_MAX).then(|| pending[..at].to_vec());
                            self.start += at + 2;
                            self.want = Want::Line;
                            return Some(line.map_or(Frame::Malformed, Frame::Line));
                        }
                        found => {
                            // No complete line yet: past the limit, its bytes so far are dropped.
                            let held = found.unwrap_or(pending.len());
                            if self.want == Want::EndOfLine || held >= LINE_BYTES_MAX {
                                self.start += held;
                                self.want = Want::EndOfLine;
                            }
                            return None;
                        }
                    }
                }
                Want::Body(bytes) => {
                    if pending.len() < bytes {
                        return None;
                    }
                    // Copied out at its own size: the buffer is kept for the next read.
                    let body = pending[..bytes].to_vec();
                    self.start += bytes;
                    self.want = Want::Line;
                    return Some(Frame::Body(body));
                }
                Want::Skip(left) => {
                    let dropped = left.min(pending.len() as u64);
                    self.start += dropped as usize;
                    if dropped == left {
                        self.want = Want::Line;
                        return Some(Frame::Skipped);
                    }
                    self.want = Want::Skip(left - dropped);
                    return None;
                }
            }
        }
    }

    /// Bytes held and not yet framed: a line's worth past a read, or the body being read.
    pub fn held(&self) -> usize {
        self.buffer.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Feeds `input` in pieces cut at `cuts`, answering `put`s as a session
    /// would; returns every frame.
    fn frames(input: &[u8], cuts: &[usize]) -> Vec<Frame> {
        let mut framer = Framer::default();
        let mut out = Vec::new();
        let mut from = 0;
        let mut ends: Vec<usize> = cuts.iter().map(|&c| c.min(input.len())).collect();
        ends.push(input.len());
        ends.sort_unstable();
        for end in ends {
            framer.push(&input[from..end]);
            from = end;
            while let Some(frame) = framer.next() {
                if let Frame::Line(line) = &frame {
                    if let Some(bytes) =
                        line.strip_prefix(b"put ").and_then(|n| std::str::from_utf8(n).ok()?.parse().ok())
                    {
                        if bytes > 100 {
                            framer.skip(bytes);
                        } else {
                            framer.body(bytes as usize);
                        }
                    }
                }
                out.push(frame);
                assert!(framer.held() <= input.len());
            }
        }
        out
    }

    #[test]
    fn lines_bodies_and_limits() {
        let input =
            b"use a\r\nput 3\r\nabc\r\nput 200\r\n".iter().chain([b'x'; 202].iter()).copied().collect::<Vec<_>>();
        assert_eq!(
            frames(&input, &[]),
            [
                Frame::Line(b"use a".to_vec()),
                Frame::Line(b"put 3".to_vec()),
                Frame::Body(b"abc\r\n".to_vec()),
                Frame::Line(b"put 200".to_vec()),
                Frame::Skipped
            ]
        );
        let at_limit = [vec![b'x'; LINE_BYTES_MAX - 2], b"\r\n".to_vec()].concat();
        assert_eq!(frames(&at_limit, &[]), [Frame::Line(vec![b'x'; LINE_BYTES_MAX - 2])]);
        let past = [vec![b'x'; LINE_BYTES_MAX - 1], b"\r\nquit\r\n".to_vec()].concat();
        assert_eq!(frames(&past, &[]), [Frame::Malformed, Frame::Line(b"quit".to_vec())]);
        let far_past = [vec![b'x'; 10 * LINE_BYTES_MAX], b"\r\nquit\r\n".to_vec()].concat();
        assert_eq!(frames(&far_past, &[100, 300, 1000]), [Frame::Malformed, Frame::Line(b"quit".to_vec())]);
        assert_eq!(frames(b"a\rb\r\nquit\r\n", &[]), [Frame::Malformed, Frame::Line(b"quit".to_vec())]);
    }

    #[test]
    fn a_long_line_held_no_more_than_its_limit() {
        let mut framer = Framer::default();
        for _ in 0..1_000 {
            framer.push(&[b'x'; 1_000]);
            assert_eq!(framer.next(), None);
            assert!(framer.held() < LINE_BYTES_MAX);
        }
    }

    #[test]
    fn the_buffer_holds_a_read_and_a_large_body_leaves_with_its_own_bytes() {
        let mut framer = Framer::default();
        for _ in 0..100 {
            framer.push(b"list-tubes\r\nlist-tube");
            assert_eq!(framer.next(), Some(Frame::Line(b"list-tubes".to_vec())));
            framer.push(b"-used\r\n");
            assert_eq!(framer.next(), Some(Frame::Line(b"list-tube-used".to_vec())));
        }
        let capacity = framer.room().capacity();
        assert!(capacity <= READ_BYTES + LINE_BYTES_MAX, "a read's worth and a line, not twice it: {capacity}");
        let body = vec![b'b'; 10 * READ_BYTES];
        framer.push(b"put 163840\r\n");
        assert_eq!(framer.next(), Some(Frame::Line(b"put 163840".to_vec())));
        framer.body(body.len());
        for (read, piece) in [body.as_slice(), b"\r\nquit"].concat().chunks(READ_BYTES).enumerate() {
            framer.push(piece);
            let room = framer.room().capacity();
            assert!(room < 4 * (read + 1) * READ_BYTES, "room grows with the bytes received, not the size declared");
        }
        let Some(Frame::Body(got)) = framer.next() else { panic!("the body, whole") };
        assert_eq!(got.len(), body.len() + 2);
        assert_eq!(got.capacity(), got.len(), "a payload holds no spare buffer");
        assert!(framer.room().capacity() <= 4 + READ_BYTES, "the buffer is given back");
        assert_eq!(framer.held(), 4, "`quit` is kept for its line");
    }

    proptest! {
        #[test]
        fn reads_split_anywhere_give_the_same_frames(
            input in proptest::collection::vec(prop_oneof![
                Just(b"put 3\r\nabc\r\n".to_vec()),
                Just(b"put 150\r\n".to_vec()),
                Just(b"reserve\r\n".to_vec()),
                Just(vec![b'y'; 300]),
                Just(b"\r\n".to_vec()),
                Just(b"\r".to_vec()),
                proptest::collection::vec(any::<u8>(), 0..40),
            ], 0..20).prop_map(|parts| parts.concat()),
            cuts in proptest::collection::vec(0usize..2_000, 0..10),
        ) {
            prop_assert_eq!(frames(&input, &cuts), frames(&input, &[]));
        }
    }
}
