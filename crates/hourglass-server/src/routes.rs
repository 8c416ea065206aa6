//! Every route of the server, as one table: the router is built from it,
//! and [`ROUTES`] lists it, so that a test holds the OpenAPI document
//! against the router itself (a route added here without its
//! `#[utoipa::path]` in the document fails that test).

use axum::routing::MethodRouter;
use axum::Router;

use crate::api::{deliveries, queues, schedules, tasks};
use crate::AppState;

/// The routes: `path: method => handler, ...;` each.
macro_rules! table {
    ($($path:literal: $($method:ident => $handler:path),+;)+) => {
        /// The router of every route in the table.
        pub(crate) fn routes() -> Router<AppState> {
            Router::new()$(.route($path, MethodRouter::new()$(.$method($handler))+))+
        }

        /// Every route the server answers: its path, in axum's and
        /// OpenAPI's syntax (`{name}` a parameter), and its methods.
        pub const ROUTES: &[(&str, &[&str])] = &[$(($path, &[$(stringify!($method)),+])),+];
    };
}

table! {
    "/": get => crate::ui::index;
    "/ui/app.js": get => crate::ui::app_js;
    "/ui/app.css": get => crate::ui::app_css;
    "/healthz": get => crate::api::healthz;
    "/metrics": get => crate::metrics::metrics;
    "/v1/openapi.json": get => crate::openapi::document;
    "/v1/overview": get => crate::overview::overview;
    "/v1/queues": get => queues::list_queues;
    "/v1/queues/{queue}": get => queues::queue_stats;
    "/v1/queues/{queue}/dead": get => tasks::dead, delete => queues::delete_dead;
    "/v1/queues/{queue}/pause": post => queues::pause_queue;
    "/v1/queues/{queue}/resume": post => queues::resume_queue;
    "/v1/queues/{queue}/settings": put => queues::put_settings, get => queues::settings;
    "/v1/queues/{queue}/tasks": post => tasks::enqueue, get => tasks::list_tasks;
    "/v1/queues/{queue}/tasks/batch": post => tasks::enqueue_batch;
    "/v1/queues/{queue}/keys/{key}": get => tasks::find_by_key;
    "/v1/queues/{queue}/claim": post => deliveries::claim;
    "/v1/tasks/{id}": get => tasks::show, delete => tasks::cancel, patch => tasks::reschedule;
    "/v1/tasks/{id}/ack": post => deliveries::ack;
    "/v1/acks": post => deliveries::ack_batch;
    "/v1/tasks/{id}/nack": post => deliveries::nack;
    "/v1/tasks/{id}/extend": post => deliveries::extend;
    "/v1/tasks/{id}/retry": post => deliveries::retry;
    "/v1/schedules": get => schedules::list_schedules;
    "/v1/schedules/{name}": put => schedules::put_schedule, get => schedules::show_schedule,
        delete => schedules::delete_schedule;
    "/v1/schedules/{name}/pause": post => schedules::pause_schedule;
    "/v1/schedules/{name}/resume": post => schedules::resume_schedule;
}
