//! Looking ahead without advancing: what comes out next, and when.

use super::level::{location, slot_span, slot_start, split_location, NUM_LEVELS};
use super::lists::SUBLISTS;
use super::slab::NIL;
use super::{Key, Wheel};

impl<T> Wheel<T> {
    /// A tick before which nothing will expire: `advance` to an earlier tick
    /// expires nothing. It is the current tick if entries wait to be popped,
    /// `None` if the wheel is empty. It is exact unless entries were removed or
    /// reset later since their slot was filed, in which case it may be early:
    /// advancing to it then re-files those entries and expires nothing.
    /// [`next_deadline`](Wheel::next_deadline) is exact.
    #[inline]
    pub fn next_expiration(&self) -> Option<u64> {
        if self.expired_len > 0 {
            return Some(self.elapsed);
        }
        let (location, start) = self.next_slot()?;
        // The first slot's earliest deadline may lie past the slot itself
        // (entries reset later wait there), where a later slot may hold an
        // earlier one: nothing in a later slot is due within this one.
        let (level, _) = split_location(location);
        let last = start.saturating_add(slot_span(level) - 1);
        Some(start.max(self.lists.min_deadline[location as usize].min(last)))
    }

    /// The earliest deadline of the entries, exactly: the current tick if
    /// entries wait to be popped, `None` if the wheel is empty. `advance` to
    /// it expires something, to any earlier tick nothing.
    ///
    /// Each slot keeps a lower bound of its deadlines and the entry that set
    /// it (its witness), so this is usually
    /// [`next_expiration`](Wheel::next_expiration) read again, with one look
    /// at the witness. Once the witness has left its slot or been reset
    /// later, the slot's bound may be loose, and the first call that needs it
    /// walks the slot's entries to learn its earliest deadline again (at most
    /// the cost of a [`peek`](Wheel::peek), and it stops at an entry due at
    /// the old bound). Removes and resets pay nothing for it.
    ///
    /// # Example
    /// ```
    /// use hourglass::Wheel;
    ///
    /// let mut wheel = Wheel::new();
    /// let soon = wheel.insert(100, "soon").unwrap();
    /// let _later = wheel.insert(110, "later").unwrap(); // the same 64-tick slot
    /// wheel.reset(soon, 5_000);
    /// assert_eq!(wheel.next_expiration(), Some(100), "a lower bound");
    /// assert_eq!(wheel.next_deadline(), Some(110), "exact");
    /// assert_eq!(wheel.next_expiration(), Some(110), "exact again");
    /// ```
    pub fn next_deadline(&mut self) -> Option<u64> {
        if self.expired_len > 0 {
            return Some(self.elapsed);
        }
        // Slots in the order they are processed start in increasing order,
        // and hold nothing due before their start.
        let mut best: Option<u64> = None;
        let mut levels = self.lists.occupied_levels;
        while levels != 0 {
            let level = levels.trailing_zeros() as usize;
            levels &= levels - 1;
            let mut occupied = self.lists.occupancy[level];
            while occupied != 0 {
                let slot = occupied.trailing_zeros() as usize;
                occupied &= occupied - 1;
                if best.is_some_and(|best| best <= slot_start(level, slot, self.elapsed)) {
                    return best;
                }
                let location = location(level, slot);
                if !self.bound_is_witnessed(location) {
                    self.tighten(location);
                }
                let min = self.lists.min_deadline[location as usize];
                best = Some(best.map_or(min, |best| best.min(min)));
            }
        }
        best
    }

    /// Whether the entry that set a slot's bound is still there and due at
    /// it: then no entry of the slot is due earlier, and the bound is exact.
    #[inline]
    fn bound_is_witnessed(&self, location: u16) -> bool {
        let witness = self.lists.min_witness[location as usize];
        witness != NIL && {
            let entry = self.slab.entry(witness);
            entry.value.is_some()
                && entry.location == location
                && entry.deadline == self.lists.min_deadline[location as usize]
        }
    }

    /// Walks a slot whose bound may be loose to learn its earliest deadline
    /// and an entry due then; an entry due at the old bound ends the walk.
    #[cold]
    fn tighten(&mut self, location: u16) {
        let floor = self.lists.min_deadline[location as usize];
        let (mut min, mut witness) = (u64::MAX, NIL);
        let base = location as usize * SUBLISTS;
        'lists: for list in base..base + SUBLISTS {
            let mut index = self.lists.head[list];
            while index != NIL {
                let entry = self.slab.entry(index);
                if entry.deadline < min || witness == NIL {
                    (min, witness) = (entry.deadline, index);
                    if min <= floor {
                        break 'lists;
                    }
                }
                index = entry.next;
            }
        }
        self.lists.min_deadline[location as usize] = min;
        self.lists.min_witness[location as usize] = witness;
    }

    /// The key of the entry that [`pop_expired`](Wheel::pop_expired) will take
    /// next, once the wheel has advanced far enough: the first expired entry if
    /// any wait, else the pending entry with the earliest deadline, ties in
    /// insertion order (a reset counts as an insertion).
    ///
    /// Finds it by walking the first occupied slots until no later slot can
    /// hold an earlier deadline, so it costs the entries of one slot, or a few
    /// where entries were reset later.
    ///
    /// # Example
    /// ```
    /// use hourglass::Wheel;
    ///
    /// let mut wheel = Wheel::new();
    /// let _late = wheel.insert(120, "late").unwrap();
    /// let early = wheel.insert(100, "early").unwrap(); // the same 64-tick slot
    /// assert_eq!(wheel.peek(), Some(early));
    /// wheel.advance(1_000);
    /// assert_eq!(wheel.pop_expired().unwrap().key, early);
    /// ```
    pub fn peek(&self) -> Option<Key> {
        if let Some(key) = self.peek_expired() {
            return Some(key);
        }
        // Slots are processed lowest level first, lowest slot first, and every
        // entry in a slot is due at or after the slot's start: once the best
        // entry found is due before a slot's start, nothing later can beat it.
        let mut best: Option<(u64, u64, u32)> = None;
        'levels: for level in 0..NUM_LEVELS {
            let mut occupied = self.lists.occupancy[level];
            while occupied != 0 {
                let slot = occupied.trailing_zeros() as usize;
                occupied &= occupied - 1;
                let location = location(level, slot);
                if let Some((deadline, _, _)) = best {
                    if deadline < slot_start(level, slot, self.elapsed) {
                        break 'levels;
                    }
                    if self.lists.min_deadline[location as usize] > deadline {
                        continue;
                    }
                }
                for list in 0..SUBLISTS {
                    let mut index = self.lists.head[location as usize * SUBLISTS + list];
                    while index != NIL {
                        let entry = self.slab.entry(index);
                        let candidate = (entry.deadline, entry.seq, index);
                        if best.is_none_or(|best| (candidate.0, candidate.1) < (best.0, best.1)) {
                            best = Some(candidate);
                        }
                        index = entry.next;
                    }
                }
            }
        }
        best.map(|(_, _, index)| Key { index, generation: self.slab.entry(index).generation })
    }

    /// The next slot to process and the tick it starts at.
    #[inline]
    pub(super) fn next_slot(&self) -> Option<(u16, u64)> {
        let levels = self.lists.occupied_levels;
        if levels == 0 {
            return None;
        }
        let level = levels.trailing_zeros() as usize;
        let slot = self.lists.occupancy[level].trailing_zeros() as usize;
        Some((location(level, slot), slot_start(level, slot, self.elapsed)))
    }
}
