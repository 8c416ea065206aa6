//! The wheel's own tests; `tests/wheel_model.rs` checks it against a `BTreeMap`.

use super::*;

fn drain_expired<T>(wheel: &mut Wheel<T>) -> Vec<T> {
    std::iter::from_fn(|| wheel.pop_expired().map(|e| e.value)).collect()
}

#[test]
fn nothing_expires_early_and_ties_keep_insertion_order() {
    let mut wheel = Wheel::new();
    for (i, deadline) in [70u64, 5, 70, 4096, 5].into_iter().enumerate() {
        wheel.insert(deadline, i).unwrap();
    }
    assert_eq!(wheel.advance(4), 0);
    assert_eq!(wheel.advance(5), 2);
    assert_eq!(drain_expired(&mut wheel), [1, 4]);
    assert_eq!(wheel.advance(69), 0);
    assert_eq!(wheel.advance(70), 2);
    assert_eq!(drain_expired(&mut wheel), [0, 2]);
    assert_eq!(wheel.advance(1_000_000), 1);
    assert_eq!(drain_expired(&mut wheel), [3]);
    assert!(wheel.is_empty());
}

#[test]
fn lazy_reset_keeps_reset_order_among_ties() {
    let mut wheel = Wheel::new();
    let a = wheel.insert(100, 'a').unwrap(); // level 1, the slot starting at 64
    assert!(wheel.reset(a, 200)); // lazy: stays there until tick 64
    let _b = wheel.insert(200, 'b').unwrap(); // files into the slot starting at 192
    wheel.advance(64); // re-files `a` behind `b`
    wheel.advance(199);
    assert_eq!(wheel.expired_len(), 0);
    wheel.advance(200);
    assert_eq!(drain_expired(&mut wheel), ['a', 'b']);
}

#[test]
fn past_deadlines_expire_without_advancing() {
    let mut wheel = Wheel::new();
    wheel.advance(10);
    wheel.insert(3, 'x').unwrap();
    wheel.insert(10, 'y').unwrap();
    assert_eq!(wheel.next_expiration(), Some(10));
    assert_eq!(drain_expired(&mut wheel), ['x', 'y']);
}

#[test]
fn stale_keys_are_refused() {
    let mut wheel = Wheel::new();
    let a = wheel.insert(5, 1).unwrap();
    assert_eq!(wheel.remove(a), Some(1));
    assert_eq!(wheel.remove(a), None);
    let b = wheel.insert(5, 2).unwrap();
    assert!(!wheel.reset(a, 9));
    assert_eq!(wheel.get(a), None);
    wheel.advance(5);
    let expired = wheel.pop_expired().unwrap();
    assert_eq!(expired.key, b);
    assert!(!wheel.contains(b));
    assert_eq!(wheel.remove(Key::from_raw(u64::MAX)), None);
}

#[test]
fn huge_deadlines_work() {
    let mut wheel = Wheel::new();
    wheel.insert(u64::MAX, "end").unwrap();
    wheel.insert(u64::MAX - 1, "almost").unwrap();
    assert_eq!(wheel.advance(u64::MAX - 2), 0);
    assert!(wheel.next_expiration().unwrap() < u64::MAX);
    assert_eq!(wheel.advance(u64::MAX), 2);
    assert_eq!(drain_expired(&mut wheel), ["almost", "end"]);
}

#[test]
fn next_expiration_skips_empty_slots_and_is_exact_without_churn() {
    let mut wheel = Wheel::new();
    assert_eq!(wheel.next_expiration(), None);
    wheel.insert(1_000_003, ()).unwrap();
    wheel.insert(5_000_000, ()).unwrap();
    assert_eq!(wheel.next_expiration(), Some(1_000_003));
    wheel.advance(1_000_002);
    assert_eq!(wheel.next_expiration(), Some(1_000_003));
    assert_eq!(wheel.advance(1_000_003), 1);
}

#[test]
fn reset_earlier_moves_the_entry() {
    let mut wheel = Wheel::new();
    let key = wheel.insert(1 << 30, 'x').unwrap();
    assert!(wheel.reset(key, 7));
    assert_eq!(wheel.next_expiration(), Some(7));
    assert_eq!(wheel.advance(7), 1);
}

#[test]
fn reset_of_an_expired_entry_makes_it_pending_again() {
    let mut wheel = Wheel::new();
    let key = wheel.insert(2, 'x').unwrap();
    wheel.advance(2);
    assert_eq!(wheel.peek_expired(), Some(key));
    assert!(wheel.reset(key, 9));
    assert_eq!(wheel.expired_len(), 0);
    assert_eq!(wheel.advance(9), 1);
    assert_eq!(wheel.pop_expired().unwrap().key, key);
}

#[test]
fn drain_takes_everything() {
    let mut wheel = Wheel::new();
    for i in 0..100u64 {
        wheel.insert(i * 1000, i).unwrap();
    }
    wheel.advance(5000);
    let mut values: Vec<u64> = wheel.drain().map(|(_, v)| v).collect();
    values.sort_unstable();
    assert_eq!(values, (0..100).collect::<Vec<_>>());
    assert!(wheel.is_empty());
    assert_eq!(wheel.expired_len(), 0);
    assert_eq!(wheel.next_expiration(), None);
}

#[test]
fn the_lists_cost_what_the_design_says() {
    use super::level::NUM_SLOTS;
    // 11 levels x 64 slots x 8 sublists, a u32 head and tail each, and the
    // expired list's; a u64 bound and a u32 witness a slot; the occupancy
    // words; padded to the u64s' alignment.
    let lists = ((NUM_SLOTS * SUBLISTS + 1) * 2 * 4 + NUM_SLOTS * (8 + 4) + NUM_LEVELS * 8 + 4).next_multiple_of(8);
    assert_eq!(std::mem::size_of::<Lists>(), lists);
    assert_eq!(lists / 1024, 52, "DESIGN.md: 52 KiB a wheel");
    assert_eq!(Wheel::<()>::new().allocated_bytes(), lists, "an empty wheel holds its lists alone");
}

/// A slot's walk meets its entries out of insertion order; the ones that
/// expire together are put back in order whether they are gathered on the
/// stack or, past [`batch::GATHERED_MAX`], sorted in place.
#[test]
fn a_tick_of_any_size_comes_out_in_insertion_order() {
    use batch::GATHERED_MAX;
    for n in [1, 2, 9, GATHERED_MAX - 1, GATHERED_MAX, GATHERED_MAX + 1, 3 * GATHERED_MAX + 5] {
        let mut wheel = Wheel::new();
        // Filler at other ticks shifts which sublist each entry lands in.
        for i in 0..n {
            wheel.insert(10_000 + i as u64, usize::MAX).unwrap();
        }
        let keys: Vec<Key> = (0..n).map(|i| wheel.insert(5_000, i).unwrap()).collect();
        // Every third one reset to the same tick: it now counts as inserted last.
        let reset: Vec<usize> = (0..n).step_by(3).collect();
        for &i in &reset {
            assert!(wheel.reset(keys[i], 5_000));
        }
        let expected: Vec<usize> = (0..n).filter(|i| i % 3 != 0).chain(reset.iter().copied()).collect();
        assert_eq!(wheel.advance(5_000), n, "{n} due");
        assert_eq!(drain_expired(&mut wheel), expected, "{n} at one tick");
    }
}

/// Entries due at one tick but inserted billions of insertions apart: their
/// sequence numbers do not fit the gathered words, and the batch is sorted
/// by reading them again.
#[test]
fn ties_inserted_billions_apart_keep_insertion_order() {
    let mut wheel = Wheel::new();
    let early: Vec<Key> = (0..5).map(|i| wheel.insert(5_000, i).unwrap()).collect();
    wheel.next_seq += 3 << 31;
    for i in 5..10 {
        wheel.insert(5_000, i).unwrap();
    }
    // Reset early ones, now counted as inserted last, so the rounds meet the
    // batch out of order.
    assert!(wheel.reset(early[1], 5_000));
    assert!(wheel.reset(early[3], 5_000));
    assert_eq!(wheel.advance(5_000), 10);
    assert_eq!(drain_expired(&mut wheel), [0, 2, 4, 5, 6, 7, 8, 9, 1, 3]);
}
