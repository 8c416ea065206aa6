//! Requests on schedules: put, pause, read, list, delete. A change follows
//! the tasks' rules: the schedule is pending while its change is written,
//! requests that would change it wait, and the change takes effect once the
//! writer settles it (see `schedule_table.rs`).

use hourglass_queue::limits::SCHEDULES_MAX;
use hourglass_queue::validate;
use hourglass_queue::QueueError;
use hourglass_queue::{Expect, NewSchedule, ScheduleInfo, SchedulePage};

use super::requests::{Access, Attempt};
use super::schedule_table::Armed;
use super::settlement::Settlement;
use super::state::State;
use super::Engine;
use crate::store::Mutation;

impl Engine {
    /// Puts schedule `name` (new or replaced, if it is the one `expect`
    /// names); whether it is new.
    pub(crate) async fn put(
        &self,
        name: &str,
        new: NewSchedule,
        expect: Expect<'_>,
    ) -> Result<(ScheduleInfo, bool), QueueError> {
        // A period counts from the arrival rounded up: never early.
        let now_ms = self.clock.now_ms_ceil();
        let (schedule, timetable) =
            hourglass_queue::check_schedule_off_runtime(name, new, self.limits.payload_bytes_max, now_ms).await?;
        let put = Armed { schedule, timetable };
        let (armed, created) = self
            .when_settled(Access::Write, |state| {
                if let Err(closed) = self.closed.check() {
                    return Attempt::Done(Err(closed));
                }
                match state.schedule_pending(name) {
                    Some(true) => return Attempt::Wait,
                    None if state.schedule_count() >= SCHEDULES_MAX => {
                        return Attempt::Done(Err(QueueError::TooManySchedules { max: SCHEDULES_MAX }));
                    }
                    _ => {}
                }
                let old = state.schedule(name);
                if let Err(changed) = expect.check(name, old.map(|old| &*old.schedule.queue)) {
                    return Attempt::Done(Err(changed));
                }
                let created = old.is_none();
                let mut armed = put.clone();
                // The overlap policy looks at the task of the latest occurrence,
                // whichever version made it; a paused schedule stays paused.
                armed.schedule.last = old.and_then(|old| old.schedule.last);
                armed.schedule.paused = old.is_some_and(|old| old.schedule.paused);
                // The new version counts from when the request came in; the
                // old one may have fired since (while this one was checked,
                // or waited for the writer). An occurrence it ran is not run
                // again: the new version's first is after it. (Its anchor,
                // `since_ms`, stays: a period counts from it.)
                if let Some((ran_ms, _)) = armed.schedule.last {
                    if armed.schedule.next_ms.is_some_and(|next_ms| next_ms <= ran_ms) {
                        armed.schedule.next_ms = armed.timetable.next_after(ran_ms);
                    }
                }
                if let Err(over) = state.schedule_fits(&armed.schedule, &self.limits) {
                    return Attempt::Done(Err(over));
                }
                self.send_schedule(state, armed, created)
            })
            .await?;
        Ok((info_of(armed), created))
    }

    /// Pauses or resumes schedule `name`, if it is the one `expect` names.
    pub(crate) async fn pause(&self, name: &str, paused: bool, expect: Expect<'_>) -> Result<ScheduleInfo, QueueError> {
        validate::schedule_name(name)?;
        let (armed, ()) = self
            .when_settled(Access::Write, |state| {
                match state.schedule_pending(name) {
                    None => return Attempt::Done(Err(QueueError::ScheduleNotFound(name.to_owned()))),
                    Some(true) => return Attempt::Wait,
                    Some(false) => {}
                }
                let current = state.schedule(name).expect("a settled schedule is stored");
                if let Err(changed) = expect.check(name, Some(&current.schedule.queue)) {
                    return Attempt::Done(Err(changed));
                }
                if current.schedule.paused == paused {
                    return Attempt::Done(Ok((current.clone(), ())));
                }
                let mut armed = current.clone();
                armed.schedule.paused = paused;
                self.send_schedule(state, armed, ())
            })
            .await?;
        Ok(info_of(armed))
    }

    /// Under the lock: `armed` stored in place of its name's version, once
    /// durable; answered with it and `also`.
    fn send_schedule<A>(&self, state: &mut State, armed: Armed, also: A) -> Attempt<(Armed, A)> {
        state.hide_schedule(&armed.schedule.name);
        let mutation = Mutation::PutSchedule(armed.schedule.clone());
        let sent = self.send(state, vec![mutation], Settlement::PutSchedule(armed.clone()));
        Attempt::sent(sent, (armed, also))
    }

    /// Schedule `name` as stored.
    pub(crate) fn read_schedule(&self, name: &str) -> Result<ScheduleInfo, QueueError> {
        validate::schedule_name(name)?;
        let armed = self.shared.state.lock().schedule(name).cloned();
        armed.map(info_of).ok_or_else(|| QueueError::ScheduleNotFound(name.to_owned()))
    }

    /// Up to `limit` schedules after `after` of the queues `shown` accepts, by name.
    pub(crate) fn list_schedules(
        &self,
        after: Option<&str>,
        limit: usize,
        shown: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<SchedulePage, QueueError> {
        validate::schedule_list_limit(limit)?;
        // Filtered under the lock, before occurrences are worked out: only
        // for the schedules shown.
        let (page, more) = self.shared.state.lock().schedules_page(after, limit, shown);
        let next = more.then(|| page.last().map(|armed| armed.schedule.name.clone())).flatten();
        // Occurrences are worked out after the lock: a page may hold a thousand.
        Ok(SchedulePage { schedules: page.into_iter().map(info_of).collect(), next })
    }

    /// Deletes schedule `name`, if it is the one `expect` names.
    pub(crate) async fn delete(&self, name: &str, expect: Expect<'_>) -> Result<(), QueueError> {
        validate::schedule_name(name)?;
        self.when_settled(Access::Write, |state| {
            match state.schedule_pending(name) {
                None => return Attempt::Done(Err(QueueError::ScheduleNotFound(name.to_owned()))),
                Some(true) => return Attempt::Wait,
                Some(false) => {}
            }
            let queue = state.schedule(name).map(|current| &*current.schedule.queue);
            if let Err(changed) = expect.check(name, queue) {
                return Attempt::Done(Err(changed));
            }
            state.hide_schedule(name);
            let mutation = Mutation::DeleteSchedule(name.into());
            Attempt::sent(self.send(state, vec![mutation], Settlement::DeleteSchedule(name.into())), ())
        })
        .await
    }
}

/// A schedule as a read shows it, with its next occurrences.
fn info_of(armed: Armed) -> ScheduleInfo {
    let upcoming_ms = armed.timetable.upcoming(armed.schedule.next_ms);
    ScheduleInfo { schedule: armed.schedule, upcoming_ms }
}
