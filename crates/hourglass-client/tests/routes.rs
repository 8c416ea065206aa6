//! Every method of the client at least once, against the real server.

use hourglass_client::wire::{
    Ack, AckResult, Acks, ClaimRequest, Cursor, DeadReason, ListQuery, Misfire, NewSchedule, NewTask, NewTasks,
    Overlap, PushTarget, QueueSettings, Reschedule, SchedulesQuery, State,
};
use serde_json::value::{to_raw_value, RawValue};

use crate::server::{within, Server, T0_MS};

fn payload(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_are_enqueued_found_listed_moved_and_cancelled() {
    let server = Server::start(None).await;
    let client = server.client(None);
    within("the test", async {
        assert_eq!(client.healthz().await.unwrap().status, "ok");
        // A queue name with a slash, a key with a space and an accent: both
        // percent-encoded in their paths.
        let queue = "orders/eu";
        let task =
            NewTask { delay_ms: Some(1_000), key: Some("k 1/é".into()), ..NewTask::new(payload(r#"{"b":1,"a":2}"#)) };
        let first = client.enqueue(queue, &task).await.unwrap();
        assert!(first.created);
        assert_eq!(first.value.run_at_ms, T0_MS + 1_000);
        let again = client.enqueue(queue, &task).await.unwrap();
        assert!(!again.created, "the key named a live task");
        assert_eq!(again.value.id, first.value.id);
        let id = first.value.id;

        let shown = client.get(id).await.unwrap();
        assert_eq!(
            (shown.queue.as_str(), shown.state, shown.payload.as_deref().map(RawValue::get)),
            (queue, State::Scheduled, Some(r#"{"b":1,"a":2}"#))
        );
        assert_eq!(client.find_by_key(queue, "k 1/é").await.unwrap().id, id);

        let batch = NewTasks { tasks: (0..3).map(|n| NewTask::new(to_raw_value(&n).unwrap())).collect() };
        let done = client.enqueue_batch(queue, &batch).await.unwrap();
        assert_eq!((done.created, done.tasks.len()), (3, 3));

        let first_page = client.list_tasks(queue, &ListQuery::page(None, None, Some(2))).await.unwrap();
        assert_eq!(first_page.tasks.len(), 2);
        let next: Cursor = first_page.next.expect("a next page");
        let rest = client.list_tasks(queue, &ListQuery::page(None, Some(next), Some(10))).await.unwrap();
        assert_eq!((rest.tasks.len(), rest.next), (2, None));
        let due = client.list_tasks(queue, &ListQuery::page(Some(State::Due), None, None)).await.unwrap();
        assert_eq!(due.tasks.len(), 3);

        let moved = client.reschedule(id, &Reschedule { delay_ms: Some(5_000), run_at_ms: None }).await.unwrap();
        assert_eq!(moved.run_at_ms, T0_MS + 5_000);
        client.cancel(id).await.unwrap();
        assert_eq!(client.get(id).await.unwrap_err().code(), Some("not_found"));
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_of_any_bytes_comes_back_exactly() {
    let server = Server::start(None).await;
    let client = server.client(None);
    within("the test", async {
        let bytes: Vec<u8> = (0..=255).collect();
        let id = client.enqueue("bytes", &NewTask::bytes(&bytes)).await.unwrap().value.id;
        let shown = client.get(id).await.unwrap();
        assert!(shown.payload.is_none(), "not JSON: shown as base64 only");
        assert_eq!(shown.payload_bytes().unwrap(), bytes);
        // Bytes that are JSON text are shown as JSON, and are the same bytes.
        let json_bytes = client.enqueue("bytes", &NewTask::bytes(br#"{"a": 1}"#)).await.unwrap().value.id;
        let claimed = client.claim("bytes", &ClaimRequest { max: Some(10), ..ClaimRequest::default() }).await.unwrap();
        let by_id = |id: u64| claimed.tasks.iter().find(|task| task.id == id).expect("claimed");
        assert_eq!(by_id(id).payload_bytes().unwrap(), bytes);
        // JSON text comes back as it was sent, from a claim and from a read.
        assert_eq!(by_id(json_bytes).payload.as_deref().map(RawValue::get), Some(r#"{"a": 1}"#));
        assert_eq!(by_id(json_bytes).payload_bytes().unwrap(), br#"{"a": 1}"#);
        let shown = client.get(json_bytes).await.unwrap();
        assert_eq!(shown.payload.as_deref().map(RawValue::get), Some(r#"{"a": 1}"#));
        assert_eq!(shown.payload_bytes().unwrap(), br#"{"a": 1}"#);
        // Both at once, or base64 that is not, is the request's 400.
        let both = NewTask { payload_base64: Some("AA==".into()), ..NewTask::new(payload("1")) };
        let refused = client.enqueue("bytes", &both).await.unwrap_err();
        assert_eq!(refused.code(), Some("invalid"), "{refused}");
        let bad = NewTask { payload_base64: Some("not base64!".into()), ..NewTask::new(payload("null")) };
        assert_eq!(client.enqueue("bytes", &bad).await.unwrap_err().code(), Some("invalid"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_are_claimed_acked_nacked_extended_and_retried() {
    let server = Server::start(None).await;
    let client = server.client(None);
    within("the test", async {
        let one_try = NewTask { max_attempts: Some(1), ..NewTask::new(payload("1")) };
        let batch = NewTasks { tasks: vec![one_try, NewTask::new(payload("2")), NewTask::new(payload("3"))] };
        client.enqueue_batch("q", &batch).await.unwrap();
        let claim = ClaimRequest { max: Some(10), lease_ms: Some(30_000), wait_ms: Some(0), acks: None };
        let claimed = client.claim("q", &claim).await.unwrap().tasks;
        assert_eq!(claimed.len(), 3);
        let (a, b, c) = (&claimed[0], &claimed[1], &claimed[2]);
        assert_eq!((a.attempt, a.lease_until_ms), (1, T0_MS + 30_000));

        let extended = client.extend(a.id, a.lease, 60_000).await.unwrap();
        assert_eq!(extended.lease_until_ms, T0_MS + 60_000);
        let dead = client.nack(a.id, a.lease, None, Some("upstream 503".into())).await.unwrap();
        assert_eq!(
            (dead.state, dead.dead_reason, dead.last_error.as_deref()),
            (State::Dead, Some(DeadReason::Attempts), Some("upstream 503"))
        );
        let page = client.list_dead("q", &ListQuery::default()).await.unwrap();
        assert_eq!(page.tasks.iter().map(|t| t.id).collect::<Vec<_>>(), [a.id]);
        let revived = client.retry(a.id).await.unwrap();
        assert_eq!(revived.state, State::Due);

        assert_eq!(client.ack(b.id, b.lease).await.unwrap().id, b.id);
        let results =
            client.ack_batch(&Acks { acks: vec![Ack::new(c.id, c.lease), Ack::new(b.id, b.lease)] }).await.unwrap();
        assert!(matches!(&results.results[0], AckResult::Acked(acked) if acked.id == c.id));
        match &results.results[1] {
            AckResult::Failed { error, id } => assert_eq!((error.code.as_str(), *id), ("not_found", b.id)),
            other => panic!("acked twice: {other:?}"),
        }
        // A nack with a delay puts a task with attempts left back, due later.
        client.cancel(a.id).await.unwrap();
        let d = client.enqueue("q", &NewTask::new(payload("4"))).await.unwrap().value;
        let again = client.claim("q", &claim).await.unwrap().tasks.remove(0);
        assert_eq!(again.id, d.id);
        let later = client.nack(again.id, again.lease, Some(500), None).await.unwrap();
        assert_eq!((later.state, later.run_at_ms), (State::Scheduled, T0_MS + 500));
        // A claim that carries acks answers them beside its tasks.
        client.enqueue("q", &NewTask::new(payload("5"))).await.unwrap();
        let e = client.claim("q", &claim).await.unwrap().tasks.remove(0);
        client.enqueue("q", &NewTask::new(payload("6"))).await.unwrap();
        let acking = ClaimRequest { acks: Some(vec![Ack::new(e.id, e.lease)]), ..claim.clone() };
        let answer = client.claim("q", &acking).await.unwrap();
        assert_eq!(answer.acks, Some(vec![AckResult::Acked(hourglass_client::wire::Acked { acked: true, id: e.id })]));
        assert_eq!(answer.tasks.len(), 1);
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_are_counted_paused_resumed_and_cleared() {
    let server = Server::start(None).await;
    let client = server.client(None);
    within("the test", async {
        let doomed = NewTask { max_attempts: Some(1), ..NewTask::new(payload("null")) };
        client.enqueue("a/b", &doomed).await.unwrap();
        let claimed = client.claim("a/b", &ClaimRequest::default()).await.unwrap().tasks.remove(0);
        client.nack(claimed.id, claimed.lease, None, None).await.unwrap();
        let queue = client.queue("a/b").await.unwrap();
        assert_eq!((queue.name.as_str(), queue.dead, queue.delivered), ("a/b", 1, 1));
        let all = client.queues().await.unwrap();
        assert_eq!((all.queues.len(), all.totals.died), (1, 1));
        assert_eq!(client.settings("a/b").await.unwrap(), QueueSettings::default());
        let push = PushTarget {
            url: "https://example.com/h".into(),
            method: None,
            headers: Default::default(),
            timeout_ms: None,
        };
        let settings = QueueSettings { push: Some(push), max_in_flight: Some(3), ..QueueSettings::default() };
        let stored = client.put_settings("a/b", &settings).await.unwrap();
        assert_eq!((stored.push.as_ref().unwrap().timeout_ms, stored.max_in_flight), (Some(30_000), Some(3)));
        assert_eq!(client.settings("a/b").await.unwrap(), stored);
        client.put_settings("a/b", &QueueSettings::default()).await.unwrap();
        assert!(client.pause_queue("a/b").await.unwrap().paused);
        assert!(!client.resume_queue("a/b").await.unwrap().paused);
        let deleted = client.delete_dead("a/b").await.unwrap();
        assert_eq!((deleted.deleted, deleted.queue.as_str()), (1, "a/b"));
        let overview = client.overview(true).await.unwrap();
        assert_eq!((overview.queues[0].queue.name.as_str(), overview.queues[0].queue.dead), ("a/b", 0));
        assert_eq!(overview.totals.enqueued, 1);
        assert!(client.overview(false).await.unwrap().sample_every_s > 0);
        assert_eq!(overview.nodes, None, "one process");
        let nodes = client.nodes().await.unwrap();
        assert_eq!(nodes.nodes, None, "one process: no nodes, no shards");
        assert!(nodes.now_ms > 0);
        let metrics = client.metrics().await.unwrap();
        assert!(metrics.contains("hourglass_tasks_enqueued_total 1"), "{metrics}");
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_are_put_listed_fired_paused_and_deleted() {
    let server = Server::start(None).await;
    let client = server.client(None);
    within("the test", async {
        let report = NewSchedule::cron("reports", "0 9 * * MON-FRI", Some("Europe/Berlin"), payload(r#"{"report":1}"#))
            .misfire(Misfire::Once)
            .overlap(Overlap::Forbid);
        let put = client.put_schedule("sales-report", &report).await.unwrap();
        assert!(put.created);
        assert_eq!(put.value.next_runs[0].local, "2027-01-18T09:00:00.000+01:00");
        assert!(!client.put_schedule("sales-report", &report).await.unwrap().created, "replaced");
        let tick = NewSchedule::every("ticks", 1_000, payload(r#"{"tick":true}"#));
        client.put_schedule("tick", &tick).await.unwrap();

        server.advance(1_000).await;
        let shown = client.schedule("tick").await.unwrap();
        let last = shown.last_run.expect("fired once");
        assert_eq!(last.at_ms, T0_MS + 1_000);
        let fired = client.get(last.task_id.unwrap()).await.unwrap();
        assert_eq!(
            (fired.queue.as_str(), fired.payload.as_deref().map(RawValue::get)),
            ("ticks", Some(r#"{"tick":true}"#))
        );

        let page = client.schedules(&SchedulesQuery { after: None, limit: Some(1) }).await.unwrap();
        assert_eq!((page.schedules[0].name.as_str(), page.next.as_deref()), ("sales-report", Some("sales-report")));
        let rest = client.schedules(&SchedulesQuery { after: page.next, limit: None }).await.unwrap();
        assert_eq!((rest.schedules[0].name.as_str(), rest.next), ("tick", None));
        assert!(client.pause_schedule("tick").await.unwrap().paused);
        assert!(!client.resume_schedule("tick").await.unwrap().paused);
        client.delete_schedule("tick").await.unwrap();
        assert_eq!(client.schedule("tick").await.unwrap_err().code(), Some("not_found"));
    })
    .await;
    server.stop().await;
}
