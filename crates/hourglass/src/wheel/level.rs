//! The geometry of the wheel: how a deadline maps to a level and a slot.
//!
//! Every level has [`SLOTS`] slots; a slot at level `L` spans `SLOTS^L` ticks.
//! An entry is filed by the highest bit in which its deadline differs from the
//! wheel's current time (`elapsed`): that bit's level is the entry's level, and
//! the deadline's digit at that level is its slot. Because the two agree on every
//! higher digit, an entry's slot is always *ahead* of the current position of its
//! level, so a level never wraps around and "the next occupied slot" is simply the
//! lowest set bit of the level's occupancy word.

/// Bits of a deadline consumed by one level.
pub(crate) const SLOT_BITS: u32 = 6;

/// Slots per level: one per bit of a `u64` occupancy word.
pub(crate) const SLOTS: usize = 1 << SLOT_BITS;

/// Levels needed to cover every `u64` deadline, so no overflow list is needed.
pub(crate) const NUM_LEVELS: usize = (u64::BITS as usize).div_ceil(SLOT_BITS as usize);

/// Number of slot lists across all levels.
pub(crate) const NUM_SLOTS: usize = NUM_LEVELS * SLOTS;

const _: () = assert!(SLOTS == u64::BITS as usize, "occupancy is one u64 word per level");
const _: () = assert!(NUM_LEVELS * SLOT_BITS as usize >= u64::BITS as usize);
const _: () = assert!((NUM_LEVELS - 1) * (SLOT_BITS as usize) < u64::BITS as usize);
const _: () = assert!(NUM_SLOTS < u16::MAX as usize, "a slot's location fits a u16");

/// The level an entry due at `deadline` belongs to while the wheel is at `elapsed`.
#[inline]
pub(crate) fn level_for(elapsed: u64, deadline: u64) -> usize {
    debug_assert!(deadline > elapsed, "deadline {deadline} <= elapsed {elapsed}");
    let highest_differing_bit = u64::BITS - 1 - (elapsed ^ deadline).leading_zeros();
    (highest_differing_bit / SLOT_BITS) as usize
}

/// The slot within `level` for `deadline`.
#[inline]
pub(crate) fn slot_for(level: usize, deadline: u64) -> usize {
    ((deadline >> (level as u32 * SLOT_BITS)) & (SLOTS as u64 - 1)) as usize
}

/// The first tick covered by `slot` of `level` while the wheel is at `elapsed`.
#[inline]
pub(crate) fn slot_start(level: usize, slot: usize, elapsed: u64) -> u64 {
    let level_shift = level as u32 * SLOT_BITS;
    let above_shift = level_shift + SLOT_BITS;
    let above = if above_shift >= u64::BITS { 0 } else { elapsed >> above_shift << above_shift };
    above | ((slot as u64) << level_shift)
}

/// Ticks one slot of `level` spans.
#[inline]
pub(crate) fn slot_span(level: usize) -> u64 {
    1 << (level as u32 * SLOT_BITS)
}

/// The location (index of the slot list) of `slot` in `level`.
#[inline]
pub(crate) fn location(level: usize, slot: usize) -> u16 {
    (level * SLOTS + slot) as u16
}

/// The `(level, slot)` of a slot list's location.
#[inline]
pub(crate) fn split_location(location: u16) -> (usize, usize) {
    let location = location as usize;
    (location / SLOTS, location % SLOTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_cover_u64() {
        assert_eq!(NUM_LEVELS, 11);
        assert_eq!(level_for(0, 1), 0);
        assert_eq!(level_for(0, 63), 0);
        assert_eq!(level_for(0, 64), 1);
        assert_eq!(level_for(0, 4095), 1);
        assert_eq!(level_for(0, 4096), 2);
        assert_eq!(level_for(0, u64::MAX), NUM_LEVELS - 1);
        assert_eq!(level_for(u64::MAX - 1, u64::MAX), 0);
    }

    #[test]
    fn slot_start_is_at_or_before_every_deadline_in_it() {
        for (elapsed, deadline) in [(0, 1), (5, 64), (100, 5000), (1 << 40, u64::MAX), (0, u64::MAX)] {
            let level = level_for(elapsed, deadline);
            let slot = slot_for(level, deadline);
            let start = slot_start(level, slot, elapsed);
            assert!(start <= deadline, "start {start} deadline {deadline}");
            assert!(start > elapsed, "start {start} elapsed {elapsed}");
            let (l, s) = split_location(location(level, slot));
            assert_eq!((l, s), (level, slot));
        }
    }
}
