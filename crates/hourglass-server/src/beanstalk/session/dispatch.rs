//! Each frame of the connection to the function that answers it: a line is
//! parsed, counted for `stats`, and handed to its command's function.

use tokio::io::{AsyncRead, AsyncWrite};

use super::io::{Flow, Io};
use super::producer;
use super::state::{PendingPut, Session};
use hourglass_queue::Status;

use crate::access::Permission;
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
        // A put's permission is the used tube's when its body arrives.
        Frame::Body(body) if !session.front.may(Permission::Enqueue, &session.used) => {
            session.put = None;
            drop(body);
            reply::line(&mut io.out, UNAVAILABLE);
        }
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
    if let Err(reply) = allowed(session, &command).await {
        reply::line(out, reply);
        return Flow::Go;
    }
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

/// The reply to a command the front's token may not run, when the command
/// has no `NOT_FOUND` of its own (`put`, the reserves, `kick`, `stats`).
const UNAVAILABLE: &str = "UNKNOWN_COMMAND";

/// Whether the front's token (under `--tokens`, `--beanstalk-token`'s) may
/// run `command`, else the reply: `NOT_FOUND` for a job or tube it may not
/// touch (as if not there: it tells nothing of other teams' jobs), else
/// [`UNAVAILABLE`]. `put` is checked when its body arrives; `list-tubes`
/// shows the tubes it reads. Every command is here, so that one added
/// without its permission does not compile.
///
/// What a command does decides what it needs, as over HTTP: acting on a
/// job this connection reserved is `consume`; `delete` of any other job
/// cancels it and `reserve-job` of one not ready takes a buried or delayed
/// job, both `manage`.
async fn allowed(session: &Session, command: &Command) -> Result<(), &'static str> {
    let Some(grant) = session.front.grant() else { return Ok(()) };
    let tube = |permission, tube: &str, refusal| if grant.allows(permission, tube) { Ok(()) } else { Err(refusal) };
    let job = |id: u64, need: fn(Found) -> Permission| {
        let grant = grant.clone();
        // A job reserved here: its tube is known, no look-up.
        let held = session.reserved.tube_of(id).map(str::to_owned);
        async move {
            // Nor any for a token that holds what the job could need everywhere.
            let found = std::iter::once(Found::Held).chain(Status::ALL.into_iter().map(Found::Elsewhere));
            if found.into_iter().all(|found| grant.everywhere(need(found))) {
                return Ok(());
            }
            let (queue, found) = match held {
                Some(tube) => (tube, Found::Held),
                None => match session.front.backend.get(id).await {
                    Ok(info) => (info.task.queue.to_string(), Found::Elsewhere(info.status)),
                    // Not found, or the store out of reach: as the command itself would answer.
                    Err(error) => return Err(reply::refusal(&error)),
                },
            };
            if grant.allows(need(found), &queue) {
                Ok(())
            } else {
                Err("NOT_FOUND")
            }
        }
    };
    let consume = |_| Permission::Consume;
    match command {
        Command::Put { .. }
        | Command::PutTooBig { .. }
        | Command::Use(_)
        | Command::Watch(_)
        | Command::Ignore(_)
        | Command::ListTubes
        | Command::ListTubeUsed
        | Command::ListTubesWatched
        | Command::Quit => Ok(()),
        // A reserve waits on every tube watched: it needs consume on each.
        Command::Reserve | Command::ReserveWithTimeout(_) => {
            session.watched.iter().try_for_each(|watched| tube(Permission::Consume, watched, UNAVAILABLE))
        }
        // Reserved here, it is acked; else it is cancelled.
        Command::Delete(id) => {
            job(*id, |found| if found == Found::Held { Permission::Consume } else { Permission::Manage }).await
        }
        // A ready job is claimed; a buried or delayed one is taken out of turn.
        Command::ReserveJob(id) => {
            job(
                *id,
                |found| if found == Found::Elsewhere(Status::Due) { Permission::Consume } else { Permission::Manage },
            )
            .await
        }
        Command::Release { id, .. } | Command::Bury { id, .. } | Command::Touch(id) => job(*id, consume).await,
        Command::Peek(id) | Command::StatsJob(id) => job(*id, |_| Permission::Read).await,
        Command::KickJob(id) => job(*id, |_| Permission::Manage).await,
        Command::PeekReady | Command::PeekDelayed | Command::PeekBuried => {
            tube(Permission::Read, &session.used, "NOT_FOUND")
        }
        Command::Kick(_) => tube(Permission::Manage, &session.used, UNAVAILABLE),
        Command::StatsTube(name) => tube(Permission::Read, name, "NOT_FOUND"),
        Command::PauseTube { tube: name, .. } => tube(Permission::Manage, name, "NOT_FOUND"),
        // The server's figures tell of every tube.
        Command::Stats if grant.everywhere(Permission::Read) => Ok(()),
        Command::Stats => Err(UNAVAILABLE),
    }
}

/// Where a command's job was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Reserved by this connection.
    Held,
    /// In the store, in this state.
    Elsewhere(Status),
}
