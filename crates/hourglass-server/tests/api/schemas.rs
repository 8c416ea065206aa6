//! Every answer the API tests get is held against the OpenAPI document: the
//! operation of its method and path, the response of its status (or the
//! `default` one, an error), and that response's JSON schema. An answer the
//! document does not describe fails the test that got it.

use std::sync::LazyLock;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

/// The document, as JSON.
static DOCUMENT: LazyLock<Value> =
    LazyLock::new(|| serde_json::to_value(hourglass_server::openapi()).expect("the document is JSON"));

/// The operation `method` on the path template that `path` fits, preferring
/// literal segments to parameters (`/v1/queues/{queue}/tasks/batch`, not
/// `/v1/queues/{queue}/tasks`).
fn operation(method: &Method, path: &str) -> Option<&'static Value> {
    let segments: Vec<&str> = path.split('/').collect();
    let paths = DOCUMENT["paths"].as_object().expect("paths");
    paths
        .iter()
        .filter(|(template, _)| {
            let parts: Vec<&str> = template.split('/').collect();
            parts.len() == segments.len()
                && parts.iter().zip(&segments).all(|(part, segment)| part.starts_with('{') || part == segment)
        })
        .min_by_key(|(template, _)| template.matches('{').count())
        .and_then(|(_, item)| item.get(method.as_str().to_lowercase()))
}

/// Fails unless `body`, answered with `status` to `method` on `uri`, is as
/// the document says.
pub(super) fn check(method: &Method, uri: &str, status: StatusCode, body: &[u8]) {
    let path = uri.split('?').next().unwrap_or(uri);
    let what = format!("{method} {uri} answered {status}");
    // HEAD is answered by the GET handler, without the body: its status is
    // checked against GET's, there is no body to check.
    let head = method == Method::HEAD;
    let response = match operation(if head { &Method::GET } else { method }, path) {
        Some(operation) => {
            let responses = &operation["responses"];
            responses.get(status.as_str()).or_else(|| responses.get("default")).unwrap_or_else(|| {
                panic!("{what}: the document has no such response: {responses}");
            })
        }
        // No such route: the document's error answer (`no_route`).
        None => {
            assert!(status.is_client_error(), "{what}: a route the document lacks");
            &DOCUMENT["paths"]["/healthz"]["get"]["responses"]["default"]
        }
    };
    if head {
        return;
    }
    let Some(content) = response.get("content") else {
        assert!(body.is_empty(), "{what}: a body where the document has none: {}", String::from_utf8_lossy(body));
        return;
    };
    let Some(schema) = content.get("application/json").and_then(|json| json.get("schema")) else {
        return; // Text (the metrics, the dashboard's files): no schema to check.
    };
    let answer: Value = serde_json::from_slice(body)
        .unwrap_or_else(|error| panic!("{what}: not JSON ({error}): {}", String::from_utf8_lossy(body)));
    let mut schema = schema.clone();
    schema["components"] = DOCUMENT["components"].clone();
    schema["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    let validator = jsonschema::validator_for(&schema).unwrap_or_else(|error| panic!("{what}: a bad schema: {error}"));
    let errors: Vec<String> =
        validator.iter_errors(&answer).map(|error| format!("{error} at {}", error.instance_path())).collect();
    assert!(errors.is_empty(), "{what}: the answer does not fit the document:\n  {}\n{answer}", errors.join("\n  "));
}

#[test]
#[should_panic(expected = "does not fit the document")]
fn an_answer_unlike_the_document_fails() {
    check(&Method::GET, "/v1/tasks/7", StatusCode::OK, br#"{"id":"seven"}"#);
}

#[test]
#[should_panic(expected = "does not fit the document")]
fn an_error_unlike_the_document_fails() {
    check(&Method::POST, "/v1/queues/a/claim", StatusCode::BAD_REQUEST, br#"{"error":"bad"}"#);
}
