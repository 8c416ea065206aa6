//! The dashboard's static files, compiled into the binary (`include_str!`):
//! one page, one script, one style sheet, no library and no build step. The
//! page asks the API for everything it shows, with the token the person
//! gives it, so the files themselves are served without one.

use axum::http::header;
use axum::response::IntoResponse;

const INDEX_HTML: &str = include_str!("../ui/index.html");
const APP_JS: &str = include_str!("../ui/app.js");
const APP_CSS: &str = include_str!("../ui/app.css");

/// Nothing but this server: no CDN, no inline script, no framing.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The dashboard's page.
#[utoipa::path(get, path = "/", tag = "dashboard", security(()),
    responses((status = 200, description = "The page.", body = String, content_type = "text/html")))]
pub(crate) async fn index() -> impl IntoResponse {
    file("text/html; charset=utf-8", INDEX_HTML)
}

/// The dashboard's script.
#[utoipa::path(get, path = "/ui/app.js", tag = "dashboard", security(()),
    responses((status = 200, description = "The script.", body = String, content_type = "text/javascript")))]
pub(crate) async fn app_js() -> impl IntoResponse {
    file("text/javascript; charset=utf-8", APP_JS)
}

/// The dashboard's style sheet.
#[utoipa::path(get, path = "/ui/app.css", tag = "dashboard", security(()),
    responses((status = 200, description = "The style sheet.", body = String, content_type = "text/css")))]
pub(crate) async fn app_css() -> impl IntoResponse {
    file("text/css; charset=utf-8", APP_CSS)
}

fn file(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            // Files change with the binary: a restart may bring new ones.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}
