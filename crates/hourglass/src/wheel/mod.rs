//! The hierarchical timing wheel: a pure data structure, with no threads, no
//! clock and no I/O. Time is an integer tick count that the caller passes in.

mod batch;
mod key;
pub(crate) mod level;
mod lists;
mod next;
mod slab;

use std::fmt;

use batch::Batch;

pub use key::Key;
use level::{level_for, location, slot_for, slot_start, split_location, NUM_LEVELS};
use lists::{Lists, EXPIRED, EXPIRED_LIST, SUBLISTS};
use slab::{Slab, MAX_ENTRIES, NIL};

/// A hierarchical hashed timing wheel (Varghese & Lauck, 1987, scheme 7).
///
/// Holds values of type `T`, each due at a deadline in *ticks*: an abstract
/// `u64` time unit that the caller chooses (the [`Scheduler`](crate::Scheduler)
/// uses one millisecond by default). The wheel does nothing on its own: the
/// caller moves it forward with [`advance`](Wheel::advance) and takes what came
/// due with [`pop_expired`](Wheel::pop_expired).
///
/// # Example
/// ```
/// use hourglass::Wheel;
///
/// let mut wheel = Wheel::new();
/// let tea = wheel.insert(3, "tea is ready").unwrap();
/// let _eggs = wheel.insert(5, "eggs are boiled").unwrap();
/// assert!(wheel.reset(tea, 4)); // a little stronger
///
/// assert_eq!(wheel.advance(4), 1);
/// assert_eq!(wheel.pop_expired().unwrap().value, "tea is ready");
/// assert!(wheel.pop_expired().is_none()); // the eggs are not due yet
/// ```
///
/// # Implementation
///
/// [`NUM_LEVELS`](Wheel::NUM_LEVELS) levels of 64 slots; a slot at level `L`
/// spans `64^L` ticks, so the levels together cover every `u64` deadline and no
/// overflow list is needed:
///
/// | level | one slot spans | the level spans | at a 1 ms tick |
/// |------:|---------------:|----------------:|---------------:|
/// | 0 | 1 tick | 64 ticks | 64 ms |
/// | 1 | 64 | 4 096 | 4.1 s |
/// | 2 | 4 096 | 262 144 | 4.4 min |
/// | 3 | 262 144 | 16.8 M | 4.7 h |
/// | 4 | 16.8 M | 1.07 G | 12.4 days |
/// | 5 | 1.07 G | 68.7 G | 2.2 years |
/// | 6 … 10 | … | up to 2^64 | 585 million years |
///
/// An entry is filed in the level of the highest bit in which its deadline
/// differs from the wheel's time, so its slot is always ahead of the level's
/// current position and a level never wraps. Each level keeps a 64-bit
/// occupancy word, so finding the next slot to process is two
/// `trailing_zeros`, never a scan of empty slots.
///
/// Each slot is eight intrusive doubly linked lists (an entry's storage index
/// picks one) through a paged slab of 32-byte entries (payload excluded), so
/// insert and remove are O(1), and processing a slot walks the eight lists in
/// rounds, reading one entry of each before filing any: their cache misses
/// overlap instead of following one chain.
/// [`reset`](Wheel::reset) is O(1) too, and usually does not move the entry at
/// all: moving a deadline later than the start of the entry's current slot
/// only rewrites the deadline, and the entry is re-filed when its slot comes
/// round. That makes the heartbeat pattern (reset a million timeouts, few of
/// which ever fire) touch one cache line per reset.
///
/// When the wheel reaches a slot, it takes the slot's whole list: entries now
/// due move to the expired list, the others are re-filed one level down (or,
/// if they were reset later, wherever their new deadline belongs). Entries due
/// at the same tick come out in the order they were inserted, counting a
/// reset as a new insertion.
pub struct Wheel<T> {
    slab: Slab<T>,
    lists: Box<Lists>,
    /// The current tick: every entry due at or before it has expired.
    elapsed: u64,
    next_seq: u64,
    expired_len: usize,
}

/// An entry taken from the wheel by [`Wheel::pop_expired`] or [`Wheel::remove_entry`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired<T> {
    /// The key the entry had; it is stale now.
    pub key: Key,
    /// The tick the entry was due at.
    pub deadline: u64,
    /// The value inserted.
    pub value: T,
}

/// The wheel already holds [`Wheel::MAX_ENTRIES`] entries; the value is handed back.
#[derive(Clone, PartialEq, Eq)]
pub struct CapacityError<T>(pub T);

impl<T> fmt::Debug for CapacityError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CapacityError(..)")
    }
}

impl<T> fmt::Display for CapacityError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the timing wheel is full ({} entries)", Wheel::<()>::MAX_ENTRIES)
    }
}

impl<T> std::error::Error for CapacityError<T> {}

impl<T> Default for Wheel<T> {
    fn default() -> Self {
        Wheel::new()
    }
}

impl<T> fmt::Debug for Wheel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wheel")
            .field("len", &self.len())
            .field("elapsed", &self.elapsed)
            .field("expired_len", &self.expired_len)
            .finish_non_exhaustive()
    }
}

impl<T> Wheel<T> {
    /// Levels in the wheel: enough 64-slot levels to cover every `u64` deadline.
    pub const NUM_LEVELS: usize = NUM_LEVELS;

    /// The most entries a wheel holds at once (about 4.3 billion).
    pub const MAX_ENTRIES: usize = MAX_ENTRIES;

    /// An empty wheel at tick 0.
    pub fn new() -> Self {
        Wheel::with_capacity(0)
    }

    /// An empty wheel at tick 0 with room for `capacity` entries before it
    /// allocates.
    pub fn with_capacity(capacity: usize) -> Self {
        Wheel { slab: Slab::with_capacity(capacity), lists: Lists::new(), elapsed: 0, next_seq: 0, expired_len: 0 }
    }

    /// Entries in the wheel, expired ones not yet popped included.
    #[inline]
    pub fn len(&self) -> usize {
        self.slab.len()
    }

    /// Whether the wheel holds no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The wheel's current tick: the latest `now` given to [`advance`](Wheel::advance).
    #[inline]
    pub fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// Entries that have expired and wait to be popped.
    #[inline]
    pub fn expired_len(&self) -> usize {
        self.expired_len
    }

    /// Bytes the wheel has allocated for its entries and lists, payloads
    /// included as far as they are stored inline.
    pub fn allocated_bytes(&self) -> usize {
        self.slab.bytes_reserved() + std::mem::size_of::<Lists>()
    }

    /// Entries the wheel holds before it allocates again: a whole number of
    /// pages of 4096 entries.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.slab.capacity()
    }

    /// Makes room for at least `additional` more entries, kept until
    /// [`shrink_to_fit`](Wheel::shrink_to_fit).
    pub fn reserve(&mut self, additional: usize) {
        self.slab.reserve(additional);
    }

    /// Gives back the memory of the empty pages at the top of the entry
    /// storage, reserved ones included.
    ///
    /// The wheel also does this by itself as it empties, keeping one spare
    /// page: new entries go to the lowest page with room, so as the set of
    /// entries turns over, the top pages empty and are given back. Entries
    /// never move (their keys stay valid), so an entry that stays put in a
    /// high page holds its page until it leaves.
    ///
    /// # Example
    /// ```
    /// use hourglass::Wheel;
    ///
    /// let mut wheel = Wheel::new();
    /// let keys: Vec<_> = (0..100_000).map(|i| wheel.insert(i, ()).unwrap()).collect();
    /// let full = wheel.allocated_bytes();
    /// for key in keys {
    ///     wheel.remove(key);
    /// }
    /// assert!(wheel.allocated_bytes() < full / 10, "given back by itself");
    /// wheel.shrink_to_fit();
    /// assert_eq!(wheel.capacity(), 0);
    /// ```
    pub fn shrink_to_fit(&mut self) {
        self.slab.shrink_to_fit();
    }

    /// Adds `value`, due at tick `deadline`. A deadline at or before the
    /// current tick expires at once: the entry can be popped without advancing.
    ///
    /// # Errors
    /// [`CapacityError`], with the value, if the wheel holds
    /// [`MAX_ENTRIES`](Wheel::MAX_ENTRIES) already.
    #[inline]
    pub fn insert(&mut self, deadline: u64, value: T) -> Result<Key, CapacityError<T>> {
        let seq = self.next_seq;
        let key = self.slab.insert(deadline, seq, value).map_err(CapacityError)?;
        self.next_seq += 1;
        self.file(key.index, deadline);
        Ok(key)
    }

    /// Removes the entry, expired or not, and returns its value; `None` if the
    /// key is stale.
    #[inline]
    pub fn remove(&mut self, key: Key) -> Option<T> {
        self.remove_entry(key).map(|entry| entry.value)
    }

    /// Removes the entry, expired or not, and returns it with its key and
    /// deadline; `None` if the key is stale.
    #[inline]
    pub fn remove_entry(&mut self, key: Key) -> Option<Expired<T>> {
        let deadline = self.slab.live(key)?.deadline;
        self.unlink(key.index);
        Some(Expired { key, deadline, value: self.slab.remove(key.index) })
    }

    /// Moves the entry's deadline, earlier or later; `false` if the key is stale.
    ///
    /// The entry keeps its key and counts as newly inserted for the order in
    /// which entries due at the same tick come out. An expired entry that is
    /// reset to a future deadline becomes pending again.
    #[inline]
    pub fn reset(&mut self, key: Key, deadline: u64) -> bool {
        self.reset_from(key, deadline).is_some()
    }

    /// [`reset`](Wheel::reset), returning the deadline the entry had.
    #[inline]
    pub(crate) fn reset_from(&mut self, key: Key, deadline: u64) -> Option<u64> {
        let seq = self.next_seq;
        let entry = self.slab.live_mut(key)?;
        self.next_seq = seq + 1;
        // An entry in a slot is due at or after the slot's start, so a deadline
        // no earlier than its current one can wait there: the slot re-files it
        // when it comes round. This is the heartbeat path: one cache line, and
        // small enough that many resets overlap their cache misses.
        if entry.location != EXPIRED && deadline >= entry.deadline {
            let old = entry.deadline;
            entry.deadline = deadline;
            entry.seq = seq;
            return Some(old);
        }
        let old = entry.deadline;
        self.reset_earlier(key.index, deadline, seq);
        Some(old)
    }

    /// [`reset`](Wheel::reset) of a live entry to an earlier deadline, or of an
    /// expired one. Out of line to keep the heartbeat path small.
    #[inline(never)]
    fn reset_earlier(&mut self, index: u32, deadline: u64, seq: u64) {
        let elapsed = self.elapsed;
        let entry = self.slab.entry_mut(index);
        let location = entry.location;
        let stays = location != EXPIRED && deadline > elapsed && {
            let (level, slot) = split_location(location);
            deadline >= slot_start(level, slot, elapsed)
        };
        if stays {
            // Still within reach of its slot: lower the slot's bound instead.
            entry.deadline = deadline;
            entry.seq = seq;
            self.bound_add(location, index, deadline);
            return;
        }
        self.unlink(index);
        let entry = self.slab.entry_mut(index);
        entry.deadline = deadline;
        entry.seq = seq;
        self.file(index, deadline);
    }

    /// Whether the key names a live entry.
    #[inline]
    pub fn contains(&self, key: Key) -> bool {
        self.slab.live(key).is_some()
    }

    /// The entry's deadline, if the key is live.
    #[inline]
    pub fn deadline(&self, key: Key) -> Option<u64> {
        self.slab.live(key).map(|entry| entry.deadline)
    }

    /// The entry's value, if the key is live.
    #[inline]
    pub fn get(&self, key: Key) -> Option<&T> {
        self.slab.live(key)?.value.as_ref()
    }

    /// The entry's value, mutably, if the key is live.
    #[inline]
    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        self.slab.live_mut(key)?.value.as_mut()
    }

    /// Moves the wheel to tick `now`, expiring every entry due at or before it;
    /// returns how many expired. A `now` at or before the current tick does
    /// nothing: the wheel's time never goes back.
    pub fn advance(&mut self, now: u64) -> usize {
        if now <= self.elapsed {
            return 0;
        }
        let before = self.expired_len;
        while let Some((location, start)) = self.next_slot() {
            if start > now {
                break;
            }
            // Nothing lies before `start` (lower levels are empty), so the
            // wheel can stand there while it takes the slot apart.
            self.elapsed = start;
            self.process_slot(location);
        }
        self.elapsed = now;
        self.expired_len - before
    }

    /// Takes the first expired entry, in deadline order, ties in insertion order.
    #[inline]
    pub fn pop_expired(&mut self) -> Option<Expired<T>> {
        let index = self.lists.head[EXPIRED_LIST];
        if index == NIL {
            return None;
        }
        self.unlink(index);
        let entry = self.slab.entry(index);
        let (deadline, generation) = (entry.deadline, entry.generation);
        let value = self.slab.remove(index);
        Some(Expired { key: Key { index, generation }, deadline, value })
    }

    /// The key of the entry [`pop_expired`](Wheel::pop_expired) would take,
    /// without taking it: the caller may then `remove`, `reset` or `get_mut` it.
    #[inline]
    pub fn peek_expired(&self) -> Option<Key> {
        let index = self.lists.head[EXPIRED_LIST];
        (index != NIL).then(|| Key { index, generation: self.slab.entry(index).generation })
    }

    /// Removes every entry, expired or not, and returns them with their keys,
    /// in no particular order.
    pub fn drain(&mut self) -> impl Iterator<Item = (Key, T)> + '_ {
        let keys: Vec<Key> = self.slab.keys().collect();
        keys.into_iter().filter_map(move |key| self.remove(key).map(|value| (key, value)))
    }

    /// Files an unlinked entry by its deadline.
    #[inline]
    fn file(&mut self, index: u32, deadline: u64) {
        if deadline <= self.elapsed {
            self.push_back(EXPIRED, index);
            return;
        }
        let level = level_for(self.elapsed, deadline);
        let location = location(level, slot_for(level, deadline));
        self.bound_add(location, index, deadline);
        self.push_back(location, index);
    }

    /// Takes a slot's lists apart at `self.elapsed` == the slot's start.
    ///
    /// At a million timers nearly every step along a list is a cache miss,
    /// and a list is a chain: its next entry is known only once this one is
    /// read. So the walk goes in rounds, one step of every sublist each: it
    /// first reads the round's entries, [`SUBLISTS`] independent loads whose
    /// misses overlap, and only then files them, while the next round's loads
    /// are already on their way. The entries found due are put in insertion
    /// order by their [`Batch`] before they join the expired list.
    fn process_slot(&mut self, location: u16) {
        let base = location as usize * SUBLISTS;
        let mut cursors = [NIL; SUBLISTS];
        for (k, cursor) in cursors.iter_mut().enumerate() {
            *cursor = std::mem::replace(&mut self.lists.head[base + k], NIL);
            self.lists.tail[base + k] = NIL;
        }
        self.vacate(location as usize);
        let now = self.elapsed;
        let mut batch = Batch::new(self);
        let mut round = [(NIL, 0u64, 0u64); SUBLISTS];
        loop {
            let mut taken = 0;
            for cursor in &mut cursors {
                let index = *cursor;
                if index != NIL {
                    let entry = self.slab.entry(index);
                    round[taken] = (index, entry.deadline, entry.seq);
                    taken += 1;
                    *cursor = entry.next;
                }
            }
            if taken == 0 {
                break;
            }
            for &(index, deadline, seq) in &round[..taken] {
                if deadline <= now {
                    batch.add(self, seq, index);
                } else {
                    self.file(index, deadline);
                }
            }
        }
        batch.finish(self);
    }
}

#[cfg(test)]
mod tests;
