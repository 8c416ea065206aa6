//! What a token that may not change a queue's push targets does not see of
//! them: their headers' values, which carry the receiver's credentials
//! (`Authorization`, an API key). The names stay, so a reader still sees
//! how a target is set up. Those who may change the targets (`manage` on
//! the queue) see them whole: they could set them anyway.
//!
//! Applied to every answer that shows a target to a token that may lack
//! `manage`: a task (shown, found by key, listed, nacked), a queue (shown,
//! listed, in the overview) and a queue's settings.

use std::collections::BTreeMap;

use hourglass_wire as w;

use super::{Grant, Permission};

/// What a hidden header's value reads.
pub const HIDDEN: &str = "(hidden)";

impl Grant {
    /// Whether it sees `queue`'s targets whole.
    fn sees_targets(&self, queue: &str) -> bool {
        self.allows(Permission::Manage, queue)
    }

    /// `task` as it may see it.
    pub(crate) fn task(&self, mut task: w::Task) -> w::Task {
        if let Some(http) = task.http.as_mut().filter(|_| !self.sees_targets(&task.queue)) {
            hide(&mut http.headers);
        }
        task
    }

    /// `page` as it may see it.
    pub(crate) fn page(&self, mut page: w::TaskPage) -> w::TaskPage {
        page.tasks = page.tasks.into_iter().map(|task| self.task(task)).collect();
        page
    }

    /// `queue`'s `settings` as it may see them.
    pub(crate) fn settings(&self, queue: &str, mut settings: w::QueueSettings) -> w::QueueSettings {
        if let Some(push) = settings.push.as_mut().filter(|_| !self.sees_targets(queue)) {
            hide(&mut push.headers);
        }
        settings
    }

    /// `queue` as it may see it.
    pub(crate) fn queue(&self, mut queue: w::Queue) -> w::Queue {
        queue.settings = queue.settings.map(|settings| self.settings(&queue.name, settings));
        queue
    }
}

fn hide(headers: &mut BTreeMap<String, String>) {
    headers.values_mut().for_each(|value| HIDDEN.clone_into(value));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Pattern;

    fn task(queue: &str) -> w::Task {
        let headers = BTreeMap::from([("Authorization".to_owned(), "Bearer s3cret".to_owned())]);
        let http = w::HttpTarget { url: "https://example.com/hook".into(), method: None, headers };
        let json = serde_json::json!({
            "id": 1, "queue": queue, "state": "scheduled", "payload": null, "run_at_ms": 0, "attempt": 0,
            "max_attempts": 5, "priority": 1024, "lease_ms": 30000, "created_ms": 0,
        });
        w::Task { http: Some(http), ..serde_json::from_value(json).unwrap() }
    }

    #[test]
    fn header_values_are_shown_only_to_those_who_manage_the_queue() {
        let reader = Grant::new("r", vec![Pattern::new("*").unwrap()], &[Permission::Read, Permission::Consume]);
        let manager = Grant::new("m", vec![Pattern::new("a").unwrap()], &[Permission::Read, Permission::Manage]);
        let value = |task: &w::Task| task.http.as_ref().unwrap().headers["Authorization"].clone();
        assert_eq!(value(&reader.task(task("a"))), HIDDEN, "the name stays, the value is hidden");
        assert_eq!(value(&manager.task(task("a"))), "Bearer s3cret");
        assert_eq!(value(&manager.task(task("b"))), HIDDEN, "manage on another queue only");
        let page = w::TaskPage { tasks: vec![task("a")], next: None };
        assert_eq!(value(&reader.page(page).tasks[0]), HIDDEN);
        let push = w::PushTarget {
            url: "https://example.com/hook".into(),
            method: None,
            headers: BTreeMap::from([("X-Key".to_owned(), "k".to_owned())]),
            timeout_ms: None,
        };
        let settings = w::QueueSettings { push: Some(push), ..w::QueueSettings::default() };
        assert_eq!(reader.settings("a", settings.clone()).push.unwrap().headers["X-Key"], HIDDEN);
        assert_eq!(manager.settings("a", settings).push.unwrap().headers["X-Key"], "k");
    }
}
