//! One connection: the tube it uses, those it watches, the jobs it has
//! reserved, and each command run on the backend. A connection that closes
//! gives its reserved jobs back at once, as beanstalkd does.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_queue::limits::{ATTEMPTS_UNLIMITED, LEASE_MS_DEFAULT, LEASE_MS_MAX, LIST_MAX, WAIT_MS_MAX};
use hourglass_queue::{
    Claimed, Cursor, Lease, ListRequest, Nack, NewTask, Pause, QueueError, RunAt, Status, SystemWallClock, TaskInfo,
    WallClock,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};

use super::command::{parse, Command, Refusal};
use super::counter::Counter;
use super::framer::{Frame, Framer, READ_BYTES};
use super::front::{Front, WATCHED_MAX};
use super::reply;
use super::stats;

/// beanstalkd's safety margin: a `reserve` by a connection whose reserved
/// job's time-to-run ends within it is answered `DEADLINE_SOON`.
const SAFETY_MARGIN_MS: u64 = 1_000;

/// A job this connection reserved.
#[derive(Debug, Clone)]
struct Held {
    lease: Lease,
    until_ms: u64,
    ttr_ms: u64,
    tube: Arc<str>,
}

pub(super) struct Session {
    front: Arc<Front>,
    used: String,
    watched: Vec<String>,
    reserved: HashMap<u64, Held>,
    /// A `put` whose body is being read.
    put: Option<(u32, u32, u32)>,
    producer: bool,
    worker: bool,
}

/// The two halves of the connection and its framing.
struct Io<S> {
    read: ReadHalf<S>,
    write: WriteHalf<S>,
    framer: Framer,
    out: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Io<S> {
    /// Reads more bytes into the framer; `false` once the peer has closed.
    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; READ_BYTES];
        match self.read.read(&mut chunk).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.framer.push(&chunk[..n]);
                true
            }
        }
    }

    async fn flush(&mut self) -> bool {
        if self.out.is_empty() {
            return true;
        }
        let sent = self.write.write_all(&self.out).await.is_ok();
        self.out.clear();
        sent
    }
}

enum Flow {
    Go,
    Close,
}

impl Session {
    pub(super) fn new(front: Arc<Front>) -> Session {
        front.tube_ref("default", |refs| {
            refs.using += 1;
            refs.watching += 1;
        });
        Session {
            front,
            used: "default".into(),
            watched: vec!["default".into()],
            reserved: HashMap::new(),
            put: None,
            producer: false,
            worker: false,
        }
    }

    pub(super) async fn run<S: AsyncRead + AsyncWrite + Unpin + Send>(mut self, stream: S) {
        let (read, write) = tokio::io::split(stream);
        let mut io = Io { read, write, framer: Framer::default(), out: Vec::with_capacity(READ_BYTES) };
        'connection: loop {
            while let Some(frame) = io.framer.next() {
                if let Flow::Close = self.frame(frame, &mut io).await {
                    break 'connection;
                }
            }
            if !io.flush().await || !io.fill().await {
                break;
            }
        }
        let _ = io.flush().await;
        self.close().await;
    }

    async fn frame<S: AsyncRead + AsyncWrite + Unpin>(&mut self, frame: Frame, io: &mut Io<S>) -> Flow {
        match frame {
            Frame::Malformed => reply::line(&mut io.out, "BAD_FORMAT"),
            Frame::Skipped => reply::line(&mut io.out, "JOB_TOO_BIG"),
            Frame::Body(body) => {
                let (priority, delay_s, ttr_s) = self.put.take().expect("a body follows a put");
                self.put(priority, delay_s, ttr_s, body, &mut io.out).await;
            }
            Frame::Line(line) => match parse(&line, self.front.options.job_bytes_max) {
                Ok(Command::Quit) => return Flow::Close,
                Ok(command) => return self.command(command, io).await,
                Err(Refusal::BadFormat) => reply::line(&mut io.out, "BAD_FORMAT"),
                Err(Refusal::UnknownCommand) => reply::line(&mut io.out, "UNKNOWN_COMMAND"),
            },
        }
        Flow::Go
    }

    async fn command<S: AsyncRead + AsyncWrite + Unpin>(&mut self, command: Command, io: &mut Io<S>) -> Flow {
        if let Some(counter) = Counter::of(&command) {
            self.front.counters.add(counter);
        }
        let front = self.front.clone();
        let backend = &front.backend;
        let out = &mut io.out;
        match command {
            Command::Put { priority, delay_s, ttr_s, bytes } => {
                self.put = Some((priority, delay_s, ttr_s));
                io.framer.body(bytes as usize);
            }
            Command::PutTooBig { bytes } => {
                io.framer.skip(u64::from(bytes));
            }
            Command::Use(tube) => {
                front.tube_ref(&self.used, |refs| refs.using -= 1);
                front.tube_ref(&tube, |refs| refs.using += 1);
                reply::line(out, &format!("USING {tube}"));
                self.used = tube;
            }
            Command::Reserve => {
                return self.reserve(None, io).await;
            }
            Command::ReserveWithTimeout(seconds) => {
                let wait = u64::try_from(seconds).ok().map(|s| Duration::from_secs(s.min(u64::from(u32::MAX))));
                return self.reserve(wait, io).await;
            }
            Command::ReserveJob(id) => {
                self.worker();
                match backend.take(id, LEASE_MS_DEFAULT).await {
                    Ok(claimed) => self.reserved(claimed, out),
                    Err(error) => reply::line(out, reply::refusal(&error)),
                }
            }
            Command::Delete(id) => {
                let deleted = match self.holding(id) {
                    Some(held) => backend.ack(id, held.lease).await.map(|()| held.tube),
                    None => Err(QueueError::StaleLease(id)),
                };
                let deleted = match deleted {
                    Ok(tube) => Ok(tube),
                    // Not reserved here (or no longer): any job not reserved may be deleted.
                    Err(QueueError::StaleLease(_)) => match backend.get(id).await {
                        Ok(info) => backend.cancel_unleased(id).await.map(|()| info.task.queue),
                        Err(error) => Err(error),
                    },
                    Err(error) => Err(error),
                };
                self.reserved.remove(&id);
                match deleted {
                    Ok(tube) => {
                        front.forget_job(id);
                        front.tube_ref(&tube, |refs| refs.deletes += 1);
                        reply::line(out, "DELETED");
                    }
                    Err(error) => reply::line(out, reply::refusal(&error)),
                }
            }
            Command::Release { id, priority, delay_s } => {
                let nack =
                    Nack { delay_ms: Some(u64::from(delay_s) * 1_000), priority: Some(priority), ..Nack::default() };
                match self.give_back(id, nack).await {
                    Ok(_) => {
                        front.job(id, |job| {
                            job.releases += 1;
                            job.delay_s = delay_s;
                        });
                        reply::line(out, "RELEASED");
                    }
                    Err(error) => reply::line(out, reply::refusal(&error)),
                }
            }
            Command::Bury { id, priority } => {
                match self.give_back(id, Nack { dead: true, priority: Some(priority), ..Nack::default() }).await {
                    Ok(_) => {
                        front.job(id, |job| job.buries += 1);
                        reply::line(out, "BURIED");
                    }
                    Err(error) => reply::line(out, reply::refusal(&error)),
                }
            }
            Command::Touch(id) => {
                let touched = match self.holding(id) {
                    Some(held) => backend.extend(id, held.lease, held.ttr_ms).await,
                    None => Err(QueueError::NotFound(id)),
                };
                match touched {
                    Ok(until_ms) => {
                        if let Some(held) = self.reserved.get_mut(&id) {
                            held.until_ms = until_ms;
                        }
                        reply::line(out, "TOUCHED");
                    }
                    Err(error) => {
                        self.reserved.remove(&id);
                        reply::line(out, reply::refusal(&error));
                    }
                }
            }
            Command::Watch(tube) => {
                if !self.watched.contains(&tube) {
                    if self.watched.len() >= WATCHED_MAX {
                        reply::line(out, "OUT_OF_MEMORY");
                        return Flow::Go;
                    }
                    front.tube_ref(&tube, |refs| refs.watching += 1);
                    self.watched.push(tube);
                }
                reply::line(out, &format!("WATCHING {}", self.watched.len()));
            }
            Command::Ignore(tube) => {
                match self.watched.iter().position(|watched| *watched == tube) {
                    Some(_) if self.watched.len() < 2 => {
                        reply::line(out, "NOT_IGNORED");
                        return Flow::Go;
                    }
                    Some(at) => {
                        // The last watched takes its place, as in beanstalkd's list.
                        self.watched.swap_remove(at);
                        front.tube_ref(&tube, |refs| refs.watching -= 1);
                    }
                    None => {}
                }
                reply::line(out, &format!("WATCHING {}", self.watched.len()));
            }
            Command::Peek(id) => match backend.get(id).await {
                Ok(info) => reply::job(out, "FOUND", id, info.payload.as_bytes()),
                Err(error) => reply::line(out, reply::refusal(&error)),
            },
            Command::PeekReady => {
                let found = self.first(Status::Due).await;
                self.found(found, out);
            }
            Command::PeekDelayed => {
                let found = self.soonest_delayed(1).await.map(|mut soonest| soonest.pop());
                let found = match found {
                    Ok(Some(id)) => backend.get(id).await.map(Some),
                    Ok(None) => Ok(None),
                    Err(error) => Err(error),
                };
                self.found(found, out);
            }
            Command::PeekBuried => {
                let found = self.first(Status::Dead).await;
                self.found(found, out);
            }
            Command::Kick(bound) => match self.kick(u64::from(bound)).await {
                Ok(kicked) => reply::line(out, &format!("KICKED {kicked}")),
                Err(error) => reply::line(out, reply::refusal(&error)),
            },
            Command::KickJob(id) => {
                let kicked = match backend.get(id).await {
                    Ok(info) => self.kick_one(&info).await,
                    Err(error) => Err(error),
                };
                match kicked {
                    Ok(true) => reply::line(out, "KICKED"),
                    Ok(false) => reply::line(out, "NOT_FOUND"),
                    Err(error) => reply::line(out, reply::refusal(&error)),
                }
            }
            Command::StatsJob(id) => match backend.get(id).await {
                Ok(info) => reply::yaml(out, &stats::job(&front, &info)),
                Err(error) => {
                    if matches!(error, QueueError::NotFound(_)) {
                        front.forget_job(id);
                    }
                    reply::line(out, reply::refusal(&error));
                }
            },
            Command::StatsTube(tube) => match stats::tube(&front, &tube).await {
                Some(document) => reply::yaml(out, &document),
                None => reply::line(out, "NOT_FOUND"),
            },
            Command::Stats => {
                let document = stats::server(&front).await;
                reply::yaml(out, &document);
            }
            Command::ListTubes => {
                let tubes = self.front.tubes().await;
                reply::yaml(out, &reply::list(tubes.iter().map(String::as_str)));
            }
            Command::ListTubeUsed => {
                reply::line(out, &format!("USING {}", self.used));
            }
            Command::ListTubesWatched => {
                reply::yaml(out, &reply::list(self.watched.iter().map(String::as_str)));
            }
            Command::PauseTube { tube, delay_s } => {
                if !self.front.tubes().await.contains(&tube) {
                    reply::line(out, "NOT_FOUND");
                    return Flow::Go;
                }
                // The engine's pause, ending by itself (across restarts too);
                // beanstalkd's 0 pauses for a moment only.
                let until_ms = SystemWallClock.now_ms() + u64::from(delay_s) * 1_000;
                match backend.pause_queue(&tube, Pause::Until(until_ms)).await {
                    Ok(_) => {
                        front.tube_ref(&tube, |refs| {
                            refs.pauses += 1;
                            refs.pause = Some((delay_s, until_ms));
                        });
                        reply::line(out, "PAUSED");
                    }
                    Err(error) => reply::line(out, reply::refusal(&error)),
                }
            }
            Command::Quit => return Flow::Close,
        }
        Flow::Go
    }

    /// The body of a `put` arrived: enqueued, and answered once durable.
    async fn put(&mut self, priority: u32, delay_s: u32, ttr_s: u32, mut body: Vec<u8>, out: &mut Vec<u8>) {
        if !body.ends_with(b"\r\n") {
            reply::line(out, "EXPECTED_CRLF");
            return;
        }
        body.truncate(body.len() - 2);
        if self.front.draining.load(Ordering::SeqCst) {
            reply::line(out, "DRAINING");
            return;
        }
        if !self.producer {
            self.producer = true;
            self.front.producers.fetch_add(1, Ordering::Relaxed);
        }
        // The engine keeps text: a body that is not UTF-8 is refused.
        let Ok(payload) = String::from_utf8(body) else {
            reply::line(out, "BAD_FORMAT");
            return;
        };
        // beanstalkd's shortest time-to-run is a second; the engine's longest lease bounds it.
        let lease_ms = (u64::from(ttr_s.max(1)) * 1_000).min(LEASE_MS_MAX);
        let new = NewTask {
            priority: Some(priority),
            lease_ms: Some(lease_ms),
            max_attempts: Some(ATTEMPTS_UNLIMITED),
            ..NewTask::new(payload, RunAt::Delay(u64::from(delay_s) * 1_000))
        };
        match self.front.backend.enqueue(&self.used, new).await {
            Ok(enqueued) => reply::line(out, &format!("INSERTED {}", enqueued.id)),
            Err(error) => reply::line(out, reply::refusal(&error)),
        }
    }

    fn worker(&mut self) {
        if !self.worker {
            self.worker = true;
            self.front.workers.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A job reserved here and not yet past its time-to-run.
    fn holding(&mut self, id: u64) -> Option<Held> {
        let now = SystemWallClock.now_ms();
        self.reserved.retain(|_, held| held.until_ms > now);
        self.reserved.get(&id).cloned()
    }

    async fn give_back(&mut self, id: u64, nack: Nack) -> Result<TaskInfo, QueueError> {
        let held = self.holding(id).ok_or(QueueError::NotFound(id))?;
        self.reserved.remove(&id);
        self.front.backend.nack(id, held.lease, nack).await
    }

    fn reserved(&mut self, claimed: Claimed, out: &mut Vec<u8>) {
        let now = SystemWallClock.now_ms();
        let held = Held {
            lease: claimed.lease,
            until_ms: claimed.lease_until_ms,
            ttr_ms: claimed.lease_until_ms.saturating_sub(now).max(1),
            tube: claimed.queue.clone(),
        };
        self.reserved.insert(claimed.id, held);
        self.front.job(claimed.id, |job| job.reserves += 1);
        reply::job(out, "RESERVED", claimed.id, claimed.payload.as_bytes());
    }

    /// `reserve` and `reserve-with-timeout`: waits up to `wait` (for ever
    /// if `None`) for a job of a watched tube, or until a job reserved here
    /// nears the end of its time-to-run. A peer that hangs up while waiting
    /// ends the wait and the connection.
    async fn reserve<S: AsyncRead + AsyncWrite + Unpin>(&mut self, wait: Option<Duration>, io: &mut Io<S>) -> Flow {
        self.worker();
        let give_up = wait.map(|wait| Instant::now() + wait);
        let watched = self.watched.clone();
        let tubes: Vec<&str> = watched.iter().map(String::as_str).collect();
        let mut waiting = false;
        let flow = loop {
            // The soonest end of a reservation held here, in its safety margin?
            let now = SystemWallClock.now_ms();
            self.reserved.retain(|_, held| held.until_ms > now);
            let soonest = self.reserved.values().map(|held| held.until_ms).min();
            // In the margin, a job ready now is still handed out (as beanstalkd does); none is waited for.
            let deadline_soon = soonest.is_some_and(|until| until <= now + SAFETY_MARGIN_MS);
            let mut slice_ms = if waiting && !deadline_soon { WAIT_MS_MAX } else { 0 };
            if let Some(give_up) = give_up {
                slice_ms = slice_ms.min(give_up.saturating_duration_since(Instant::now()).as_millis() as u64);
            }
            if let Some(until) = soonest {
                slice_ms = slice_ms.min(until.saturating_sub(SAFETY_MARGIN_MS + now));
            }
            let claim = self.front.backend.claim_any(&tubes, LEASE_MS_DEFAULT, slice_ms);
            let claimed = if waiting {
                // Waiting: also watch for the peer hanging up (or sending more).
                tokio::select! {
                    claimed = claim => claimed,
                    open = io.fill() => {
                        if open { continue } else { break Flow::Close }
                    }
                }
            } else {
                claim.await
            };
            match claimed {
                Ok(Some(claimed)) => {
                    self.reserved(claimed, &mut io.out);
                    break Flow::Go;
                }
                Ok(None) if deadline_soon => {
                    reply::line(&mut io.out, "DEADLINE_SOON");
                    break Flow::Go;
                }
                Ok(None) if give_up.is_some_and(|at| Instant::now() >= at) => {
                    reply::line(&mut io.out, "TIMED_OUT");
                    break Flow::Go;
                }
                Ok(None) => {
                    if !waiting {
                        waiting = true;
                        for tube in &tubes {
                            self.front.tube_ref(tube, |refs| refs.waiting += 1);
                        }
                        // What came before this reserve is answered before it waits.
                        if !io.flush().await {
                            break Flow::Close;
                        }
                    }
                }
                Err(error) => {
                    reply::line(&mut io.out, reply::refusal(&error));
                    break Flow::Go;
                }
            }
        };
        if waiting {
            for tube in &tubes {
                self.front.tube_ref(tube, |refs| refs.waiting -= 1);
            }
        }
        flow
    }

    fn found(&self, found: Result<Option<TaskInfo>, QueueError>, out: &mut Vec<u8>) {
        match found {
            Ok(Some(info)) => reply::job(out, "FOUND", info.task.id, info.payload.as_bytes()),
            Ok(None) => reply::line(out, "NOT_FOUND"),
            Err(error) => reply::line(out, reply::refusal(&error)),
        }
    }

    /// The first task of the used tube in `status`, in listing order: the
    /// next to claim for due ones, the lowest id for dead ones.
    async fn first(&self, status: Status) -> Result<Option<TaskInfo>, QueueError> {
        let request = ListRequest { status: Some(status), after: None, limit: 1 };
        Ok(self.front.backend.list(&self.used, request).await?.tasks.pop())
    }

    /// Up to `n` delayed tasks of the used tube, the soonest due first,
    /// found by paging through the tube (the engine keeps delayed tasks in
    /// its wheel, not in order per queue).
    async fn soonest_delayed(&self, n: u64) -> Result<Vec<u64>, QueueError> {
        let mut soonest = std::collections::BinaryHeap::new();
        let mut after: Option<Cursor> = None;
        loop {
            let request = ListRequest { status: Some(Status::Scheduled), after, limit: LIST_MAX };
            let page = self.front.backend.list(&self.used, request).await?;
            for task in &page.tasks {
                soonest.push((task.task.run_at_ms, task.task.id));
                if soonest.len() as u64 > n {
                    soonest.pop();
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        // Popped in reverse order of the heap (latest first): reversed, the soonest comes last.
        let mut ids: Vec<u64> = soonest.into_sorted_vec().into_iter().map(|(_, id)| id).collect();
        ids.reverse();
        Ok(ids)
    }

    /// `kick`: up to `bound` buried jobs back to ready, or if there are none,
    /// up to `bound` delayed jobs, the soonest first.
    async fn kick(&self, bound: u64) -> Result<u64, QueueError> {
        let backend = &self.front.backend;
        let mut kicked = 0;
        while kicked < bound {
            let limit = (bound - kicked).min(LIST_MAX as u64) as usize;
            let dead = backend.list(&self.used, ListRequest { status: Some(Status::Dead), after: None, limit }).await?;
            if dead.tasks.is_empty() {
                break;
            }
            for task in &dead.tasks {
                if self.kick_one(task).await? {
                    kicked += 1;
                }
            }
        }
        if kicked > 0 || bound == 0 {
            return Ok(kicked);
        }
        let mut delayed = self.soonest_delayed(bound).await?;
        while let Some(id) = delayed.pop() {
            if let Ok(info) = backend.get(id).await {
                if self.kick_one(&info).await? {
                    kicked += 1;
                }
            }
        }
        Ok(kicked)
    }

    /// A buried job is retried, a delayed one made ready; `false` for any other.
    async fn kick_one(&self, info: &TaskInfo) -> Result<bool, QueueError> {
        let backend = &self.front.backend;
        let id = info.task.id;
        let kicked = match info.status {
            Status::Dead => backend.retry(id).await,
            Status::Scheduled => backend.reschedule(id, RunAt::At(SystemWallClock.now_ms())).await,
            Status::Due | Status::Leased => return Ok(false),
        };
        match kicked {
            Ok(_) => {
                self.front.job(id, |job| job.kicks += 1);
                Ok(true)
            }
            Err(QueueError::NotFound(_) | QueueError::Conflict(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// The connection closed: its reserved jobs are ready again at once.
    async fn close(mut self) {
        for (id, held) in std::mem::take(&mut self.reserved) {
            if self.front.backend.nack(id, held.lease, Nack::after(0)).await.is_ok() {
                self.front.job(id, |job| job.dropped += 1);
            }
        }
        let front = &self.front;
        front.tube_ref(&self.used, |refs| refs.using -= 1);
        for tube in &self.watched {
            front.tube_ref(tube, |refs| refs.watching -= 1);
        }
        if self.producer {
            front.producers.fetch_sub(1, Ordering::Relaxed);
        }
        if self.worker {
            front.workers.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
