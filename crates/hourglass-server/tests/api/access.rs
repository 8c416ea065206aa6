//! Who may do what: the token, the dashboard's files, a read-only dashboard.

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use hourglass_queue::prelude::*;
use hourglass_queue::Limits;
use hourglass_server::AppState;
use serde_json::json;

use tower::ServiceExt;

use super::{api_built, api_with, error_code, within};

#[tokio::test]
async fn a_token_guards_every_route() {
    let api = api_with(Limits::default(), Some("s3cret"));
    for uri in ["/healthz", "/metrics", "/v1/queues"] {
        let (status, body) = api.call(Method::GET, uri, None).await;
        assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "unauthorized"), "{uri}");
        let (status, _) = api.call_with(Method::GET, uri, None, Some("wrong")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        let (status, _) = api.call_with(Method::GET, uri, None, Some("s3cret")).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
    }
}

#[tokio::test]
async fn the_dashboard_s_files_need_no_token_and_its_data_does() {
    let api = api_with(Limits::default(), Some("s3cret"));
    let (status, page) = api.call(Method::GET, "/", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.as_str().unwrap().contains("<script src=\"/ui/app.js\""), "the page: {page}");
    for file in ["/ui/app.js", "/ui/app.css"] {
        let (status, _) = api.call(Method::GET, file, None).await;
        assert_eq!(status, StatusCode::OK, "{file}");
    }
    let request = Request::builder().uri("/").body(Body::empty()).unwrap();
    let response = within("the page", api.router.clone().oneshot(request)).await.unwrap();
    let policy = response.headers()[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(policy.contains("default-src 'none'") && policy.contains("connect-src 'self'"), "{policy}");
    let (status, body) = api.call(Method::GET, "/v1/overview", None).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "unauthorized"));
    let (status, _) = api.call_with(Method::GET, "/v1/overview", None, Some("wrong")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = api.call(Method::GET, "/ui/other.js", None).await;
    assert_eq!(
        (status, error_code(&body)),
        (StatusCode::UNAUTHORIZED, "unauthorized"),
        "only the three files are open"
    );
    api.call_with(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload": 1}"#), Some("s3cret")).await;
    let (status, body) = api.call_with(Method::GET, "/v1/overview", None, Some("s3cret")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["queues"][0]["name"], json!("q"));
    assert_eq!(body["queues"][0]["due"], json!(1));
    assert_eq!(body["queues"][0]["rates"]["enqueued"], json!(0.0), "no sample yet: no rate");
    assert_eq!(body["read_only_ui"], json!(false));
    assert!(body["history"].as_array().unwrap().is_empty());
    // A reading is shared for a moment; ?fresh=true reads again.
    api.call_with(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload": 2}"#), Some("s3cret")).await;
    let (_, fresh) = api.call_with(Method::GET, "/v1/overview?fresh=true", None, Some("s3cret")).await;
    assert_eq!(fresh["queues"][0]["due"], json!(2));
    let (status, body) = api.call_with(Method::GET, "/v1/overview?stale=1", None, Some("s3cret")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn a_read_only_ui_refuses_the_dashboard_s_changes_and_not_the_api_s() {
    let api = api_built(Limits::default(), None, AppState::read_only_ui);
    let (_, body) = api.call(Method::POST, "/v1/queues/q/tasks", Some(r#"{"payload": 1}"#)).await;
    let id = body["id"].as_u64().unwrap();
    let (_, overview) = api.call(Method::GET, "/v1/overview", None).await;
    assert_eq!(overview["read_only_ui"], json!(true));
    let from_ui = |method: Method, uri: String| {
        Request::builder().method(method).uri(uri).header(hourglass_server::UI_HEADER, "1").body(Body::empty()).unwrap()
    };
    for (method, uri) in [(Method::DELETE, format!("/v1/tasks/{id}")), (Method::POST, "/v1/queues/q/pause".into())] {
        let (status, _) = api.send(from_ui(method, uri.clone())).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{uri}");
    }
    let (status, _) = api.send(from_ui(Method::GET, format!("/v1/tasks/{id}"))).await;
    assert_eq!(status, StatusCode::OK, "reads are fine");
    assert_eq!(api.engine.get(id).await.unwrap().task.id, id, "nothing was cancelled");
    let (status, _) = api.call(Method::DELETE, &format!("/v1/tasks/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "the API itself is unchanged");
}

#[tokio::test]
async fn without_the_token_a_read_only_ui_says_nothing_but_unauthorized() {
    let api = api_built(Limits::default(), Some("s3cret"), AppState::read_only_ui);
    let from_ui = |token: Option<&str>| {
        let mut request = Request::builder().method(Method::POST).uri("/v1/queues/q/pause");
        request = request.header(hourglass_server::UI_HEADER, "1");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        request.body(Body::empty()).unwrap()
    };
    let (status, _) = api.send(from_ui(None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = api.send(from_ui(Some("s3cret"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(api.engine.queue("q").await.is_none(), "nothing was paused");
}
