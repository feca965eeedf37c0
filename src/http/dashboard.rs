//! `GET /` and `HEAD /` (axum answers HEAD from the GET handler, without the body): the
//! dashboard for a browser, one self-contained page (`src/dashboard.html` and its history's
//! script `src/dashboard/history.js`) that reads `/status`, `/status/events`,
//! `/status/history` and `/status/hourly`; for anything else, Ollama's greeting, which
//! Enchanted and other Ollama clients look for to see that the server is there.

use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};

/// A browser asks for HTML; an Ollama client (or curl) does not.
pub async fn root(headers: HeaderMap) -> Response {
    let browser = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"));
    if browser {
        page()
    } else {
        super::ollama::greeting()
    }
}

/// The whole page: `src/dashboard.html` (status, tasks, routes, transitions), then the
/// history's script `src/dashboard/history.js` (SPEC §16), one document.
const PAGE: &str = concat!(
    include_str!("../dashboard.html"),
    "<script>\n",
    include_str!("../dashboard/history.js"),
    "</script>\n</body>\n</html>\n"
);

/// The page itself, never cached: a new build's dashboard is the one a reload shows.
fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        PAGE,
    )
        .into_response()
}
