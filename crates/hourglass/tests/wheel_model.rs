//! The wheel against a reference model: every operation is mirrored on a map
//! of live entries, and what the wheel expires must be exactly what the model
//! says is due, in deadline order with ties in insertion (or reset) order,
//! `peek` must name the entry that comes out next, `next_expiration` must be a
//! lower bound of the earliest deadline and `next_deadline` that deadline.

use std::collections::BTreeMap;

use hourglass::{Key, Wheel};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum When {
    /// Ticks after the wheel's time (0 = due now).
    Soon(u64),
    Later(u64),
    /// Ticks before the wheel's time: already due.
    Past(u64),
    /// Counted back from `u64::MAX`.
    NearEnd(u64),
    Anywhere(u64),
}

#[derive(Debug, Clone)]
enum Op {
    Insert(When),
    /// Index into every key ever made, live or stale.
    Remove(usize),
    Reset(usize, When),
    Advance(u64),
    AdvanceTo(When),
    /// A key made up from any `u64`: it must be refused, never panic.
    Forged(u64, When),
    /// Give back what memory can be given back; nothing else may change.
    ShrinkToFit,
    /// Ask `next_deadline`, which learns the earliest deadline of slots whose
    /// bound went loose: asked now and then, so loose bounds live a while.
    NextDeadline,
}

fn when() -> impl Strategy<Value = When> {
    prop_oneof![
        4 => (0..200u64).prop_map(When::Soon),
        3 => (0..5_000_000u64).prop_map(When::Later),
        1 => (0..1000u64).prop_map(When::Past),
        1 => (0..1000u64).prop_map(When::NearEnd),
        1 => any::<u64>().prop_map(When::Anywhere),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => when().prop_map(Op::Insert),
        2 => any::<usize>().prop_map(Op::Remove),
        4 => (any::<usize>(), when()).prop_map(|(i, w)| Op::Reset(i, w)),
        3 => (0..300u64).prop_map(Op::Advance),
        1 => when().prop_map(Op::AdvanceTo),
        1 => (any::<u64>(), when()).prop_map(|(raw, w)| Op::Forged(raw, w)),
        1 => Just(Op::ShrinkToFit),
        2 => Just(Op::NextDeadline),
    ]
}

fn resolve(when: &When, now: u64) -> u64 {
    match *when {
        When::Soon(d) | When::Later(d) => now.saturating_add(d),
        When::Past(d) => now.saturating_sub(d),
        When::NearEnd(d) => u64::MAX - d,
        When::Anywhere(t) => t,
    }
}

#[derive(Default)]
struct Model {
    now: u64,
    seq: u64,
    /// id -> (deadline, seq)
    live: BTreeMap<usize, (u64, u64)>,
}

impl Model {
    fn file(&mut self, id: usize, deadline: u64) {
        self.live.insert(id, (deadline, self.seq));
        self.seq += 1;
    }

    /// Entries due at or before `now`, in expiry order; removed from the model.
    fn expire(&mut self) -> Vec<usize> {
        let mut due: Vec<(u64, u64, usize)> =
            self.live.iter().filter(|(_, &(d, _))| d <= self.now).map(|(&id, &(d, s))| (d, s, id)).collect();
        due.sort_unstable();
        for &(_, _, id) in &due {
            self.live.remove(&id);
        }
        due.into_iter().map(|(_, _, id)| id).collect()
    }
}

fn check(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut wheel: Wheel<usize> = Wheel::new();
    let mut model = Model::default();
    let mut keys: Vec<Key> = Vec::new();
    for op in ops {
        let exact = matches!(op, Op::NextDeadline);
        match op {
            Op::Insert(when) => {
                let deadline = resolve(&when, model.now);
                let id = keys.len();
                keys.push(wheel.insert(deadline, id).unwrap());
                model.file(id, deadline);
            }
            Op::Remove(i) if !keys.is_empty() => {
                let id = i % keys.len();
                let expected = model.live.remove(&id).map(|_| id);
                prop_assert_eq!(wheel.remove(keys[id]), expected);
            }
            Op::Reset(i, when) if !keys.is_empty() => {
                let id = i % keys.len();
                let deadline = resolve(&when, model.now);
                let live = model.live.contains_key(&id);
                prop_assert_eq!(wheel.reset(keys[id], deadline), live);
                if live {
                    model.file(id, deadline);
                    prop_assert_eq!(wheel.deadline(keys[id]), Some(deadline));
                }
            }
            Op::Advance(by) => {
                model.now = model.now.saturating_add(by);
                wheel.advance(model.now);
            }
            Op::AdvanceTo(when) => {
                let to = resolve(&when, model.now).max(model.now);
                model.now = to;
                wheel.advance(to);
            }
            Op::Forged(raw, when) => {
                let forged = Key::from_raw(raw);
                // Astronomically unlikely, but a made-up key may equal a live one.
                let live = keys.iter().position(|&k| k == forged).filter(|id| model.live.contains_key(id));
                prop_assert_eq!(wheel.contains(forged), live.is_some());
                prop_assert_eq!(wheel.get(forged).copied(), live);
                let deadline = resolve(&when, model.now);
                prop_assert_eq!(wheel.reset(forged, deadline), live.is_some());
                if let Some(id) = live {
                    model.file(id, deadline);
                }
            }
            Op::ShrinkToFit => wheel.shrink_to_fit(),
            Op::Remove(_) | Op::Reset(..) | Op::NextDeadline => {}
        }
        // `peek` names what comes out next: the earliest deadline, ties in
        // insertion order, whether or not it is due yet.
        let first = model.live.iter().min_by_key(|(_, &(d, s))| (d, s)).map(|(&id, _)| keys[id]);
        prop_assert_eq!(wheel.peek(), first);
        let expected = model.expire();
        let mut expired = Vec::new();
        while let Some(e) = wheel.pop_expired() {
            prop_assert!(e.deadline <= model.now, "expired early: {} > {}", e.deadline, model.now);
            prop_assert!(!wheel.contains(e.key));
            expired.push(e.value);
        }
        prop_assert_eq!(expired, expected);
        prop_assert_eq!(wheel.len(), model.live.len());
        prop_assert_eq!(wheel.elapsed(), model.now);
        let earliest = model.live.values().map(|&(d, _)| d).min();
        match (wheel.next_expiration(), earliest) {
            (None, None) => {}
            (Some(bound), Some(earliest)) => {
                prop_assert!(bound <= earliest, "next_expiration {} after the earliest deadline {}", bound, earliest);
                prop_assert!(bound > model.now, "nothing is due, yet next_expiration is {}", bound);
            }
            (bound, earliest) => prop_assert!(false, "next_expiration {:?} but earliest {:?}", bound, earliest),
        }
        if exact {
            prop_assert_eq!(wheel.next_deadline(), earliest);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn wheel_matches_the_model(ops in proptest::collection::vec(op(), 1..300)) {
        check(ops)?;
    }
}

/// Many entries sharing a few deadlines, with lazy resets in between: the
/// case that needs the wheel to restore insertion order.
#[test]
fn crowded_ticks_keep_insertion_order() {
    let mut wheel = Wheel::new();
    let mut model = Model::default();
    let mut keys = Vec::new();
    for id in 0..2000usize {
        let deadline = 5000 + (id as u64 % 7) * 64;
        keys.push(wheel.insert(deadline, id).unwrap());
        model.file(id, deadline);
    }
    for id in (0..2000).step_by(3) {
        let deadline = 5000 + (id as u64 % 5) * 64 + 64;
        assert!(wheel.reset(keys[id], deadline));
        model.file(id, deadline);
    }
    for now in (0..6000).step_by(37) {
        model.now = now;
        wheel.advance(now);
        let expected = model.expire();
        let got: Vec<usize> = std::iter::from_fn(|| wheel.pop_expired().map(|e| e.value)).collect();
        assert_eq!(got, expected, "at tick {now}");
    }
    assert!(wheel.is_empty());
}
