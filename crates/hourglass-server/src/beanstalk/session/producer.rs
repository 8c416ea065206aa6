//! What a producer sends: `put`, a line and then the job's body. The body
//! is enqueued once it has all arrived, and answered once durable.

use std::sync::atomic::Ordering;

use hourglass_queue::limits::{ATTEMPTS_UNLIMITED, LEASE_MS_MAX};
use hourglass_queue::{NewTask, RunAt};

use super::state::{PendingPut, Session};
use crate::beanstalk::framer::Framer;
use crate::beanstalk::reply;

/// `put` of a body larger than the front's limit: its bytes are skipped,
/// then answered `JOB_TOO_BIG`.
pub(super) fn put_too_big(bytes: u32, framer: &mut Framer) {
    framer.skip(u64::from(bytes));
}

impl Session {
    /// `put`'s line: `bytes` of body are read next.
    pub(super) fn put(&mut self, put: PendingPut, bytes: u32, framer: &mut Framer) {
        self.put = Some(put);
        framer.body(bytes as usize);
    }

    /// The body of a `put` arrived: enqueued, and answered once durable.
    pub(super) async fn put_body(&mut self, mut body: Vec<u8>, out: &mut Vec<u8>) {
        let PendingPut { priority, delay_s, ttr_s } = self.put.take().expect("a body follows a put");
        if !body.ends_with(b"\r\n") {
            reply::line(out, "EXPECTED_CRLF");
            return;
        }
        body.truncate(body.len() - 2);
        if self.front.draining.load(Ordering::SeqCst) {
            reply::line(out, "DRAINING");
            return;
        }
        self.producer();
        // Any bytes, kept as they are, as beanstalkd keeps them.
        let payload = body;
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
}
