//! The simulator's push delivery and flow control: tasks with targets of
//! their own, [`QUEUE`]'s settings put and read, and push claims; what must
//! hold of them across the crash.

use std::sync::Arc;

use hourglass_queue::prelude::*;
use hourglass_queue::{Claim, Claimed, Flow, HttpTarget, PushTarget, QueueSettings};
use rand::rngs::StdRng;
use rand::Rng;

use super::ledger::Ledger;
use super::world::{payload_number, World, QUEUE};

/// Where task `n` is sent, when it has a target of its own: its number in
/// the URL, so that a delivery shows the target came back with its task.
pub(super) fn target_of(n: u64) -> HttpTarget {
    HttpTarget {
        headers: vec![("X-Payload".into(), n.to_string().into())],
        ..HttpTarget::post(format!("https://receiver.example/{n}"))
    }
}

/// [`QUEUE`]'s push target, when it has one.
const QUEUE_URL: &str = "https://queue.example/";

/// Settings at random: a push target or none, a cap or none.
fn settings(rng: &mut StdRng) -> QueueSettings {
    let push = rng.random_bool(0.5).then(|| Arc::new(PushTarget::new(HttpTarget::post(QUEUE_URL))));
    let max_in_flight = rng.random_bool(0.5).then(|| rng.random_range(1..4));
    QueueSettings { push, flow: Flow { max_in_flight, ..Flow::default() } }
}

/// Checks a claimed task against what its enqueue sent: a push claim hands
/// out only tasks of push, each with its own target or the queue's; a pull
/// claim never hands out a task with a target of its own.
pub(super) fn check_claimed(ledger: &Ledger, task: &Claimed, push: bool) {
    let n = payload_number(&task.payload);
    assert!(ledger.sent.contains(&n), "delivered payload {n}, which no client sent");
    assert!(!ledger.failed.contains(&n), "delivered payload {n}, whose enqueue failed");
    let aimed = ledger.aimed.contains(&n);
    match (&task.target, push) {
        (None, false) => assert!(!aimed, "a pull claim handed out payload {n}, which has a target of its own"),
        (Some(target), true) if aimed => assert_eq!(target.http, target_of(n), "payload {n}'s own target"),
        (Some(target), true) => assert_eq!(&*target.http.url, QUEUE_URL, "payload {n}: the queue's target"),
        (target, push) => {
            panic!("payload {n}: a {} claim handed it out with target {target:?}", ["pull", "push"][push as usize])
        }
    }
}

impl World {
    /// Puts [`QUEUE`]'s settings, or reads them.
    pub(super) async fn settings(&self, rng: &mut StdRng) {
        let before = self.crashed();
        if rng.random_bool(0.3) {
            if let Ok(settings) = self.engine.settings(QUEUE).await {
                self.ledger.lock().seen_settings.push(settings);
            }
            return;
        }
        let settings = settings(rng);
        let sent = {
            let mut ledger = self.ledger.lock();
            ledger.settings_sent.push(settings.clone());
            ledger.settings.sent()
        };
        let result = self.engine.put_settings(QUEUE, settings.clone()).await;
        let (settled, at) = (!before && !self.crashed(), self.store.applied());
        let mut ledger = self.ledger.lock();
        ledger.settings.answered(sent, (settled && result.is_ok()).then_some(true), at);
        if let Ok(answer) = result {
            assert_eq!(answer, settings, "a put answered with the settings as asked");
            ledger.seen_settings.push(answer);
        }
    }

    /// A push claim, as the delivery loop makes them.
    pub(super) async fn push_claim(&self, rng: &mut StdRng) {
        let claim = Claim::push(rng.random_range(1..4), 0).unwrap();
        if let Ok(claimed) = self.engine.claim_from(claim).await {
            let mut ledger = self.ledger.lock();
            for task in claimed {
                check_claimed(&ledger, &task, true);
                ledger.seen_ids.insert(task.id);
                ledger.leases.insert(task.id, task.lease);
            }
        }
    }
}
