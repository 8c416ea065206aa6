//! Each frame of the connection to the function that answers it: a line is
//! parsed, counted for `stats`, and handed to its command's function.

use tokio::io::{AsyncRead, AsyncWrite};

use super::io::{Flow, Io};
use super::producer;
use super::state::{PendingPut, Session};
use crate::beanstalk::command::{parse, Command, Refusal};
use crate::beanstalk::counter::Counter;
use crate::beanstalk::framer::Frame;
use crate::beanstalk::reply;

/// Answers one frame; [`Flow::Close`] ends the connection.
pub(super) async fn frame<S: AsyncRead + AsyncWrite + Unpin>(
    session: &mut Session,
    frame: Frame,
    io: &mut Io<S>,
) -> Flow {
    match frame {
        Frame::Malformed => reply::line(&mut io.out, "BAD_FORMAT"),
        Frame::Skipped => reply::line(&mut io.out, "JOB_TOO_BIG"),
        Frame::Body(body) => session.put_body(body, &mut io.out).await,
        Frame::Line(line) => match parse(&line, session.front.options.job_bytes_max) {
            Ok(command) => return self::command(session, command, io).await,
            Err(Refusal::BadFormat) => reply::line(&mut io.out, "BAD_FORMAT"),
            Err(Refusal::UnknownCommand) => reply::line(&mut io.out, "UNKNOWN_COMMAND"),
        },
    }
    Flow::Go
}

/// Counts `command` and runs it. Only the reserves, which wait and may
/// find the peer gone, and `quit` decide whether the connection goes on.
async fn command<S: AsyncRead + AsyncWrite + Unpin>(session: &mut Session, command: Command, io: &mut Io<S>) -> Flow {
    if let Some(counter) = Counter::of(&command) {
        session.front.counters.add(counter);
    }
    let out = &mut io.out;
    match command {
        Command::Put { priority, delay_s, ttr_s, bytes } => {
            session.put(PendingPut { priority, delay_s, ttr_s }, bytes, &mut io.framer);
        }
        Command::PutTooBig { bytes } => producer::put_too_big(bytes, &mut io.framer),
        Command::Reserve => return session.reserve(io).await,
        Command::ReserveWithTimeout(seconds) => return session.reserve_with_timeout(seconds, io).await,
        Command::ReserveJob(id) => session.reserve_job(id, out).await,
        Command::Delete(id) => session.delete(id, out).await,
        Command::Release { id, priority, delay_s } => session.release(id, priority, delay_s, out).await,
        Command::Bury { id, priority } => session.bury(id, priority, out).await,
        Command::Touch(id) => session.touch(id, out).await,
        Command::Use(tube) => session.use_tube(tube, out),
        Command::Watch(tube) => session.watch(tube, out),
        Command::Ignore(tube) => session.ignore(&tube, out),
        Command::ListTubes => session.list_tubes(out).await,
        Command::ListTubeUsed => session.list_tube_used(out),
        Command::ListTubesWatched => session.list_tubes_watched(out),
        Command::PauseTube { tube, delay_s } => session.pause_tube(&tube, delay_s, out).await,
        Command::Peek(id) => session.peek(id, out).await,
        Command::PeekReady => session.peek_ready(out).await,
        Command::PeekDelayed => session.peek_delayed(out).await,
        Command::PeekBuried => session.peek_buried(out).await,
        Command::Kick(bound) => session.kick(bound, out).await,
        Command::KickJob(id) => session.kick_job(id, out).await,
        Command::Stats => session.stats(out).await,
        Command::StatsJob(id) => session.stats_job(id, out).await,
        Command::StatsTube(tube) => session.stats_tube(&tube, out).await,
        Command::Quit => return Flow::Close,
    }
    Flow::Go
}
