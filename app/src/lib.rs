//! The durable dashboard: Leptos pages rendered on the server and hydrated in the browser.
//!
//! Every page reads through server functions that take the tenant from the session (never from
//! the URL, a form or a query string) and read through a namespace-scoped store view.

#![recursion_limit = "512"]

mod app;
mod components;
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
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(App);
}
