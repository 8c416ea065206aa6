//! Baselines written here from the seed designs: a binary heap with lazy
//! cancellation (seed 003), a `BTreeMap` ordered by deadline, and a sorted
//! `Vec` with binary-search insert (seed 000). Each keeps timers in a slab with
//! a version per slot, as a careful implementation of those designs would.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use crate::queues::TimerQueue;

/// A slab of timers: their current deadline, and a version that changes
/// whenever the slot's timer is cancelled, reset or fired.
#[derive(Default)]
struct Slots {
    deadline_ms: Vec<u64>,
    version: Vec<u32>,
    live: Vec<bool>,
    free: Vec<u32>,
}

type SlotKey = (u32, u32);

impl Slots {
    fn with_capacity(capacity: usize) -> Self {
        Slots {
            deadline_ms: Vec::with_capacity(capacity),
            version: Vec::with_capacity(capacity),
            live: Vec::with_capacity(capacity),
            free: Vec::new(),
        }
    }
    #[inline]
    fn alloc(&mut self, deadline_ms: u64) -> SlotKey {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.deadline_ms.push(0);
                self.version.push(0);
                self.live.push(false);
                (self.live.len() - 1) as u32
            }
        };
        let i = index as usize;
        self.deadline_ms[i] = deadline_ms;
        self.live[i] = true;
        (index, self.version[i])
    }
    #[inline]
    fn is_live(&self, (index, version): SlotKey) -> bool {
        let i = index as usize;
        self.live[i] && self.version[i] == version
    }
    #[inline]
    fn release(&mut self, index: u32) {
        let i = index as usize;
        self.live[i] = false;
        self.version[i] = self.version[i].wrapping_add(1);
        self.free.push(index);
    }
}

/// Seed 003's design: a min-heap; cancel and reset leave stale entries behind,
/// skipped when popped; the heap is rebuilt when stale entries outnumber live.
pub struct LazyHeap {
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    slots: Slots,
    len: usize,
}

impl LazyHeap {
    fn compact_if_stale(&mut self) {
        if self.heap.len() > 2 * self.len + 1024 {
            let slots = &self.slots;
            let live: Vec<_> = (0..slots.live.len())
                .filter(|&i| slots.live[i])
                .map(|i| Reverse((slots.deadline_ms[i], i as u32, slots.version[i])))
                .collect();
            self.heap = BinaryHeap::from(live);
        }
    }
}

impl TimerQueue for LazyHeap {
    type Key = SlotKey;
    const NAME: &'static str = "binaryheap-lazy";

    fn with_capacity(capacity: usize) -> Self {
        LazyHeap { heap: BinaryHeap::with_capacity(capacity), slots: Slots::with_capacity(capacity), len: 0 }
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64) -> Self::Key {
        let key = self.slots.alloc(deadline_ms);
        self.heap.push(Reverse((deadline_ms, key.0, key.1)));
        self.len += 1;
        key
    }
    #[inline]
    fn cancel(&mut self, key: Self::Key) -> bool {
        if !self.slots.is_live(key) {
            return false;
        }
        self.slots.release(key.0);
        self.len -= 1;
        self.compact_if_stale();
        true
    }
    #[inline]
    fn reset(&mut self, key: Self::Key, deadline_ms: u64) -> Self::Key {
        let i = key.0 as usize;
        self.slots.version[i] = self.slots.version[i].wrapping_add(1);
        self.slots.deadline_ms[i] = deadline_ms;
        let key = (key.0, self.slots.version[i]);
        self.heap.push(Reverse((deadline_ms, key.0, key.1)));
        self.compact_if_stale();
        key
    }
    fn advance(&mut self, now_ms: u64) -> usize {
        let mut fired = 0;
        while let Some(&Reverse((deadline, index, version))) = self.heap.peek() {
            if deadline > now_ms {
                break;
            }
            self.heap.pop();
            if self.slots.is_live((index, version)) {
                self.slots.release(index);
                self.len -= 1;
                fired += 1;
            }
        }
        fired
    }
}

/// A `BTreeMap` keyed by (deadline, slot): every operation O(log n), exact.
pub struct BTree {
    map: BTreeMap<(u64, u32), ()>,
    slots: Slots,
}

impl TimerQueue for BTree {
    type Key = SlotKey;
    const NAME: &'static str = "btreemap";

    fn with_capacity(capacity: usize) -> Self {
        BTree { map: BTreeMap::new(), slots: Slots::with_capacity(capacity) }
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64) -> Self::Key {
        let key = self.slots.alloc(deadline_ms);
        self.map.insert((deadline_ms, key.0), ());
        key
    }
    #[inline]
    fn cancel(&mut self, key: Self::Key) -> bool {
        if !self.slots.is_live(key) {
            return false;
        }
        self.map.remove(&(self.slots.deadline_ms[key.0 as usize], key.0));
        self.slots.release(key.0);
        true
    }
    #[inline]
    fn reset(&mut self, key: Self::Key, deadline_ms: u64) -> Self::Key {
        let i = key.0 as usize;
        self.map.remove(&(self.slots.deadline_ms[i], key.0));
        self.slots.deadline_ms[i] = deadline_ms;
        self.map.insert((deadline_ms, key.0), ());
        key
    }
    fn advance(&mut self, now_ms: u64) -> usize {
        let mut fired = 0;
        while let Some(entry) = self.map.first_entry() {
            if entry.key().0 > now_ms {
                break;
            }
            let (_, index) = entry.remove_entry().0;
            self.slots.release(index);
            fired += 1;
        }
        fired
    }
}

/// Seed 000's design: one `Vec` sorted by deadline, binary-search insert with
/// O(n) shifting. Cancel finds the entry by binary search (the seed scans).
pub struct SortedVec {
    sorted: Vec<(u64, u32)>,
    slots: Slots,
}

impl SortedVec {
    fn position(&self, index: u32) -> Result<usize, usize> {
        self.sorted.binary_search(&(self.slots.deadline_ms[index as usize], index))
    }
}

impl TimerQueue for SortedVec {
    type Key = SlotKey;
    const NAME: &'static str = "sorted-vec";

    fn with_capacity(capacity: usize) -> Self {
        SortedVec { sorted: Vec::with_capacity(capacity), slots: Slots::with_capacity(capacity) }
    }
    fn insert(&mut self, deadline_ms: u64) -> Self::Key {
        let key = self.slots.alloc(deadline_ms);
        let at = self.position(key.0).unwrap_or_else(|at| at);
        self.sorted.insert(at, (deadline_ms, key.0));
        key
    }
    fn cancel(&mut self, key: Self::Key) -> bool {
        if !self.slots.is_live(key) {
            return false;
        }
        if let Ok(at) = self.position(key.0) {
            self.sorted.remove(at);
        }
        self.slots.release(key.0);
        true
    }
    fn reset(&mut self, key: Self::Key, deadline_ms: u64) -> Self::Key {
        if let Ok(at) = self.position(key.0) {
            self.sorted.remove(at);
        }
        self.slots.deadline_ms[key.0 as usize] = deadline_ms;
        let at = self.position(key.0).unwrap_or_else(|at| at);
        self.sorted.insert(at, (deadline_ms, key.0));
        key
    }
    fn advance(&mut self, now_ms: u64) -> usize {
        let due = self.sorted.partition_point(|&(deadline, _)| deadline <= now_ms);
        for (_, index) in self.sorted.drain(..due) {
            self.slots.release(index);
        }
        due
    }
}
