//! The contract's conformance kit against the embedded backend.

use std::sync::Arc;

use hourglass_embedded::{Engine, Options, RedbStore};
use hourglass_queue::prelude::*;
use hourglass_queue::SystemWallClock;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_embedded() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let engine = Engine::open(Box::new(store), Options::default(), Arc::new(SystemWallClock)).unwrap();
    let timers = engine.start_timers().unwrap();
    hourglass_queue::kit::run(engine.clone(), "embedded").await;
    engine.close();
    timers.join().unwrap();
}
