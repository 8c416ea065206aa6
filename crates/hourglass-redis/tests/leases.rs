//! Lease tokens on Redis cannot be worked out from one another, as on the
//! embedded store: a client that holds one lease cannot ack, nack or extend
//! another delivery by guessing its token.

use hourglass_queue::prelude::*;
use hourglass_queue::{Lease, NewTask, QueueError, RunAt, TaskState};
use hourglass_redis::RedisBackend;
use hourglass_test_support::redis::Server;

use crate::sole_node;

/// Leases claimed together: `count` of them.
const COUNT: usize = 64;

/// Whether each of the 64 bits is set in some of `leases` and clear in
/// others, as random tokens' are, but for odds of about one in a million
/// (a bit set in fewer than 8 or more than 56 of 64); a counter's high bits
/// are all clear.
fn every_bit_varies(leases: &[Lease]) -> bool {
    (0..64).all(|bit| (8..=56).contains(&leases.iter().filter(|lease| lease.0 >> bit & 1 == 1).count()))
}

async fn leases_are_not_guessable(b: &RedisBackend) {
    let tasks: Vec<NewTask> = (0..COUNT).map(|_| NewTask::new("{}", RunAt::Delay(0))).collect();
    b.enqueue_batch("guess", tasks).await.unwrap();
    let claimed = b.claim("guess", COUNT, 30_000, 1_000).await.unwrap();
    assert_eq!(claimed.len(), COUNT);
    let leases: Vec<Lease> = claimed.iter().map(|c| c.lease).collect();
    let distinct: std::collections::HashSet<u64> = leases.iter().map(|lease| lease.0).collect();
    assert_eq!(distinct.len(), COUNT, "every lease its own: {leases:?}");
    assert!(every_bit_varies(&leases), "leases look random: {leases:?}");

    // A lease is shown as claimed, and only it is held.
    let (first, second) = (&claimed[0], &claimed[1]);
    match b.get(first.id).await.unwrap().task.state {
        TaskState::Leased { lease, .. } => assert_eq!(lease, first.lease),
        other => panic!("leased: {other:?}"),
    }
    for guess in [second.lease, Lease(first.lease.0 ^ 1), Lease(first.lease.0.wrapping_add(1_024))] {
        assert!(matches!(b.ack(first.id, guess).await, Err(QueueError::StaleLease(_))), "{guess:?} is not held");
        assert!(matches!(b.extend(first.id, guess, 30_000).await, Err(QueueError::StaleLease(_))));
    }
    let acks: Vec<(u64, Lease)> = claimed.iter().map(|c| (c.id, c.lease)).collect();
    assert!(b.ack_batch(&acks).await.unwrap().iter().all(Result::is_ok), "each by its own lease");

    // A task taken out of turn (beanstalkd's reserve-job) gets one too, and
    // its next delivery another.
    let id = b.enqueue("guess", NewTask::new("{}", RunAt::Delay(3_600_000))).await.unwrap().id;
    let taken = b.take(id, 30_000).await.unwrap();
    assert!(b.nack(id, taken.lease, hourglass_queue::Nack::default()).await.is_ok());
    let again = b.take(id, 30_000).await.unwrap();
    assert_ne!(again.lease, taken.lease);
    assert!(matches!(b.ack(id, taken.lease).await, Err(QueueError::StaleLease(_))), "the old lease is let go");
    b.ack(id, again.lease).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_tokens_cannot_be_guessed_on_one_redis() {
    let Some(server) = Server::start() else { return };
    let backend = sole_node(&server.url()).await;
    leases_are_not_guessable(&backend).await;
    backend.close();
}
