//! The workers: run due jobs, catch their panics, measure their lateness.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use crossbeam_channel::Receiver;

use super::task::{Job, Run};
use super::Shared;

pub(super) fn work(shared: &std::sync::Arc<Shared>, queue: &Receiver<Run>, shard: usize) {
    while let Ok(run) = queue.recv() {
        if shared.wants_room.load(Ordering::SeqCst) && shared.wants_room.swap(false, Ordering::SeqCst) {
            shared.timer.wake();
        }
        execute(shared, run, shard);
        shared.idle.notify();
    }
}

/// Runs one job on the calling thread; `shard` picks the lateness histogram.
pub(super) fn execute(shared: &std::sync::Arc<Shared>, run: Run, shard: usize) {
    shared.counters.started(shard, shared.now_ns().saturating_sub(run.due_ns));
    let outcome = match run.job {
        Job::Once(job) => catch_unwind(AssertUnwindSafe(job)),
        Job::Every(repeat) => {
            let outcome = catch_unwind(AssertUnwindSafe(|| (repeat.job.lock())()));
            repeat.running.store(false, Ordering::Release);
            outcome
        }
        #[cfg(feature = "cron")]
        Job::Calendar { calendar, .. } => {
            let outcome = catch_unwind(AssertUnwindSafe(|| (calendar.job.lock())()));
            calendar.running.store(false, Ordering::Release);
            outcome
        }
        #[cfg(feature = "tokio")]
        Job::Async(future) => {
            let runtime = shared.runtime.as_ref().expect("async jobs are only accepted with a runtime");
            runtime.spawn(async_job::CountPanics { future, shared: shared.clone() });
            Ok(())
        }
    };
    shared.counters.finished(shard, outcome.is_err());
}

#[cfg(feature = "tokio")]
mod async_job {
    use std::future::Future;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use super::Shared;

    /// Counts a panic of an async job as the workers count a sync one's.
    pub(super) struct CountPanics {
        pub(super) future: Pin<Box<dyn Future<Output = ()> + Send + 'static>>,
        pub(super) shared: Arc<Shared>,
    }

    impl Future for CountPanics {
        type Output = ();

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let this = &mut *self;
            match catch_unwind(AssertUnwindSafe(|| this.future.as_mut().poll(cx))) {
                Ok(poll) => poll,
                Err(_) => {
                    this.shared.counters.panicked(this.shared.counters.shared_shard());
                    Poll::Ready(())
                }
            }
        }
    }
}
