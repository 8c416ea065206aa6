//! The tubes of a connection: the one it uses (`use`, `list-tube-used`),
//! those it watches (`watch`, `ignore`, `list-tubes-watched`), and those
//! of the server (`list-tubes`, `pause-tube`).

use hourglass_queue::{Pause, SystemWallClock, WallClock};

use super::state::Session;
use crate::access::Permission;
use crate::beanstalk::front::WATCHED_MAX;
use crate::beanstalk::reply;

impl Session {
    /// `use`: `put` puts into `tube` from now on.
    pub(super) fn use_tube(&mut self, tube: String, out: &mut Vec<u8>) {
        self.front.tube_ref(&self.used, |refs| refs.using -= 1);
        self.front.tube_ref(&tube, |refs| refs.using += 1);
        reply::line(out, &format!("USING {tube}"));
        self.used = tube;
    }

    /// `watch`: `reserve` takes from `tube` too, up to [`WATCHED_MAX`] tubes.
    pub(super) fn watch(&mut self, tube: String, out: &mut Vec<u8>) {
        if !self.watched.contains(&tube) {
            if self.watched.len() >= WATCHED_MAX {
                reply::line(out, "OUT_OF_MEMORY");
                return;
            }
            self.front.tube_ref(&tube, |refs| refs.watching += 1);
            self.watched.push(tube);
        }
        reply::line(out, &format!("WATCHING {}", self.watched.len()));
    }

    /// `ignore`: `reserve` no longer takes from `tube`, unless it is the
    /// last one watched.
    pub(super) fn ignore(&mut self, tube: &str, out: &mut Vec<u8>) {
        match self.watched.iter().position(|watched| watched == tube) {
            Some(_) if self.watched.len() < 2 => {
                reply::line(out, "NOT_IGNORED");
                return;
            }
            Some(at) => {
                // The last watched takes its place, as in beanstalkd's list.
                self.watched.swap_remove(at);
                self.front.tube_ref(tube, |refs| refs.watching -= 1);
            }
            None => {}
        }
        reply::line(out, &format!("WATCHING {}", self.watched.len()));
    }

    /// `list-tubes`: every tube with jobs, or that a connection refers to.
    pub(super) async fn list_tubes(&self, out: &mut Vec<u8>) {
        let tubes = self.front.tubes().await;
        // One grant for the whole list, so a reload meanwhile is seen
        // whole or not at all.
        let grant = self.front.grant();
        let readable = tubes
            .iter()
            .map(String::as_str)
            .filter(|tube| grant.as_ref().is_none_or(|grant| grant.allows(Permission::Read, tube)));
        reply::yaml(out, &reply::list(readable));
    }

    /// `list-tube-used`.
    pub(super) fn list_tube_used(&self, out: &mut Vec<u8>) {
        reply::line(out, &format!("USING {}", self.used));
    }

    /// `list-tubes-watched`.
    pub(super) fn list_tubes_watched(&self, out: &mut Vec<u8>) {
        reply::yaml(out, &reply::list(self.watched.iter().map(String::as_str)));
    }

    /// `pause-tube`: no job of `tube` is reserved for `delay_s` seconds.
    pub(super) async fn pause_tube(&self, tube: &str, delay_s: u32, out: &mut Vec<u8>) {
        if !self.front.tubes().await.iter().any(|known| known == tube) {
            reply::line(out, "NOT_FOUND");
            return;
        }
        // The engine's pause, ending by itself (across restarts too);
        // beanstalkd's 0 pauses for a moment only.
        let until_ms = SystemWallClock.now_ms() + u64::from(delay_s) * 1_000;
        match self.front.backend.pause_queue(tube, Pause::Until(until_ms)).await {
            Ok(_) => {
                self.front.tube_ref(tube, |refs| {
                    refs.pauses += 1;
                    refs.pause = Some((delay_s, until_ms));
                });
                reply::line(out, "PAUSED");
            }
            Err(error) => reply::line(out, reply::refusal(&error)),
        }
    }
}
