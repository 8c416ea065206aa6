//! What a token that may not change a queue's push targets does not see of
//! them: their headers' values, which carry the receiver's credentials
//! (`Authorization`, an API key), and their URLs' path and query, where
//! webhooks keep theirs (`/services/T0/B0/secret`, `?token=`). The headers'
//! names and the URL's scheme, host and port stay, so a reader still sees
//! where a task goes. Those who may change the targets (`manage` on the
//! queue) see them whole: they could set them anyway.
//!
//! Applied to every answer that shows a target to a token that may lack
//! `manage`: a task (shown, found by key, listed, nacked), a queue (shown,
//! listed, in the overview) and a queue's settings.

use std::collections::BTreeMap;

use hourglass_wire as w;

use super::{Grant, Permission};

/// What a hidden header's value reads, and a hidden URL's path.
pub const HIDDEN: &str = "(hidden)";

impl Grant {
    /// Whether it sees `queue`'s targets whole.
    fn sees_targets(&self, queue: &str) -> bool {
        self.allows(Permission::Manage, queue)
    }

    /// `task` as it may see it.
    pub(crate) fn task(&self, mut task: w::Task) -> w::Task {
        if let Some(http) = task.http.as_mut().filter(|_| !self.sees_targets(&task.queue)) {
            hide(&mut http.headers, &mut http.url);
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
            hide(&mut push.headers, &mut push.url);
        }
        settings
    }

    /// `queue` as it may see it.
    pub(crate) fn queue(&self, mut queue: w::Queue) -> w::Queue {
        queue.settings = queue.settings.map(|settings| self.settings(&queue.name, settings));
        queue
    }
}

fn hide(headers: &mut BTreeMap<String, String>, url: &mut String) {
    headers.values_mut().for_each(|value| HIDDEN.clone_into(value));
    // The URL was checked when it was set: `http` or `https`, a host, no
    // user name or password. What follows the authority is hidden.
    let authority = url.find("://").map_or(0, |scheme| scheme + 3);
    if let Some(path) = url[authority..].find(['/', '?', '#']).map(|at| authority + at) {
        if &url[path..] != "/" {
            url.truncate(path);
            url.push('/');
            url.push_str(HIDDEN);
        }
    }
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
        assert_eq!(reader.task(task("a")).http.unwrap().url, "https://example.com/(hidden)");
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

    #[test]
    fn a_url_keeps_its_scheme_host_and_port_only() {
        let hidden = |url: &str| {
            let mut url = url.to_owned();
            hide(&mut BTreeMap::new(), &mut url);
            url
        };
        assert_eq!(hidden("https://hooks.example.com/services/T0/B0/s3cret"), "https://hooks.example.com/(hidden)");
        assert_eq!(hidden("http://10.0.0.1:8080?token=s3cret"), "http://10.0.0.1:8080/(hidden)");
        assert_eq!(hidden("https://[::1]:9/a#b"), "https://[::1]:9/(hidden)");
        assert_eq!(hidden("https://example.com/"), "https://example.com/", "nothing to hide");
        assert_eq!(hidden("https://example.com"), "https://example.com");
    }
}
