//! Integration tests of the embedded backend, compiled into one binary.
mod budgets;
mod conformance;
mod deadline;
mod durability;
mod engine;
mod kill;
mod listing;
mod old_store;
mod schedules;
mod sim;

/// A scheduled task of queue `q` as a store test writes it: the defaults,
/// due at `run_at_ms`.
fn stored_task(id: u64, run_at_ms: u64) -> hourglass_queue::Task {
    hourglass_queue::Task {
        id,
        queue: "q".into(),
        run_at_ms,
        attempt: 0,
        max_attempts: 5,
        priority: hourglass_queue::limits::PRIORITY_DEFAULT,
        lease_ms: None,
        key: None,
        every_ms: None,
        expires_at_ms: None,
        dead_reason: hourglass_queue::DeadReason::Attempts,
        last_error: None,
        http: None,
        state: hourglass_queue::TaskState::Scheduled,
        created_ms: 1,
    }
}
