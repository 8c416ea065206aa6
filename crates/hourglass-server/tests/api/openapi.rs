//! The OpenAPI document: served without the token, kept in the repository
//! as generated, and describing every route of the router.

use std::collections::BTreeSet;
use std::path::PathBuf;

use axum::http::{Method, StatusCode};
use hourglass_queue::Limits;
use hourglass_server::{openapi, openapi_text, ROUTES};

use super::api_with;

/// Where the repository keeps the document.
fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

/// Set to write the generated document to `docs/openapi.json`.
const WRITE: &str = "HOURGLASS_WRITE_OPENAPI";

#[test]
fn the_committed_document_is_the_generated_one() {
    let path = committed_path();
    if std::env::var_os(WRITE).is_some() {
        std::fs::write(&path, openapi_text()).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == openapi_text(),
        "{} differs from the document the server generates; regenerate it with\n  \
         {WRITE}=1 cargo test -p hourglass-server --test lib openapi\nand commit it",
        path.display()
    );
}

#[test]
fn every_route_of_the_router_is_in_the_document_and_nothing_else() {
    let document = serde_json::to_value(openapi()).unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    let documented: BTreeSet<(String, String)> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| item.as_object().unwrap().keys().map(move |method| (path.clone(), method.clone())))
        .collect();
    let routed: BTreeSet<(String, String)> = ROUTES
        .iter()
        .flat_map(|(path, methods)| methods.iter().map(move |method| (path.to_string(), method.to_string())))
        .collect();
    let missing: Vec<_> = routed.difference(&documented).collect();
    assert!(missing.is_empty(), "routes of the router missing from the document: {missing:?}");
    let extra: Vec<_> = documented.difference(&routed).collect();
    assert!(extra.is_empty(), "operations of the document the router lacks: {extra:?}");
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            assert!(operation["responses"]["default"].is_object(), "{method} {path}: no error answer");
            assert!(operation["summary"].is_string(), "{method} {path}: no summary (a doc comment)");
        }
    }
}

#[tokio::test]
async fn the_document_is_served_without_the_token() {
    let api = api_with(Limits::default(), Some("s3cret"));
    let (status, body) = api.call(Method::GET, "/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, serde_json::from_str::<serde_json::Value>(openapi_text()).unwrap());
    let (status, _) = api.call(Method::GET, "/v1/queues", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "the rest still wants it");
}
