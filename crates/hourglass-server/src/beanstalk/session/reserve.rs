//! The reserves: `reserve` and `reserve-with-timeout`, which wait for a job
//! of a watched tube, and `reserve-job`, which takes one by id.

use std::time::{Duration, Instant};

use hourglass_queue::limits::{LEASE_MS_DEFAULT, WAIT_MS_MAX};
use hourglass_queue::{Claimed, SystemWallClock, WallClock};
use tokio::io::{AsyncRead, AsyncWrite};

use super::io::{Flow, Io};
use super::state::Session;
use crate::beanstalk::framer::WAITING_HELD_MAX;
use crate::beanstalk::reply;

/// beanstalkd's safety margin: a `reserve` by a connection whose reserved
/// job's time-to-run ends within it is answered `DEADLINE_SOON`.
const SAFETY_MARGIN_MS: u64 = 1_000;

impl Session {
    /// `reserve`: waits for ever.
    pub(super) async fn reserve<S: AsyncRead + AsyncWrite + Unpin>(&mut self, io: &mut Io<S>) -> Flow {
        self.wait_and_reserve(None, io).await
    }

    /// `reserve-with-timeout`: a negative timeout waits for ever, as in beanstalkd.
    pub(super) async fn reserve_with_timeout<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        seconds: i64,
        io: &mut Io<S>,
    ) -> Flow {
        let wait = u64::try_from(seconds).ok().map(|s| Duration::from_secs(s.min(u64::from(u32::MAX))));
        self.wait_and_reserve(wait, io).await
    }

    /// `reserve-job`: job `id`, whatever its tube, if it is ready.
    pub(super) async fn reserve_job(&mut self, id: u64, out: &mut Vec<u8>) {
        self.worker();
        match self.front.backend.take(id, LEASE_MS_DEFAULT).await {
            Ok(claimed) => self.reserved(claimed, out),
            Err(error) => reply::line(out, reply::refusal(&error)),
        }
    }

    /// Holds a job just claimed, and answers with it.
    fn reserved(&mut self, claimed: Claimed, out: &mut Vec<u8>) {
        self.reserved.insert(&claimed, SystemWallClock.now_ms());
        self.front.job(claimed.id, |job| job.reserves += 1);
        reply::job(out, "RESERVED", claimed.id, claimed.payload.as_bytes());
    }

    /// Waits up to `wait` (for ever if `None`) for a job of a watched tube,
    /// or until a job reserved here nears the end of its time-to-run. A peer
    /// that hangs up while waiting ends the wait and the connection; so does
    /// one found holding [`WAITING_HELD_MAX`] bytes or more sent behind the
    /// reserve while it waits (what arrives is otherwise answered after it,
    /// in order).
    ///
    /// The engine's claim waits at most [`WAIT_MS_MAX`] at a time, so the
    /// wait is a loop of claims, each cut short by the timeout or by the
    /// safety margin of the soonest job held. The first claim does not wait:
    /// only if it finds nothing are the replies so far sent and the tubes
    /// counted as waited on.
    async fn wait_and_reserve<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        wait: Option<Duration>,
        io: &mut Io<S>,
    ) -> Flow {
        self.worker();
        let give_up = wait.map(|wait| Instant::now() + wait);
        let watched = self.watched.clone();
        let tubes: Vec<&str> = watched.iter().map(String::as_str).collect();
        let mut waiting = false;
        let flow = loop {
            // The soonest end of a reservation held here, in its safety margin?
            let now = SystemWallClock.now_ms();
            let soonest = self.reserved.soonest_until_ms(now);
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
                // Waiting: also watch for the peer hanging up, or sending
                // more (answered after this, up to a bound: past it, the
                // connection is closed, as one that never stops sending
                // would otherwise be held in memory whole).
                tokio::select! {
                    claimed = claim => claimed,
                    open = io.fill() => {
                        if !open {
                            break Flow::Close;
                        }
                        if io.framer.held() >= WAITING_HELD_MAX {
                            tracing::debug!(held = io.framer.held(), "a beanstalk connection sent too much behind a waiting reserve: closed");
                            break Flow::Close;
                        }
                        continue;
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
}
