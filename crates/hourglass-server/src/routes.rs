//! Every route of the server, as one table: the router is built from it,
//! [`ROUTES`] lists it, so that a test holds the OpenAPI document against
//! the router itself (a route added here without its `#[utoipa::path]` in
//! the document fails that test), and each method of each route says what
//! it needs of the request's token ([`Need`]): the guard
//! ([`access`](crate::access)) reads it here and nowhere else.

use axum::http::Method;
use axum::routing::MethodRouter;
use axum::Router;

use crate::access::Need;
use crate::api::{deliveries, queues, schedules, tasks};
use crate::AppState;

/// The routes: `path: method(need) => handler, ...;` each.
macro_rules! table {
    ($($path:literal: $($method:ident($($need:tt)+) => $handler:path),+;)+) => {
        /// The router of every route in the table.
        pub(crate) fn routes() -> Router<AppState> {
            Router::new()$(.route($path, MethodRouter::new()$(.$method($handler))+))+
        }

        /// Every route the server answers: its path, in axum's and
        /// OpenAPI's syntax (`{name}` a parameter), and its methods.
        pub const ROUTES: &[(&str, &[&str])] = &[$(($path, &[$(stringify!($method)),+])),+];

        /// What each route's method needs: path, method, need.
        pub(crate) const NEEDS: &[(&str, &str, Need)] = &[$($(($path, stringify!($method), {
            #[allow(unused_imports)]
            use crate::access::Permission::*;
            #[allow(unused_imports)]
            use Need::*;
            $($need)+
        })),+),+];
    };
}

table! {
    "/": get(Nothing) => crate::ui::index;
    "/ui/app.js": get(Nothing) => crate::ui::app_js;
    "/ui/app.css": get(Nothing) => crate::ui::app_css;
    "/healthz": get(Token) => crate::api::healthz;
    "/metrics": get(Listing(Read)) => crate::metrics::metrics;
    "/v1/openapi.json": get(Nothing) => crate::openapi::document;
    "/v1/whoami": get(Token) => crate::api::whoami;
    "/v1/overview": get(Listing(Read)) => crate::overview::overview;
    "/v1/nodes": get(Everywhere(Read)) => crate::api::nodes::nodes;
    "/v1/queues": get(Listing(Read)) => queues::list_queues;
    "/v1/queues/{queue}": get(Queue(Read)) => queues::queue_stats;
    "/v1/queues/{queue}/dead": get(Queue(Read)) => tasks::dead, delete(Queue(Manage)) => queues::delete_dead;
    "/v1/queues/{queue}/pause": post(Queue(Manage)) => queues::pause_queue;
    "/v1/queues/{queue}/resume": post(Queue(Manage)) => queues::resume_queue;
    "/v1/queues/{queue}/settings": put(Queue(Manage)) => queues::put_settings, get(Queue(Read)) => queues::settings;
    "/v1/queues/{queue}/tasks": post(Queue(Enqueue)) => tasks::enqueue, get(Queue(Read)) => tasks::list_tasks;
    "/v1/queues/{queue}/tasks/batch": post(Queue(Enqueue)) => tasks::enqueue_batch;
    "/v1/queues/{queue}/keys/{key}": get(Queue(Read)) => tasks::find_by_key;
    // The acks a claim carries are checked by its handler, each on its task's queue.
    "/v1/queues/{queue}/claim": post(Queue(Consume)) => deliveries::claim;
    "/v1/tasks/{id}": get(Task(Read)) => tasks::show, delete(Task(Manage)) => tasks::cancel,
        patch(Task(Manage)) => tasks::reschedule;
    "/v1/tasks/{id}/ack": post(Task(Consume)) => deliveries::ack;
    "/v1/acks": post(Body(Consume)) => deliveries::ack_batch;
    "/v1/tasks/{id}/nack": post(Task(Consume)) => deliveries::nack;
    "/v1/tasks/{id}/extend": post(Task(Consume)) => deliveries::extend;
    "/v1/tasks/{id}/retry": post(Task(Manage)) => deliveries::retry;
    "/v1/schedules": get(Listing(Read)) => schedules::list_schedules;
    "/v1/schedules/{name}": put(Schedule(Manage)) => schedules::put_schedule,
        get(Schedule(Read)) => schedules::show_schedule, delete(Schedule(Manage)) => schedules::delete_schedule;
    "/v1/schedules/{name}/pause": post(Schedule(Manage)) => schedules::pause_schedule;
    "/v1/schedules/{name}/resume": post(Schedule(Manage)) => schedules::resume_schedule;
}

/// The permission `method` (lowercase, as in [`ROUTES`]) on the route
/// `path` needs on the queues it touches; `None` if any known token, or
/// none, may use it.
pub fn permission(path: &str, method: &str) -> Option<crate::access::Permission> {
    NEEDS.iter().find(|(p, m, _)| *p == path && *m == method).and_then(|(_, _, need)| need.permission())
}

/// What `method` on the route `path` needs; a method the route does not
/// answer (405) needs a known token. HEAD is answered by the GET handler,
/// so it needs what GET needs.
pub(crate) fn need(path: &str, method: &Method) -> Need {
    let method = if method == Method::HEAD { &Method::GET } else { method };
    NEEDS
        .iter()
        .find(|(p, m, _)| *p == path && m.eq_ignore_ascii_case(method.as_str()))
        .map_or(Need::Token, |&(_, _, need)| need)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_and_method_has_one_need_whose_queue_its_path_shows() {
        for (path, methods) in ROUTES {
            for method in *methods {
                let needs: Vec<_> = NEEDS.iter().filter(|(p, m, _)| p == path && m == method).collect();
                assert_eq!(needs.len(), 1, "{method} {path} has no need, or two");
                let param = match needs[0].2 {
                    Need::Queue(_) => Some("{queue}"),
                    Need::Task(_) => Some("{id}"),
                    Need::Schedule(_) => Some("{name}"),
                    _ => None,
                };
                assert!(
                    param.is_none_or(|param| path.contains(param)),
                    "{method} {path}: its need's queue is not in its path"
                );
            }
        }
        assert_eq!(NEEDS.len(), ROUTES.iter().map(|(_, methods)| methods.len()).sum::<usize>());
    }

    #[test]
    fn head_needs_what_get_needs_on_every_get_route() {
        for (path, methods) in ROUTES {
            if methods.contains(&"get") {
                assert!(need(path, &Method::HEAD) == need(path, &Method::GET), "HEAD {path} needs other than GET");
            }
        }
    }

    #[test]
    fn only_the_dashboard_s_files_and_the_api_s_description_are_served_without_a_token() {
        let open: Vec<_> = NEEDS.iter().filter(|(_, _, need)| *need == Need::Nothing).map(|(p, _, _)| *p).collect();
        assert_eq!(open, ["/", "/ui/app.js", "/ui/app.css", "/v1/openapi.json"]);
    }
}
