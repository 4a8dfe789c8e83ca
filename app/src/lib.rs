//! The durable dashboard: Leptos pages rendered on the server and hydrated in the browser.
//!
//! Every page reads through server functions that take the tenant from the session (never from
//! the URL, a form or a query string) and read through a namespace-scoped store view.

#![recursion_limit = "512"]

mod app;
mod components;
mod data;
mod error;
mod pages;
#[cfg(feature = "ssr")]
pub mod ssr;
mod views;

pub use app::{App, shell};
pub use error::AppError;
pub use views::{
    ActivityView, BulkPreview, Me, OperatorView, PlanRow, QuotaHold, RunView, RunsView,
    SchedulesView, ShownSchedule,
};

/// The browser entry point: attaches the client to the server-rendered HTML.
///
/// Hydration is asynchronous: a page's code is a lazily loaded chunk (`app::lazy_page!`), which
/// is fetched before that part of the page can hydrate. `data-hydrated` on `<body>` marks the
/// moment the whole page is interactive; browser tests wait for it before clicking.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    use leptos::prelude::document;

    console_error_panic_hook::set_once();
    let Some(body) = document().body() else {
        leptos::logging::error!("durable: the page has no <body> to hydrate");
        return;
    };
    wasm_bindgen_futures::spawn_local(async move {
        leptos::mount::hydrate_from_async(body.clone(), App)
            .await
            .forget();
        let _ = body.set_attribute("data-hydrated", "true");
    });
}
