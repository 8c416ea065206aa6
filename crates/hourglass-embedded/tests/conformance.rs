//! The contract's conformance kit against the embedded backend.

use std::sync::Arc;

use hourglass_embedded::{Engine, Options, RedbStore};
use hourglass_queue::prelude::*;
use hourglass_queue::SystemWallClock;

use crate::deadline;

/// How long the whole kit may take: it waits for claims and leases by the clock.
const KIT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

/// Runs `kit` on an engine of its own, with its timer thread.
async fn on_an_engine<F: std::future::Future<Output = ()>>(kit: impl FnOnce(Arc<dyn Backend>) -> F) {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let engine = Engine::open(Box::new(store), Options::default(), Arc::new(SystemWallClock)).unwrap();
    let timers = engine.start_timers().unwrap();
    // The kit's waits are its own; the whole run has a deadline of its own.
    let run = tokio::time::timeout(KIT_DEADLINE, kit(engine.clone())).await;
    engine.close();
    deadline::stop("the timer thread", timers);
    run.unwrap_or_else(|_| panic!("the conformance kit did not finish within {KIT_DEADLINE:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_embedded() {
    on_an_engine(|engine| async move { hourglass_queue::kit::run(engine, "embedded").await }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_embedded_push_and_flow() {
    on_an_engine(|engine| async move { hourglass_queue::kit::push::run(engine, "embedded").await }).await;
}
