//! The contract's conformance kit against the embedded backend.

use std::sync::Arc;

use hourglass_embedded::{Engine, Options, RedbStore};
use hourglass_queue::prelude::*;
use hourglass_queue::SystemWallClock;

use crate::deadline;

/// How long the whole kit may take: it waits for claims and leases by the clock.
const KIT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_embedded() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let engine = Engine::open(Box::new(store), Options::default(), Arc::new(SystemWallClock)).unwrap();
    let timers = engine.start_timers().unwrap();
    // The kit's waits are its own; the whole run has a deadline of its own.
    let run = tokio::time::timeout(KIT_DEADLINE, hourglass_queue::kit::run(engine.clone(), "embedded")).await;
    engine.close();
    deadline::stop("the timer thread", timers);
    run.unwrap_or_else(|_| panic!("the conformance kit did not finish within {KIT_DEADLINE:?}"));
}
