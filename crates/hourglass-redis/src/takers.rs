//! This node's waiting claims, as its shards' fire scripts may serve them
//! (`handover.rs`): a claim that found nothing due registers a [`Taker`]
//! while it waits; a fire on this node offers the script the open takers of
//! the queues it fires, the script leases due tasks for them, and the fire
//! puts them in the takers, whose claims return them.
//!
//! A taker is **open** (waiting), **offered** (a fire's script is under way
//! with it: one fire at a time, so that no claim is handed more than it asked
//! for), **filled** (tasks wait for its claim to take them) or **closed** (its
//! claim ended). A claim that looks while its taker is offered waits for the
//! fire rather than asking Redis itself (it would race the fire for the same
//! tasks); the fire wakes it when it answers, with tasks or without. Tasks
//! that reach a closed taker, or that a claim leaves in its taker when it
//! ends, are left over: the caller gives them back to their queue.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use hourglass_queue::{Claimed, Delivery};

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
    pub(crate) fn delivery(&self) -> Delivery {
        match self {
            Wants::Pull { .. } => Delivery::Pull,
            Wants::Push => Delivery::Push,
        }
    }
}

#[derive(Debug)]
enum State {
    Open,
    /// `looked`: its claim looked meanwhile, and is woken when the fire answers.
    Offered {
        looked: bool,
    },
    Filled(Vec<Claimed>),
    Closed,
}

/// One waiting claim: see the [module](self) documentation.
#[derive(Debug)]
pub(crate) struct Taker {
    wants: Wants,
    /// Most tasks it takes.
    max: usize,
    state: Mutex<State>,
    /// Woken when tasks are put in it, or a fire that held it answers.
    notify: Arc<Notify>,
}

/// What a claim found in its taker when it looked.
#[derive(Debug)]
pub(crate) enum Taken {
    /// Tasks a fire handed over: the claim returns them.
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

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Notified when the claim should look again.
    pub(crate) fn notify(&self) -> Arc<Notify> {
        self.notify.clone()
    }

    /// What its claim finds when it looks.
    pub(crate) fn take(&self) -> Taken {
        let mut state = self.state.lock();
        match &mut *state {
            State::Offered { looked } => {
                *looked = true;
                Taken::Offered
            }
            State::Filled(_) => {
                let State::Filled(tasks) = std::mem::replace(&mut *state, State::Open) else { unreachable!() };
                Taken::Tasks(tasks)
            }
            State::Open | State::Closed => Taken::Nothing,
        }
    }

    /// A fire that offered it answered with `tasks` (perhaps none): they wait
    /// for the claim, which is woken. Returns them if the claim has ended.
    pub(crate) fn fill(&self, tasks: Vec<Claimed>) -> Vec<Claimed> {
        let mut state = self.state.lock();
        debug_assert!(matches!(*state, State::Offered { .. } | State::Closed), "filled while {state:?}");
        match *state {
            State::Closed => tasks,
            State::Offered { looked } => {
                let wake = looked || !tasks.is_empty();
                *state = if tasks.is_empty() { State::Open } else { State::Filled(tasks) };
                drop(state);
                if wake {
                    self.notify.notify_one();
                }
                Vec::new()
            }
            State::Open | State::Filled(_) => tasks,
        }
    }

    /// Its claim ended: what it left in it.
    fn close(&self) -> Vec<Claimed> {
        match std::mem::replace(&mut *self.state.lock(), State::Closed) {
            State::Filled(tasks) => tasks,
            State::Open | State::Offered { .. } | State::Closed => Vec::new(),
        }
    }
}

/// The takers a fire offers its script: each with the queues it serves there.
#[derive(Debug, Default)]
pub(crate) struct Offer {
    pub(crate) takers: Vec<Arc<Taker>>,
    /// Per queue fired, in order: the index in `takers` of its pull taker,
    /// and of its push taker.
    pub(crate) by_queue: Vec<(Option<usize>, Option<usize>)>,
}

impl Offer {
    pub(crate) fn is_empty(&self) -> bool {
        self.takers.is_empty()
    }
}

/// Every waiting claim of this node, in the order they began to wait.
#[derive(Debug, Default)]
pub(crate) struct Takers(Mutex<Vec<Arc<Taker>>>);

impl Takers {
    /// A claim that waits for up to `max` tasks.
    pub(crate) fn register(&self, wants: Wants, max: usize) -> Arc<Taker> {
        let taker = Arc::new(Taker { wants, max, state: Mutex::new(State::Open), notify: Arc::new(Notify::new()) });
        self.0.lock().push(taker.clone());
        taker
    }

    /// Whether no claim waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.lock().is_empty()
    }

    /// How many claims wait.
    pub(crate) fn len(&self) -> usize {
        self.0.lock().len()
    }

    /// `taker`'s claim ended: it is offered no more. Returns what it left.
    pub(crate) fn remove(&self, taker: &Arc<Taker>) -> Vec<Claimed> {
        self.0.lock().retain(|other| !Arc::ptr_eq(other, taker));
        taker.close()
    }

    /// Offers a fire of `queues` the open takers that want them, the longest
    /// waiting first: for each queue, a pull taker waiting on it (one taker
    /// may serve several), and one push taker for those of them that
    /// `pushes` says may hold push tasks. Each taker offered is held until
    /// [`Taker::fill`].
    pub(crate) fn offer(&self, queues: &[&str], pushes: impl Fn(&str) -> bool) -> Offer {
        let waiting = self.0.lock();
        let mut offer = Offer::default();
        let mut push = None;
        for &queue in queues {
            let pull = Self::find(&waiting, &mut offer.takers, |wants| match wants {
                Wants::Pull { queues, .. } => queues.iter().any(|name| &**name == queue),
                Wants::Push => false,
            });
            if push.is_none() && pushes(queue) {
                push = Self::find(&waiting, &mut offer.takers, |wants| *wants == Wants::Push);
            }
            offer.by_queue.push((pull, push.filter(|_| pushes(queue))));
        }
        offer
    }

    /// The first taker `serves` accepts: one already in `offered`, else an
    /// open one of `waiting`, then held and added. Its index in `offered`.
    fn find(waiting: &[Arc<Taker>], offered: &mut Vec<Arc<Taker>>, serves: impl Fn(&Wants) -> bool) -> Option<usize> {
        if let Some(at) = offered.iter().position(|taker| serves(&taker.wants)) {
            return Some(at);
        }
        for taker in waiting {
            if !serves(&taker.wants) {
                continue;
            }
            let mut state = taker.state.lock();
            if matches!(*state, State::Open) {
                *state = State::Offered { looked: false };
                offered.push(taker.clone());
                return Some(offered.len() - 1);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    fn task(id: u64) -> Claimed {
        Claimed {
            id,
            queue: "q".into(),
            payload: Vec::new().into(),
            attempt: 1,
            lease: hourglass_queue::Lease(id),
            lease_until_ms: 0,
            run_at_ms: 0,
            target: None,
        }
    }

    fn pull(queues: &[&str]) -> Wants {
        Wants::Pull { queues: queues.iter().map(|&q| q.into()).collect(), lease_ms: 1_000 }
    }

    #[test]
    fn a_fire_offers_each_open_taker_once_and_one_push_taker() {
        let takers = Takers::default();
        let (a, b, pushing) =
            (takers.register(pull(&["x", "y"]), 5), takers.register(pull(&["y"]), 5), takers.register(Wants::Push, 9));
        let offer = takers.offer(&["x", "y", "z"], |queue| queue != "x");
        assert_eq!(offer.takers.len(), 2, "a serves x and y; the push taker y and z");
        assert!(Arc::ptr_eq(&offer.takers[0], &a) && Arc::ptr_eq(&offer.takers[1], &pushing));
        assert_eq!(offer.by_queue, [(Some(0), None), (Some(0), Some(1)), (None, Some(1))]);
        // Held: a second fire meanwhile gets b only.
        let second = takers.offer(&["y"], |_| true);
        assert_eq!(second.takers.len(), 1);
        assert!(Arc::ptr_eq(&second.takers[0], &b));
        assert!(second.by_queue == [(Some(0), None)], "the push taker is held by the first fire");
    }

    #[test]
    fn tasks_handed_over_wait_for_the_claim_and_wake_it() {
        let takers = Takers::default();
        let taker = takers.register(Wants::Push, 4);
        let woken = taker.notify().notified_owned();
        let offer = takers.offer(&["q"], |_| true);
        assert!(matches!(taker.take(), Taken::Offered), "a fire is under way");
        assert!(offer.takers[0].fill(vec![task(1), task(2)]).is_empty());
        assert!(woken.now_or_never().is_some(), "the claim is woken");
        let Taken::Tasks(tasks) = taker.take() else { panic!("the tasks wait for it") };
        assert_eq!(tasks.iter().map(|t| t.id).collect::<Vec<_>>(), [1, 2]);
        assert!(matches!(taker.take(), Taken::Nothing), "taken once");
    }

    #[test]
    fn a_fire_without_tasks_wakes_only_a_claim_that_looked_meanwhile() {
        let takers = Takers::default();
        let taker = takers.register(pull(&["q"]), 1);
        let offer = takers.offer(&["q"], |_| false);
        assert!(offer.takers[0].fill(Vec::new()).is_empty());
        assert!(taker.notify().notified_owned().now_or_never().is_none(), "not woken for nothing");
        let offer = takers.offer(&["q"], |_| false);
        assert!(matches!(taker.take(), Taken::Offered));
        offer.takers[0].fill(Vec::new());
        assert!(taker.notify().notified_owned().now_or_never().is_some(), "it looks again");
        assert!(matches!(taker.take(), Taken::Nothing));
    }

    #[test]
    fn tasks_for_a_claim_that_ended_are_left_over() {
        let takers = Takers::default();
        let taker = takers.register(Wants::Push, 4);
        let offer = takers.offer(&["q"], |_| true);
        assert!(takers.remove(&taker).is_empty());
        assert_eq!(offer.takers[0].fill(vec![task(7)]).len(), 1, "handed to nobody");
        assert!(takers.offer(&["q"], |_| true).is_empty(), "no longer offered");
        // Filled, then the claim ends before it looks.
        let taker = takers.register(Wants::Push, 4);
        let offer = takers.offer(&["q"], |_| true);
        assert!(offer.takers[0].fill(vec![task(8)]).is_empty());
        assert_eq!(takers.remove(&taker).iter().map(|t| t.id).collect::<Vec<_>>(), [8]);
    }
}
