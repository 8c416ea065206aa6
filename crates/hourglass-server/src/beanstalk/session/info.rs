//! The commands that report, in YAML: `stats-job`, `stats-tube` and
//! `stats` (their documents are the `stats` module's).

use hourglass_queue::QueueError;

use super::state::Session;
use crate::beanstalk::{reply, stats};

impl Session {
    /// `stats-job`: what the engine and the front know of job `id`.
    pub(super) async fn stats_job(&self, id: u64, out: &mut Vec<u8>) {
        match self.front.backend.get(id).await {
            Ok(info) => reply::yaml(out, &stats::job(&self.front, &info)),
            Err(error) => {
                // Gone other than through the front (over HTTP, say): its counts go too.
                if matches!(error, QueueError::NotFound(_)) {
                    self.front.forget_job(id);
                }
                reply::line(out, reply::refusal(&error));
            }
        }
    }

    /// `stats-tube`: `tube`'s counts, if it exists.
    pub(super) async fn stats_tube(&self, tube: &str, out: &mut Vec<u8>) {
        match stats::tube(&self.front, tube).await {
            Some(document) => reply::yaml(out, &document),
            None => reply::line(out, "NOT_FOUND"),
        }
    }

    /// `stats`: the server's counts.
    pub(super) async fn stats(&self, out: &mut Vec<u8>) {
        let document = stats::server(&self.front).await;
        reply::yaml(out, &document);
    }
}
