//! This node's waiting claims, as its shards' fire scripts may serve them
//! (`handover.rs`): a claim registers a [`Taker`] while it waits; a fire on
//! this node offers the script the takers of the queues it fires, the
//! script leases due tasks for them, and the fire puts them in the takers,
//! whose claims return them.
//!
//! **When a claim registers.** A claim that may wait and whose taker may
//! linger (below) registers as it arrives, and is offered to the fires
//! while its looks ask Redis, the first included: what a fire hands it
//! then, if the look found tasks too, waits in the taker for the next
//! claim. Registered only once a look found nothing, a consumer that
//! claims again at once was registered for little of its time under a
//! steady flow; the fires on its node then found no taker, hinted every
//! node, and claim scripts of every node raced for the tasks, most of them
//! finding nothing (`BENCHMARKS.md`, "Claims offered to the fires from
//! their first look"). A claim whose taker may not linger registers once a
//! look found nothing, and is not offered while it looks, as what a fire
//! handed it then would be given back; so does a claim that does not wait
//! (`wait_ms` 0), which looks once and would leave to its taker what a
//! fire handed it during that look.
//!
//! A taker holds the tasks handed to it until its claim takes them (at most
//! the claim's `max` at a time). While fires' scripts are under way with it
//! it is **offered**, to several fires at once: each is promised a share of
//! the room no other fire was promised (divided by the fires that may be
//! under way with it: `handover.rs`), so that no claim is handed more than
//! it asked for and a node's shards that fire together share its claims.
//! Offered to one fire at a time, a push taker was held by some fire most of
//! the time, and nine fires in ten found none (`BENCHMARKS.md`, "A claim
//! offered to several fires at once"). A claim takes what a fire handed it
//! as soon as it is there, even while other fires are under way with it;
//! one that looks while fires are under way and finds nothing waits for
//! them rather than asking Redis itself (it would race the fires for the
//! same tasks), and the last to answer wakes it. A pull taker that holds
//! tasks, or whose claim looked meanwhile, is not offered again.
//!
//! **A taker lingers** after its claim ends, for the next claim that wants
//! the same (a push claim, or a pull claim of the same queues and lease) to
//! adopt it with what the fires put in it meanwhile: always a push taker
//! (the delivery loop claims again as soon as it has started the requests,
//! so that under a steady flow a node's pushes go from its fires to its
//! loop without a claim script), and a pull taker that holds tasks or that
//! fires under way may still answer (what they hand it waits for the next
//! claim, rather than being given back: a claim answered by the first fire
//! that handed it tasks waited for the others before, `BENCHMARKS.md`, "A
//! task handed to its claim ahead of its due time"). A lingering taker is
//! offered to fires for [`LINGER_OFFERED_MS`] only (a loop that does not
//! claim again by then has no free slot), and what it holds after
//! [`LINGER_MS`] is left over, as are the tasks of a taker removed when its
//! claim ended: the caller gives them back to their queue. Both bounds are
//! far below the shortest push lease and a lingering pull taker's lease
//! ([`PULL_LINGER_LEASE_MIN_MS`]), so nothing waits in a taker past its
//! lease.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

use hourglass_queue::limits::{PUSH_LEASE_MARGIN_MS, PUSH_TIMEOUT_MS_MIN};
use hourglass_queue::{Claimed, Delivery};

/// A push taker whose claim ended is offered to fires this long, for the
/// delivery loop's next claim to adopt.
pub(crate) const LINGER_OFFERED_MS: u64 = 5;
/// A push taker not adopted this long after its claim ended gives back what
/// it holds (checked every [`LINGER_MS`] / 2).
pub(crate) const LINGER_MS: u64 = 100;
const _: () = assert!(LINGER_OFFERED_MS < LINGER_MS);
/// A pull taker lingers only if its claim's lease is at least this long, so
/// that its tasks wait there far less than their lease: one with a shorter
/// lease is removed when its claim ends, and what fires hand it afterwards
/// is given back.
pub(crate) const PULL_LINGER_LEASE_MIN_MS: u64 = 10 * LINGER_MS;
// Push tasks wait in a lingering taker (at most 1.5 × LINGER_MS) far less
// than the shortest push lease; pull tasks far less than their lease.
const _: () = assert!(10 * LINGER_MS < PUSH_TIMEOUT_MS_MIN as u64 + PUSH_LEASE_MARGIN_MS);

/// What a waiting claim takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wants {
    /// Pull tasks of these queues, each under a lease of `lease_ms` (unless
    /// the task has its own).
    Pull { queues: Vec<Arc<str>>, lease_ms: u64 },
    /// Push tasks of any queue, each under its target's lease.
    Push,
}

impl Wants {
    /// Whether its taker may linger after its claim ends: a push taker, or
    /// a pull taker whose lease is long enough that nothing waits there near
    /// its end ([`PULL_LINGER_LEASE_MIN_MS`]).
    pub(crate) fn lingers(&self) -> bool {
        match self {
            Wants::Push => true,
            Wants::Pull { lease_ms, .. } => *lease_ms >= PULL_LINGER_LEASE_MIN_MS,
        }
    }

    pub(crate) fn delivery(&self) -> Delivery {
        match self {
            Wants::Pull { .. } => Delivery::Pull,
            Wants::Push => Delivery::Push,
        }
    }
}

#[derive(Debug)]
struct State {
    /// Most tasks its claim takes.
    max: usize,
    /// Handed over, waiting for a claim to take them.
    tasks: Vec<Claimed>,
    /// Fires whose scripts are under way with it.
    offers: usize,
    /// The room promised to those fires, together.
    promised: usize,
    /// Its claim looked while it was offered: woken when a fire answers.
    looked: bool,
    /// Its claim, whose taker may not linger, is looking in Redis: not
    /// offered meanwhile, as what a fire handed it then would be given back
    /// if the look finds tasks.
    looking: bool,
    /// Its claim's look in Redis found nothing due (once, at least): it
    /// waits. Not yet for a taker registered before the claim's first look.
    found_nothing: bool,
    /// No claim holds it (it lingers), since then.
    lingering: Option<Instant>,
    /// Removed: what reaches it is left over.
    closed: bool,
}

impl State {
    /// The room a fire is promised, if it may be offered now: a `shares`th
    /// of what is neither filled nor promised to another fire (rounded up),
    /// so that the fires under way together each get some. A pull taker
    /// holding tasks is not offered, nor any taker whose claim looked while
    /// fires were under way: its claim waits for those fires, and no more.
    ///
    /// A fire that hands tasks `ahead` of their due time holds the taker
    /// until then: it is offered only a taker that may linger, whose claim
    /// takes what other fires hand it meanwhile rather than waiting for the
    /// hold ([`Wants::lingers`]).
    fn room(&self, wants: &Wants, shares: usize, now: Instant, ahead: bool) -> Option<usize> {
        if ahead && !wants.lingers() {
            return None;
        }
        let fresh = self.lingering.is_none_or(|since| now - since < Duration::from_millis(LINGER_OFFERED_MS));
        let waits = self.looked || (*wants != Wants::Push && !self.tasks.is_empty());
        let free = !self.looking && !self.closed && !waits;
        let left = self.max.saturating_sub(self.tasks.len() + self.promised);
        (free && fresh && left > 0).then(|| left.div_ceil(shares.max(1)))
    }
}

/// One waiting claim: see the [module](self) documentation.
#[derive(Debug)]
pub(crate) struct Taker {
    wants: Wants,
    state: Mutex<State>,
    /// Woken when tasks are put in it, or a fire that held it answers.
    notify: Arc<Notify>,
}

/// What a claim found in its taker when it looked.
#[derive(Debug)]
pub(crate) enum Taken {
    /// Tasks a fire handed over (at most the claim's `max`): the claim
    /// returns them.
    Tasks(Vec<Claimed>),
    /// A fire is under way with it: wait for its answer.
    Offered,
    /// Nothing: look in Redis.
    Nothing,
}

impl Taker {
    pub(crate) fn wants(&self) -> &Wants {
        &self.wants
    }

    /// Notified when the claim should look again.
    pub(crate) fn notify(&self) -> Arc<Notify> {
        self.notify.clone()
    }

    /// What its claim finds when it looks. A claim whose taker may linger
    /// takes what is there even while fires are under way (what they hand
    /// over waits in the taker, lingering, for the next claim); one whose
    /// taker may not waits for their answers first, as does any claim that
    /// finds nothing there, and one whose taker may not linger that then
    /// finds nothing is not offered until [`looked`](Taker::looked).
    pub(crate) fn take(&self) -> Taken {
        let mut state = self.state.lock();
        if !state.tasks.is_empty() && (state.offers == 0 || self.wants.lingers()) {
            let max = state.max.min(state.tasks.len());
            return Taken::Tasks(state.tasks.drain(..max).collect());
        }
        if state.offers > 0 {
            state.looked = true;
            return Taken::Offered;
        }
        state.looking = !self.wants.lingers();
        Taken::Nothing
    }

    /// Its claim's look in Redis ended, finding nothing: it may be offered
    /// again.
    pub(crate) fn looked(&self) {
        let mut state = self.state.lock();
        state.looking = false;
        state.found_nothing = true;
    }

    /// A fire that was promised `room` answered with `tasks` (at most that
    /// many, perhaps none): they wait for the claim, which is woken. Returns
    /// them if the taker was removed.
    pub(crate) fn fill(&self, room: usize, tasks: Vec<Claimed>) -> Vec<Claimed> {
        self.fill_at(room, tasks, 0)
    }

    /// As [`fill`](Taker::fill), Redis's clock reading `now_ms` (as the node
    /// estimates it): a lingering pull taker takes no task whose lease ends
    /// within [`PULL_LINGER_LEASE_MIN_MS`] (a task may carry a lease of its
    /// own, shorter than its claim's), and returns those with what it does
    /// not take.
    pub(crate) fn fill_at(&self, room: usize, mut tasks: Vec<Claimed>, now_ms: u64) -> Vec<Claimed> {
        let mut state = self.state.lock();
        debug_assert!(state.offers > 0 && state.promised >= room || state.closed, "filled unoffered: {state:?}");
        debug_assert!(tasks.len() <= room, "a fire handed {} tasks for room for {room}", tasks.len());
        if state.closed {
            return tasks;
        }
        state.offers -= 1;
        state.promised -= room;
        let short = if state.lingering.is_some() { self.short_leased(&mut tasks, now_ms) } else { Vec::new() };
        state.tasks.extend(tasks);
        // A claim whose taker may linger is woken for the tasks handed to it
        // at once; any other, and one that looked while fires were under way
        // and found none, by the last answer.
        let last = state.offers == 0;
        let has = !state.tasks.is_empty() && (last || self.wants.lingers());
        let wake = (last && std::mem::take(&mut state.looked)) || has;
        drop(state);
        if wake {
            self.notify.notify_one();
        }
        short
    }

    /// Takes out of `tasks` (a pull taker's) those whose lease ends within
    /// [`PULL_LINGER_LEASE_MIN_MS`] of `now_ms`: they are not to wait for a
    /// next claim.
    fn short_leased(&self, tasks: &mut Vec<Claimed>, now_ms: u64) -> Vec<Claimed> {
        if self.wants == Wants::Push {
            return Vec::new();
        }
        let (short, kept) =
            std::mem::take(tasks).into_iter().partition(|task| task.lease_until_ms < now_ms + PULL_LINGER_LEASE_MIN_MS);
        *tasks = kept;
        short
    }

    /// Removed: what it held.
    fn close(&self) -> Vec<Claimed> {
        let mut state = self.state.lock();
        state.closed = true;
        std::mem::take(&mut state.tasks)
    }
}

/// The takers a fire offers its script: each with the room it has, and the
/// queues it serves there.
#[derive(Debug, Default)]
pub(crate) struct Offer {
    pub(crate) takers: Vec<(Arc<Taker>, usize)>,
    /// Per queue fired, in order: the index in `takers` of its pull taker,
    /// and of its push taker.
    pub(crate) by_queue: Vec<(Option<usize>, Option<usize>)>,
}

impl Offer {
    pub(crate) fn is_empty(&self) -> bool {
        self.takers.is_empty()
    }
}

/// Every taker of this node: the claims waiting, in the order they began to
/// wait, and the push takers lingering.
#[derive(Debug, Default)]
pub(crate) struct Takers(Mutex<Vec<Arc<Taker>>>);

impl Takers {
    /// A claim that waits for up to `max` tasks, its look in Redis having
    /// found nothing.
    pub(crate) fn register(&self, wants: Wants, max: usize) -> Arc<Taker> {
        self.register_found(wants, max, true)
    }

    /// A claim that has not looked in Redis yet, for up to `max` tasks.
    pub(crate) fn register_early(&self, wants: Wants, max: usize) -> Arc<Taker> {
        self.register_found(wants, max, false)
    }

    fn register_found(&self, wants: Wants, max: usize, found_nothing: bool) -> Arc<Taker> {
        let state = State {
            max,
            tasks: Vec::new(),
            offers: 0,
            promised: 0,
            looked: false,
            looking: false,
            found_nothing,
            lingering: None,
            closed: false,
        };
        let taker = Arc::new(Taker { wants, state: Mutex::new(state), notify: Arc::new(Notify::new()) });
        self.0.lock().push(taker.clone());
        taker
    }

    /// A claim that wants `wants` adopts a lingering taker that wants the
    /// same, if there is one.
    pub(crate) fn adopt(&self, wants: &Wants, max: usize) -> Option<Arc<Taker>> {
        let takers = self.0.lock();
        let lingering = takers.iter().find(|taker| {
            let mut state = taker.state.lock();
            let adopted = taker.wants == *wants && !state.closed && state.lingering.take().is_some();
            if adopted {
                state.max = max;
            }
            adopted
        });
        lingering.cloned()
    }

    /// Claims waiting, whose look in Redis found nothing (lingering takers
    /// are not).
    pub(crate) fn waiting(&self) -> usize {
        self.count(|state| state.lingering.is_none() && state.found_nothing)
    }

    /// Claims offered to the fires, whether they looked in Redis yet or not
    /// (lingering takers are not).
    pub(crate) fn registered(&self) -> usize {
        self.count(|state| state.lingering.is_none())
    }

    fn count(&self, counted: impl Fn(&State) -> bool) -> usize {
        self.0.lock().iter().filter(|taker| counted(&taker.state.lock())).count()
    }

    /// Whether there is no taker at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.lock().is_empty()
    }

    /// `taker`'s claim ended: unless `closing`, a push taker lingers for the
    /// next push claim, and a pull taker that holds tasks or that fires
    /// under way may still hand some for the next claim that wants the
    /// same; any other is removed, and what it held is returned.
    /// Redis's clock reads `now_ms` (as the node estimates it): what a pull
    /// taker holds whose lease ends within [`PULL_LINGER_LEASE_MIN_MS`] is
    /// returned rather than kept for a next claim.
    pub(crate) fn release(&self, taker: &Arc<Taker>, closing: bool, now_ms: u64) -> Vec<Claimed> {
        if !closing {
            let mut state = taker.state.lock();
            let busy = state.offers > 0 || !state.tasks.is_empty();
            if taker.wants == Wants::Push || (taker.wants.lingers() && busy) {
                state.lingering = Some(Instant::now());
                state.looked = false;
                let mut held = std::mem::take(&mut state.tasks);
                let short = taker.short_leased(&mut held, now_ms);
                state.tasks = held;
                return short;
            }
        }
        self.0.lock().retain(|other| !Arc::ptr_eq(other, taker));
        taker.close()
    }

    /// Removes the takers that lingered [`LINGER_MS`] (and no fire holds):
    /// what they held.
    pub(crate) fn expire(&self, now: Instant) -> Vec<Claimed> {
        let mut left = Vec::new();
        self.0.lock().retain(|taker| {
            let state = taker.state.lock();
            let expired = state.offers == 0
                && state.lingering.is_some_and(|since| now - since >= Duration::from_millis(LINGER_MS));
            drop(state);
            if expired {
                left.extend(taker.close());
            }
            !expired
        });
        left
    }

    /// Removes every taker (the node is closing): what they held.
    pub(crate) fn close_all(&self) -> Vec<Claimed> {
        self.0.lock().drain(..).flat_map(|taker| taker.close()).collect()
    }

    /// A fire's offer that hands nothing ahead (for the tests).
    #[cfg(test)]
    pub(crate) fn offer(&self, queues: &[&str], pushes: impl Fn(&str) -> bool, shares: usize, now: Instant) -> Offer {
        self.offer_to(queues, pushes, shares, now, false)
    }

    /// Offers a fire of `queues` the takers that want them and have room,
    /// the longest waiting first: for each queue, a pull taker waiting on it
    /// (one taker may serve several), and one push taker for those of them
    /// that `pushes` says may hold push tasks; `now` for how long a push
    /// taker lingered. Each taker is offered a `shares`th of its room left
    /// (`shares`: the fires that may be under way with this one), promised
    /// to this fire until [`Taker::fill`]. A fire that hands tasks `ahead`
    /// of their due time is offered only takers that may linger
    /// ([`State::room`]).
    pub(crate) fn offer_to(
        &self,
        queues: &[&str],
        pushes: impl Fn(&str) -> bool,
        shares: usize,
        now: Instant,
        ahead: bool,
    ) -> Offer {
        let waiting = self.0.lock();
        let mut offer = Offer::default();
        let mut push = None;
        for &queue in queues {
            let pull = Self::find(&waiting, &mut offer.takers, shares, now, ahead, |wants| match wants {
                Wants::Pull { queues, .. } => queues.iter().any(|name| &**name == queue),
                Wants::Push => false,
            });
            if push.is_none() && pushes(queue) {
                push = Self::find(&waiting, &mut offer.takers, shares, now, ahead, |wants| *wants == Wants::Push);
            }
            offer.by_queue.push((pull, push.filter(|_| pushes(queue))));
        }
        offer
    }

    /// The first taker `serves` accepts: one already in `offered`, else one
    /// of `waiting` with room, then held and added. Its index in `offered`.
    fn find(
        waiting: &[Arc<Taker>],
        offered: &mut Vec<(Arc<Taker>, usize)>,
        shares: usize,
        now: Instant,
        ahead: bool,
        serves: impl Fn(&Wants) -> bool,
    ) -> Option<usize> {
        if let Some(at) = offered.iter().position(|(taker, _)| serves(&taker.wants)) {
            return Some(at);
        }
        for taker in waiting.iter().filter(|taker| serves(&taker.wants)) {
            let mut state = taker.state.lock();
            if let Some(room) = state.room(&taker.wants, shares, now, ahead) {
                state.offers += 1;
                state.promised += room;
                offered.push((taker.clone(), room));
                return Some(offered.len() - 1);
            }
        }
        None
    }
}

/// Tasks as handed over, for the tests of what holds them.
#[cfg(test)]
pub(crate) mod fixtures {
    use hourglass_queue::Claimed;

    /// Task `id` of queue `q`, its lease far off.
    pub(crate) fn task(id: u64) -> Claimed {
        Claimed {
            id,
            queue: "q".into(),
            payload: Vec::new().into(),
            attempt: 1,
            lease: hourglass_queue::Lease(id),
            lease_until_ms: 1 << 40,
            run_at_ms: 0,
            target: None,
        }
    }

    /// The ids of `tasks`, in order.
    pub(crate) fn ids(tasks: &[Claimed]) -> Vec<u64> {
        tasks.iter().map(|task| task.id).collect()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::fixtures::{ids, task};
    use super::*;

    fn pull(queues: &[&str]) -> Wants {
        Wants::Pull { queues: queues.iter().map(|&q| q.into()).collect(), lease_ms: 1_000 }
    }

    #[test]
    fn a_fire_offers_each_taker_once_for_its_room_and_one_push_taker() {
        let takers = Takers::default();
        let (a, b, pushing) =
            (takers.register(pull(&["x", "y"]), 5), takers.register(pull(&["y"]), 5), takers.register(Wants::Push, 9));
        let offer = takers.offer(&["x", "y", "z"], |queue| queue != "x", 1, Instant::now());
        assert_eq!(offer.takers.len(), 2, "a serves x and y; the push taker y and z");
        assert!(Arc::ptr_eq(&offer.takers[0].0, &a) && Arc::ptr_eq(&offer.takers[1].0, &pushing));
        assert_eq!((offer.takers[0].1, offer.takers[1].1), (5, 9));
        assert_eq!(offer.by_queue, [(Some(0), None), (Some(0), Some(1)), (None, Some(1))]);
        // In one share, the first fire was promised all their room: a second
        // fire meanwhile gets b only.
        let second = takers.offer(&["y"], |_| true, 1, Instant::now());
        assert_eq!(second.takers.len(), 1);
        assert!(Arc::ptr_eq(&second.takers[0].0, &b));
        assert!(second.by_queue == [(Some(0), None)], "the push taker's room is promised to the first fire");
        // Answered with three tasks: a pull taker holding tasks is not
        // offered until its claim takes them; then for all its room again.
        assert!(offer.takers[0].0.fill(offer.takers[0].1, vec![task(1), task(2), task(3)]).is_empty());
        offer.takers[1].0.fill(offer.takers[1].1, Vec::new());
        assert!(takers.offer(&["x"], |_| false, 1, Instant::now()).is_empty());
        assert!(matches!(a.take(), Taken::Tasks(tasks) if ids(&tasks) == [1, 2, 3]));
        let third = takers.offer(&["x"], |_| false, 1, Instant::now());
        assert_eq!(third.takers[0].1, 5);
    }

    #[test]
    fn fires_under_way_together_share_a_taker_s_room() {
        let takers = Takers::default();
        let pushing = takers.register(Wants::Push, 64);
        // Two fires at once: each is promised half of the room left.
        let offers: Vec<Offer> = (0..8).map(|_| takers.offer(&["q"], |_| true, 2, Instant::now())).collect();
        let rooms: Vec<usize> = offers.iter().map(|offer| offer.takers.first().map_or(0, |(_, room)| *room)).collect();
        assert_eq!(rooms, [32, 16, 8, 4, 2, 1, 1, 0], "never more than its room in all");
        // The first fire hands over three: the room it did not use, and the
        // tasks it handed, count again once it answers.
        assert!(offers[0].takers[0].0.fill(32, vec![task(1), task(2), task(3)]).is_empty());
        let next = takers.offer(&["q"], |_| true, 2, Instant::now());
        assert_eq!(next.takers[0].1, 29 / 2 + 1, "64 - 3 held - 32 promised to six fires, halved");
        // A push claim takes what is there while fires are under way.
        assert!(matches!(pushing.take(), Taken::Tasks(tasks) if ids(&tasks) == [1, 2, 3]));
        for (offer, room) in offers[1..7].iter().zip(&rooms[1..7]) {
            assert!(offer.takers[0].0.fill(*room, Vec::new()).is_empty());
        }
        next.takers[0].0.fill(15, Vec::new());
        assert_eq!(takers.offer(&["q"], |_| true, 1, Instant::now()).takers[0].1, 64, "all its room again");
    }

    #[test]
    fn a_pull_claim_that_looked_while_fires_were_under_way_waits_for_those_only() {
        let takers = Takers::default();
        let taker = takers.register(pull(&["q"]), 8);
        let first = takers.offer(&["q"], |_| false, 2, Instant::now());
        assert!(matches!(taker.take(), Taken::Offered));
        assert!(takers.offer(&["q"], |_| false, 2, Instant::now()).is_empty(), "its claim waits: no new fire");
        assert!(first.takers[0].0.fill(4, Vec::new()).is_empty());
        assert!(taker.notify().notified_owned().now_or_never().is_some(), "woken by the answer");
        assert!(matches!(taker.take(), Taken::Nothing), "then it looks in Redis");
    }

    #[test]
    fn a_claim_that_looked_is_woken_by_the_last_answer_and_offered_to_no_fire_before() {
        for wants in [pull(&["q"]), Wants::Push] {
            let takers = Takers::default();
            let taker = takers.register(wants.clone(), 8);
            let (first, second) =
                (takers.offer(&["q"], |_| true, 2, Instant::now()), takers.offer(&["q"], |_| true, 2, Instant::now()));
            assert!(matches!(taker.take(), Taken::Offered), "{wants:?}");
            assert!(first.takers[0].0.fill(first.takers[0].1, Vec::new()).is_empty());
            assert!(taker.notify().notified_owned().now_or_never().is_none(), "{wants:?}: a fire is still under way");
            assert!(takers.offer(&["q"], |_| true, 2, Instant::now()).is_empty(), "{wants:?}: no new fire meanwhile");
            assert!(second.takers[0].0.fill(second.takers[0].1, Vec::new()).is_empty());
            assert!(taker.notify().notified_owned().now_or_never().is_some(), "{wants:?}: woken by the last");
            assert_eq!(takers.offer(&["q"], |_| true, 1, Instant::now()).takers[0].1, 8, "{wants:?}: offered again");
        }
    }

    #[test]
    fn a_pull_claim_takes_the_first_answer_and_the_rest_lingers_for_the_next_claim() {
        let takers = Takers::default();
        let taker = takers.register(pull(&["q"]), 8);
        let (first, second) =
            (takers.offer(&["q"], |_| false, 4, Instant::now()), takers.offer(&["q"], |_| false, 4, Instant::now()));
        assert_eq!((first.takers[0].1, second.takers[0].1), (2, 2));
        let woken = taker.notify().notified_owned();
        assert!(first.takers[0].0.fill(2, vec![task(1)]).is_empty());
        assert!(woken.now_or_never().is_some(), "woken by the first answer that brings tasks");
        assert!(matches!(taker.take(), Taken::Tasks(tasks) if ids(&tasks) == [1]), "not waiting for the second");
        // The claim ends with the second fire under way: the taker lingers,
        // and what the fire hands it waits for the next claim that wants
        // the same, not for a claim of other queues.
        assert!(takers.release(&taker, false, 0).is_empty());
        assert_eq!(takers.waiting(), 0);
        assert!(second.takers[0].0.fill(2, vec![task(2)]).is_empty(), "not given back");
        assert!(takers.adopt(&pull(&["other"]), 8).is_none());
        let next = takers.adopt(&pull(&["q"]), 8).expect("the lingering taker");
        assert!(Arc::ptr_eq(&next, &taker));
        assert!(matches!(next.take(), Taken::Tasks(tasks) if ids(&tasks) == [2]));
    }

    #[test]
    fn tasks_handed_over_wait_for_the_claim_and_wake_it() {
        let takers = Takers::default();
        let taker = takers.register(Wants::Push, 4);
        let woken = taker.notify().notified_owned();
        let offer = takers.offer(&["q"], |_| true, 1, Instant::now());
        assert!(matches!(taker.take(), Taken::Offered), "a fire is under way");
        assert!(offer.takers[0].0.fill(offer.takers[0].1, vec![task(1), task(2)]).is_empty());
        assert!(woken.now_or_never().is_some(), "the claim is woken");
        let Taken::Tasks(tasks) = taker.take() else { panic!("the tasks wait for it") };
        assert_eq!(ids(&tasks), [1, 2]);
        assert!(matches!(taker.take(), Taken::Nothing), "taken once");
    }

    #[test]
    fn a_fire_without_tasks_wakes_only_a_claim_that_looked_meanwhile() {
        let takers = Takers::default();
        let taker = takers.register(pull(&["q"]), 1);
        let offer = takers.offer(&["q"], |_| false, 1, Instant::now());
        assert!(offer.takers[0].0.fill(offer.takers[0].1, Vec::new()).is_empty());
        assert!(taker.notify().notified_owned().now_or_never().is_none(), "not woken for nothing");
        let offer = takers.offer(&["q"], |_| false, 1, Instant::now());
        assert!(matches!(taker.take(), Taken::Offered));
        offer.takers[0].0.fill(offer.takers[0].1, Vec::new());
        assert!(taker.notify().notified_owned().now_or_never().is_some(), "it looks again");
        assert!(matches!(taker.take(), Taken::Nothing));
    }

    #[test]
    fn only_a_taker_that_may_linger_is_offered_while_its_claim_looks_in_redis() {
        let takers = Takers::default();
        // A pull claim with a lease too short to linger under: what a fire
        // handed it while its look found tasks would be given back.
        let short = Wants::Pull { queues: vec!["q".into()], lease_ms: PULL_LINGER_LEASE_MIN_MS - 1 };
        let taker = takers.register(short, 3);
        assert!(matches!(taker.take(), Taken::Nothing), "the claim looks in Redis");
        assert!(takers.offer(&["q"], |_| false, 1, Instant::now()).is_empty(), "not while it looks");
        taker.looked();
        assert_eq!(takers.offer(&["q"], |_| false, 1, Instant::now()).takers.len(), 1);
        // A pull taker that may linger, and a push taker, are offered while
        // their claims look: what a fire hands them then waits for the next
        // claim.
        let takers = Takers::default();
        let lingering = takers.register(pull(&["q"]), 3);
        assert!(matches!(lingering.take(), Taken::Nothing));
        assert_eq!(takers.offer(&["q"], |_| false, 1, Instant::now()).takers.len(), 1);
        let pushing = takers.register(Wants::Push, 3);
        assert!(matches!(pushing.take(), Taken::Nothing));
        assert_eq!(takers.offer(&["p"], |_| true, 1, Instant::now()).takers.len(), 1);
    }

    #[test]
    fn tasks_for_a_pull_claim_that_ended_are_left_over_unless_its_taker_lingers() {
        let takers = Takers::default();
        // A claim with a lease too short to linger under.
        let short = Wants::Pull { queues: vec!["q".into()], lease_ms: PULL_LINGER_LEASE_MIN_MS - 1 };
        let taker = takers.register(short.clone(), 4);
        let offer = takers.offer(&["q"], |_| false, 1, Instant::now());
        assert!(takers.release(&taker, false, 0).is_empty());
        assert_eq!(offer.takers[0].0.fill(offer.takers[0].1, vec![task(7)]).len(), 1, "handed to nobody");
        assert!(takers.offer(&["q"], |_| false, 1, Instant::now()).is_empty(), "no longer offered");
        assert!(takers.adopt(&short, 4).is_none(), "removed, not lingering");
        // So its claim waits for every fire under way before it takes what
        // they handed it, as nothing can wait for its next claim.
        let taker = takers.register(short.clone(), 4);
        let (first, second) =
            (takers.offer(&["q"], |_| false, 2, Instant::now()), takers.offer(&["q"], |_| false, 2, Instant::now()));
        assert!(first.takers[0].0.fill(first.takers[0].1, vec![task(5)]).is_empty());
        assert!(matches!(taker.take(), Taken::Offered), "the second fire is under way");
        let woken = taker.notify().notified_owned();
        assert!(second.takers[0].0.fill(second.takers[0].1, vec![task(6)]).is_empty());
        assert!(woken.now_or_never().is_some(), "woken by the last answer");
        assert!(matches!(taker.take(), Taken::Tasks(tasks) if ids(&tasks) == [5, 6]));
        assert!(takers.release(&taker, false, 0).is_empty());
        // Filled, then the claim ends before it looks: its tasks are left
        // over with a short lease, and linger with a long one.
        let taker = takers.register(short, 4);
        let offer = takers.offer(&["q"], |_| false, 1, Instant::now());
        assert!(offer.takers[0].0.fill(offer.takers[0].1, vec![task(8)]).is_empty());
        assert_eq!(ids(&takers.release(&taker, false, 0)), [8]);
        let taker = takers.register(pull(&["q"]), 4);
        let offer = takers.offer(&["q"], |_| false, 1, Instant::now());
        assert!(offer.takers[0].0.fill(offer.takers[0].1, vec![task(9)]).is_empty());
        assert!(takers.release(&taker, false, 0).is_empty(), "it lingers");
        assert_eq!(ids(&takers.expire(Instant::now() + Duration::from_millis(LINGER_MS))), [9], "then left over");
        // A pull taker with nothing held and no fire under way is removed.
        let idle = takers.register(pull(&["q"]), 4);
        assert!(takers.release(&idle, false, 0).is_empty() && takers.is_empty());
    }

    #[test]
    fn a_lingering_pull_taker_keeps_no_task_whose_lease_ends_soon() {
        let takers = Takers::default();
        let leased_until = |id, until_ms| Claimed { lease_until_ms: until_ms, ..task(id) };
        let now_ms = 50_000;
        let soon = now_ms + PULL_LINGER_LEASE_MIN_MS - 1;
        let later = now_ms + PULL_LINGER_LEASE_MIN_MS;
        let taker = takers.register(pull(&["q"]), 8);
        let (first, second) =
            (takers.offer(&["q"], |_| false, 2, Instant::now()), takers.offer(&["q"], |_| false, 2, Instant::now()));
        // Its claim ends holding a task of a short lease of its own and one
        // of a long one: the first is returned, the second lingers.
        let (room_first, room_second) = (first.takers[0].1, second.takers[0].1);
        assert!((room_first, room_second) == (4, 2));
        assert!(first.takers[0]
            .0
            .fill_at(room_first, vec![leased_until(1, soon), leased_until(2, later)], now_ms)
            .is_empty());
        assert_eq!(ids(&takers.release(&taker, false, now_ms)), [1]);
        // What a fire under way hands it then: the same rule.
        let left = second.takers[0].0.fill_at(room_second, vec![leased_until(3, later), leased_until(4, soon)], now_ms);
        assert_eq!(ids(&left), [4]);
        let next = takers.adopt(&pull(&["q"]), 8).expect("it lingers");
        assert!(matches!(next.take(), Taken::Tasks(tasks) if ids(&tasks) == [2, 3]));
    }

    #[test]
    fn a_fire_that_hands_ahead_is_offered_only_takers_that_may_linger() {
        let takers = Takers::default();
        let short = Wants::Pull { queues: vec!["q".into()], lease_ms: PULL_LINGER_LEASE_MIN_MS - 1 };
        takers.register(short, 4);
        assert!(takers.offer_to(&["q"], |_| false, 1, Instant::now(), true).is_empty(), "it would wait for the hold");
        assert_eq!(takers.offer_to(&["q"], |_| false, 1, Instant::now(), false).takers.len(), 1);
        let long = takers.register(pull(&["q"]), 4);
        let ahead = takers.offer_to(&["q"], |_| false, 1, Instant::now(), true);
        assert!(ahead.takers.len() == 1 && Arc::ptr_eq(&ahead.takers[0].0, &long));
    }

    #[test]
    fn a_push_taker_lingers_for_the_next_push_claim_then_gives_back() {
        let takers = Takers::default();
        let first = takers.register(Wants::Push, 4);
        assert!(takers.release(&first, false, 0).is_empty(), "it lingers");
        assert_eq!(takers.waiting(), 0);
        let offer = takers.offer(&["q"], |_| true, 1, Instant::now());
        assert_eq!(offer.takers.len(), 1, "offered while it lingers");
        offer.takers[0].0.fill(offer.takers[0].1, vec![task(1), task(2), task(3)]);
        // The next push claim adopts it, and takes at most its own max.
        let next = takers.adopt(&Wants::Push, 2).expect("a lingering taker");
        assert!(Arc::ptr_eq(&next, &first));
        let Taken::Tasks(tasks) = next.take() else { panic!("what the fire put in it") };
        assert_eq!(ids(&tasks), [1, 2]);
        takers.release(&next, false, 0);
        assert!(takers.expire(Instant::now()).is_empty(), "not yet");
        let late = Instant::now() + Duration::from_millis(LINGER_OFFERED_MS);
        assert!(takers.offer(&["q"], |_| true, 1, late).is_empty(), "offered a short while only");
        assert_eq!(ids(&takers.expire(Instant::now() + Duration::from_millis(LINGER_MS))), [3], "left over");
        assert!(takers.is_empty() && takers.adopt(&Wants::Push, 1).is_none());
        // A node closing leaves nothing lingering.
        let last = takers.register(Wants::Push, 1);
        assert!(takers.release(&last, true, 0).is_empty() && takers.is_empty());
    }
}
