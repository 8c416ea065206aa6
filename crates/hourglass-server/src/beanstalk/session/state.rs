//! One connection's state: the tube it uses, the tubes it watches, the jobs
//! it holds, a `put` whose body is on its way, and whether it has produced
//! or worked (for `stats`' `current-producers` and `current-workers`). The
//! front's per-tube counts follow the used and watched tubes from the
//! connection's first line to its close.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use hourglass_queue::Nack;

use super::held::Reserved;
use crate::beanstalk::front::Front;

/// What a `put`'s line said, kept while its body is read.
#[derive(Debug, Clone, Copy)]
pub(super) struct PendingPut {
    pub(super) priority: u32,
    pub(super) delay_s: u32,
    pub(super) ttr_s: u32,
}

/// One connection's state.
pub(super) struct Session {
    pub(super) front: Arc<Front>,
    /// The tube `put` puts into.
    pub(super) used: String,
    /// The tubes `reserve` takes from, in beanstalkd's order.
    pub(super) watched: Vec<String>,
    pub(super) reserved: Reserved,
    /// A `put` whose body is being read.
    pub(super) put: Option<PendingPut>,
    producer: bool,
    worker: bool,
}

impl Session {
    /// A new connection, using and watching `default`.
    pub(super) fn new(front: Arc<Front>) -> Session {
        front.tube_ref("default", |refs| {
            refs.using += 1;
            refs.watching += 1;
        });
        Session {
            front,
            used: "default".into(),
            watched: vec!["default".into()],
            reserved: Reserved::default(),
            put: None,
            producer: false,
            worker: false,
        }
    }

    /// This connection has put a job: it counts as a producer from now on.
    pub(super) fn producer(&mut self) {
        if !self.producer {
            self.producer = true;
            self.front.producers.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// This connection has reserved: it counts as a worker from now on.
    pub(super) fn worker(&mut self) {
        if !self.worker {
            self.worker = true;
            self.front.workers.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The connection closed: its reserved jobs are ready again at once, as
    /// in beanstalkd, and it no longer counts in its tubes.
    pub(super) async fn close(mut self) {
        for (id, held) in self.reserved.take_all() {
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
