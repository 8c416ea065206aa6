//! Listings: pages by state with a cursor, whole and without repeats, and
//! lookups by idempotency key.

use std::collections::HashSet;
use std::sync::Arc;

use hourglass_embedded::{Engine, Options};
use hourglass_queue::prelude::*;
use hourglass_queue::{ListRequest, ManualWallClock, Nack, NewTask, QueueError, RunAt, Status};

use crate::sim::CrashStore;

const T0_MS: u64 = 1_800_000_000_000;

async fn pages(engine: &Engine, queue: &str, status: Option<Status>, limit: usize) -> Vec<Vec<u64>> {
    let mut pages = Vec::new();
    let mut after = None;
    loop {
        let page = engine.list(queue, ListRequest { status, after, limit }).await.unwrap();
        assert!(page.tasks.len() <= limit);
        pages.push(page.tasks.iter().map(|t| t.task.id).collect());
        match page.next {
            Some(next) => after = Some(next),
            None => return pages,
        }
    }
}

#[tokio::test]
async fn pages_cover_each_state_once_in_order() {
    let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
    let engine = Engine::open(Box::new(CrashStore::new(7, 0.0)), Options::default(), clock.clone()).unwrap();
    // 25 due (in reverse due order), 10 scheduled, 5 of another queue, 3 dead.
    let mut due = Vec::new();
    for i in 0..25u64 {
        due.push(engine.enqueue("q", NewTask::new("1", RunAt::At(T0_MS - i))).await.unwrap().id);
    }
    for _ in 0..10 {
        engine.enqueue("q", NewTask::new("1", RunAt::Delay(60_000))).await.unwrap();
    }
    for _ in 0..5 {
        engine.enqueue("other", NewTask::new("1", RunAt::Delay(0))).await.unwrap();
    }
    let mut dead = Vec::new();
    for _ in 0..3 {
        let new = NewTask { max_attempts: Some(1), ..NewTask::new("1", RunAt::At(T0_MS - 100)) };
        let id = engine.enqueue("q", new).await.unwrap().id;
        let claimed = engine.claim("q", 1, 1_000, 0).await.unwrap().remove(0);
        assert_eq!(claimed.id, id, "the oldest due first");
        engine.nack(id, claimed.lease, Nack::default()).await.unwrap();
        dead.push(id);
    }

    let due_pages = pages(&engine, "q", Some(Status::Due), 10).await;
    assert_eq!(due_pages.iter().map(Vec::len).collect::<Vec<_>>(), [10, 10, 5]);
    let listed: Vec<u64> = due_pages.concat();
    let mut expected = due.clone();
    expected.reverse(); // oldest due first, as claims take them
    assert_eq!(listed, expected);

    assert_eq!(pages(&engine, "q", Some(Status::Dead), 2).await.concat(), dead);
    assert_eq!(pages(&engine, "q", Some(Status::Scheduled), 4).await.concat().len(), 10);
    assert!(pages(&engine, "q", Some(Status::Leased), 4).await.concat().is_empty());
    let all: Vec<u64> = pages(&engine, "q", None, 7).await.concat();
    assert_eq!(all.len(), 25 + 10 + 3);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len(), "no task twice");
    assert!(all.windows(2).all(|w| w[0] < w[1]), "by id");
    assert_eq!(pages(&engine, "never-used", None, 7).await, [Vec::<u64>::new()]);
    // A cursor comes from a client: the largest one lists nothing, and panics nowhere.
    let end = Some(hourglass_queue::Cursor { priority: u32::MAX, run_at_ms: u64::MAX, id: u64::MAX });
    for status in [None, Some(Status::Due), Some(Status::Dead), Some(Status::Scheduled)] {
        let page = engine.list("q", ListRequest { status, after: end, limit: 10 }).await.unwrap();
        assert_eq!((page.tasks.len(), page.next), (0, None), "{status:?}");
    }
    // Leased tasks, through the lease table: this queue's only, by id, paged whole.
    let mut leased: Vec<u64> = engine.claim("q", 7, 60_000, 0).await.unwrap().iter().map(|c| c.id).collect();
    engine.claim("other", 2, 60_000, 0).await.unwrap();
    leased.sort_unstable();
    let leased_pages = pages(&engine, "q", Some(Status::Leased), 3).await;
    assert_eq!(leased_pages.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 1]);
    assert_eq!(leased_pages.concat(), leased);
    let page = engine.list("q", ListRequest { status: Some(Status::Leased), after: end, limit: 10 }).await.unwrap();
    assert_eq!((page.tasks.len(), page.next), (0, None));
    let too_many = ListRequest { status: None, after: None, limit: hourglass_queue::limits::LIST_MAX + 1 };
    assert!(matches!(engine.list("q", too_many).await, Err(QueueError::Invalid(_))));
}

#[tokio::test]
async fn a_task_is_found_by_its_key_while_it_lives() {
    let clock = Arc::new(ManualWallClock::at_ms(T0_MS));
    let engine = Engine::open(Box::new(CrashStore::new(8, 0.0)), Options::default(), clock).unwrap();
    let new = NewTask { key: Some("invoice-7".into()), ..NewTask::new(r#"{"n":7}"#, RunAt::Delay(0)) };
    let id = engine.enqueue("billing", new).await.unwrap().id;
    let found = engine.find_by_key("billing", "invoice-7").await.unwrap().unwrap();
    assert_eq!((found.task.id, found.payload.as_text()), (id, Some(r#"{"n":7}"#)));
    assert!(engine.find_by_key("other", "invoice-7").await.unwrap().is_none(), "keys are per queue");
    engine.cancel(id).await.unwrap();
    assert!(engine.find_by_key("billing", "invoice-7").await.unwrap().is_none());
    assert!(matches!(engine.find_by_key("billing", "").await, Err(QueueError::Invalid(_))));
}
