//! The API's OpenAPI 3.1 document, generated from the handlers'
//! `#[utoipa::path]` descriptions and the wire types' schemas (feature
//! `openapi` of `hourglass-wire`), and served at `GET /v1/openapi.json`
//! without the token, like the dashboard's files. `docs/openapi.json` is a
//! copy, which a test keeps equal to it.

use std::sync::LazyLock;

use axum::http::header;
use axum::response::IntoResponse;
use hourglass_wire as w;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, Ref, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::api::{deliveries, queues, schedules, tasks};

/// The document, rendered once.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    let mut text = document_value().to_pretty_json().expect("the document is JSON");
    text.push('\n');
    text
});

#[derive(OpenApi)]
#[openapi(
    info(
        title = "hourglass",
        description = "A durable delay queue over HTTP: enqueue tasks due later, claim them under \
                       leases when due, ack or nack them; schedules by cron or period.",
        license(name = "MIT OR Apache-2.0"),
    ),
    paths(
        crate::ui::index, crate::ui::app_js, crate::ui::app_css,
        crate::api::healthz, crate::api::whoami, crate::metrics::metrics, document, crate::overview::overview,
        crate::api::nodes::nodes,
        queues::list_queues, queues::queue_stats, queues::pause_queue, queues::resume_queue, queues::settings, queues::put_settings, queues::delete_dead,
        tasks::enqueue, tasks::enqueue_batch, tasks::list_tasks, tasks::dead, tasks::find_by_key,
        tasks::show, tasks::cancel, tasks::reschedule,
        deliveries::claim, deliveries::ack, deliveries::ack_batch, deliveries::nack, deliveries::extend,
        deliveries::retry,
        schedules::put_schedule, schedules::show_schedule, schedules::pause_schedule,
        schedules::resume_schedule, schedules::delete_schedule, schedules::list_schedules,
    ),
    components(schemas(w::ErrorBody)),
    modifiers(&Errors, &Token, &Permissions),
    tags(
        (name = "tasks", description = "Enqueue, show, list, cancel and reschedule tasks."),
        (name = "deliveries", description = "Claim due tasks under leases; ack, nack, extend, retry."),
        (name = "queues", description = "Counts, pause and resume, dead tasks."),
        (name = "schedules", description = "Tasks at every occurrence of a cron expression or a period."),
        (name = "service", description = "Health, metrics, the nodes and this document."),
        (name = "dashboard", description = "The dashboard's files."),
    ),
)]
struct Api;

/// Every operation may answer an error: `{"error": {"code", "message"}}`
/// with a 4xx or 5xx status. Said once here rather than on each handler.
struct Errors;

impl Modify for Errors {
    fn modify(&self, document: &mut Document) {
        let content = ContentBuilder::new().schema(Some(Ref::from_schema_name("ErrorBody"))).build();
        let error = ResponseBuilder::new()
            .description("An error: its status, a stable code and a message.")
            .content("application/json", content)
            .build();
        for item in document.paths.paths.values_mut() {
            let operations = [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch];
            for operation in operations.into_iter().flatten() {
                operation.responses.responses.entry("default".to_owned()).or_insert_with(|| error.clone().into());
            }
        }
    }
}

/// With a token (`--token`), every request but the open ones (`security:
/// [{}]`) carries `Authorization: Bearer <token>`.
struct Token;

impl Modify for Token {
    fn modify(&self, document: &mut Document) {
        let bearer = SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build());
        document.components.get_or_insert_with(Default::default).add_security_scheme("token", bearer);
        document.security = Some(vec![SecurityRequirement::new("token", Vec::<String>::new())]);
    }
}

/// Each operation's description says what it needs of a scoped token
/// (`--tokens`), from the route table: the one place that decides it.
struct Permissions;

impl Modify for Permissions {
    fn modify(&self, document: &mut Document) {
        use crate::access::Need;
        for (path, item) in document.paths.paths.iter_mut() {
            let operations = [
                ("get", &mut item.get),
                ("put", &mut item.put),
                ("post", &mut item.post),
                ("delete", &mut item.delete),
                ("patch", &mut item.patch),
            ];
            for (method, operation) in operations {
                let Some(operation) = operation else { continue };
                let needs = match crate::routes::need(path, &method.to_uppercase().parse().expect("a method")) {
                    Need::Nothing => continue,
                    Need::Token => "any known token".to_owned(),
                    Need::Queue(p) => format!("`{p}` on the queue"),
                    Need::Task(p) => format!("`{p}` on the task's queue"),
                    Need::Schedule(p) => format!("`{p}` on the schedule's queue"),
                    Need::Listing(p) => format!("`{p}`; shows only the queues the token reads"),
                    Need::Body(p) => format!("`{p}` on each task's queue"),
                    Need::Everywhere(p) => format!("`{p}` on every queue (`*`)"),
                };
                let text = operation.description.get_or_insert_with(String::new);
                if !text.is_empty() {
                    text.push_str("\n\n");
                }
                text.push_str(&format!("Scoped tokens: needs {needs}."));
            }
        }
    }
}

/// The OpenAPI document of the whole API.
pub fn document_value() -> Document {
    Api::openapi()
}

/// The OpenAPI document, as `GET /v1/openapi.json` serves it (indented,
/// ending in a newline).
pub fn document_text() -> &'static str {
    &DOCUMENT
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "service", security(()),
    responses((status = 200, description = "The OpenAPI 3.1 document.", body = Object)))]
pub(crate) async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], document_text())
}
