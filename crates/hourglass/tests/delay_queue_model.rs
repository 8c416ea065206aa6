//! `DelayQueue` against a model (a `BTreeMap` of live values and deadlines)
//! under random inserts, resets, removes, clears and steps of tokio's paused
//! clock. After every operation:
//! - every value that comes out is due, is the one `peek` named, and left the
//!   model; once `poll_expired` is pending, nothing in the model is due;
//! - a consumer waiting in `poll_expired` has been woken once time reached the
//!   earliest deadline, once a deadline already due was set, and once the
//!   queue was emptied: no missed wake-up;
//! - and it is woken for nothing else than those, or a deadline earlier than
//!   the one it waits for: no wake-up with nothing due, after a value it
//!   waited for was reset later or removed included;
//! - stale keys are refused, and live keys keep their deadline.

use std::collections::BTreeMap;
use std::task::Poll;
use std::time::Duration;

use hourglass::delay_queue::{DelayQueue, Key};
use proptest::prelude::*;
use tokio::time::{self, Instant};

#[derive(Debug, Clone)]
enum Delay {
    /// Milliseconds from now.
    Ahead(u64),
    /// Milliseconds before now (clamped at the queue's start).
    Past(u64),
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Delay),
    /// Index into every key ever made, live or stale.
    Reset(usize, Delay),
    Remove(usize),
    Advance(u64),
    Poll,
    Clear,
    ShrinkToFit,
}

fn delay() -> impl Strategy<Value = Delay> {
    prop_oneof![
        6 => (0..200u64).prop_map(Delay::Ahead),
        2 => (0..70_000u64).prop_map(Delay::Ahead),
        1 => (0..(1u64 << 40)).prop_map(Delay::Ahead),
        1 => (0..300u64).prop_map(Delay::Past),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => delay().prop_map(Op::Insert),
        3 => (any::<usize>(), delay()).prop_map(|(i, d)| Op::Reset(i, d)),
        2 => any::<usize>().prop_map(Op::Remove),
        4 => prop_oneof![0..5u64, 0..300u64, 0..100_000u64].prop_map(Op::Advance),
        4 => Just(Op::Poll),
        1 => Just(Op::Clear),
        1 => Just(Op::ShrinkToFit),
    ]
}

#[derive(Default)]
struct Model {
    /// id -> deadline in ms from the start.
    live: BTreeMap<usize, u64>,
    /// The earliest deadline when the consumer last got `Pending`: it waits.
    waiting_for: Option<u64>,
}

impl Model {
    fn earliest(&self) -> Option<u64> {
        self.live.values().copied().min()
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    runtime.block_on(async move {
        let start = Instant::now();
        let now_ms = || (Instant::now() - start).as_millis() as u64;
        let mut queue = tokio_test::task::spawn(DelayQueue::new());
        let mut model = Model::default();
        let mut keys: Vec<Key> = Vec::new();
        for op in ops {
            let resolve = |delay: &Delay| match *delay {
                Delay::Ahead(ms) => now_ms() + ms,
                Delay::Past(ms) => now_ms().saturating_sub(ms),
            };
            // Whether the change obliges the queue to wake a waiting consumer,
            // and whether it allows it to (a deadline before the one waited for).
            let mut must_wake = false;
            let mut may_wake = false;
            let sooner = |deadline: u64| model.waiting_for.is_some_and(|waited| deadline < waited);
            match &op {
                Op::Insert(delay) => {
                    let deadline = resolve(delay);
                    keys.push(queue.insert_at(keys.len(), start + Duration::from_millis(deadline)));
                    may_wake = sooner(deadline);
                    model.live.insert(keys.len() - 1, deadline);
                    must_wake = model.waiting_for.is_some() && deadline <= now_ms();
                }
                Op::Reset(i, delay) if !keys.is_empty() => {
                    let id = i % keys.len();
                    let deadline = resolve(delay);
                    let live = model.live.contains_key(&id);
                    prop_assert_eq!(queue.try_reset_at(&keys[id], start + Duration::from_millis(deadline)), live);
                    if live {
                        may_wake = sooner(deadline);
                        model.live.insert(id, deadline);
                        must_wake = model.waiting_for.is_some() && deadline <= now_ms();
                    }
                }
                Op::Remove(i) if !keys.is_empty() => {
                    let id = i % keys.len();
                    let removed = queue.try_remove(&keys[id]);
                    match model.live.remove(&id) {
                        Some(deadline) => {
                            let removed = removed.expect("a live key removes its value");
                            prop_assert_eq!(removed.deadline(), start + Duration::from_millis(deadline));
                            prop_assert_eq!(removed.into_inner(), id);
                            must_wake = model.waiting_for.is_some() && model.live.is_empty();
                        }
                        None => prop_assert!(removed.is_none(), "stale key {} removed a value", id),
                    }
                }
                Op::Advance(ms) => {
                    time::sleep(Duration::from_millis(*ms)).await;
                    must_wake = model.waiting_for.is_some() && model.earliest().is_some_and(|d| d <= now_ms());
                    may_wake = must_wake;
                }
                Op::Poll => loop {
                    let peeked = queue.peek();
                    match queue.enter(|cx, mut queue| queue.poll_expired(cx)) {
                        Poll::Ready(Some(expired)) => {
                            let id = *expired.get_ref();
                            prop_assert_eq!(Some(expired.key()), peeked, "peek named another value");
                            let deadline = model.live.remove(&id).expect("a value that came out was live");
                            prop_assert!(
                                deadline <= now_ms(),
                                "value {} due at {} came out at {}",
                                id,
                                deadline,
                                now_ms()
                            );
                            prop_assert_eq!(expired.deadline(), start + Duration::from_millis(deadline));
                        }
                        Poll::Ready(None) => {
                            prop_assert!(model.live.is_empty(), "None while {} values wait", model.live.len());
                            prop_assert!(peeked.is_none());
                            model.waiting_for = None;
                            break;
                        }
                        Poll::Pending => {
                            let earliest = model.earliest();
                            prop_assert!(earliest.is_some_and(|d| d > now_ms()), "pending while {:?} is due", earliest);
                            model.waiting_for = earliest;
                            break;
                        }
                    }
                },
                Op::Clear => {
                    queue.clear();
                    must_wake = model.waiting_for.is_some() && !model.live.is_empty();
                    model.live.clear();
                }
                Op::ShrinkToFit => queue.shrink_to_fit(),
                Op::Reset(..) | Op::Remove(_) => {}
            }
            if model.waiting_for.is_some() {
                let woken = queue.is_woken();
                prop_assert!(
                    woken || !must_wake,
                    "the consumer waiting for {:?} was not woken by {:?}",
                    model.waiting_for,
                    op
                );
                prop_assert!(
                    !woken || may_wake || must_wake,
                    "the consumer waiting for {:?} was woken for nothing by {:?} at {}",
                    model.waiting_for,
                    op,
                    now_ms()
                );
                // Woken, it polls again before waiting for anything; still
                // waiting, it waits for the earliest deadline there is now.
                model.waiting_for = if woken { None } else { model.earliest() };
            }
            prop_assert_eq!(queue.len(), model.live.len());
            if let Some((&id, &deadline)) = model.live.iter().next() {
                prop_assert_eq!(queue.deadline(&keys[id]), start + Duration::from_millis(deadline));
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn delay_queue_matches_the_model(ops in proptest::collection::vec(op(), 1..200)) {
        run(ops)?;
    }
}
