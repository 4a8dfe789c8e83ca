use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::components::{ParentRoute, Route, Router, Routes};
use leptos_router::{SsrMode, path};

use crate::components::layout::Layout;
use crate::pages::login::LoginPage;
use crate::pages::operator::OperatorPage;
use crate::pages::run_detail::RunDetailPage;
use crate::pages::runs::RunsPage;
use crate::pages::schedules::SchedulesPage;
use crate::pages::tokens::TokensPage;

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    #[cfg(feature = "ssr")]
    crate::ssr::send_page_policy();
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <AutoReload options=options.clone() />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body class="min-h-screen bg-slate-50 text-slate-900 antialiased">
                <App />
            </body>
        </html>
    }
}

/// The dashboard's routes.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Effects never run during SSR: this marks the moment the page became interactive, which
    // browser tests wait for before clicking.
    Effect::new(move |_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
    view! {
        <Stylesheet id="leptos" href="/pkg/durable.css" />
        <Title text="durable" />
        <Router>
            <Routes fallback=|| view! { <NotFound /> }>
                <Route path=path!("/login") view=LoginPage />
                // Async: every page's data is read before the first byte is sent, so the HTML
                // holds it (a page works with JavaScript off, and a missing run is a real 404)
                // rather than arriving in streamed, script-inserted chunks.
                <ParentRoute path=path!("") view=Layout ssr=SsrMode::Async>
                    <Route path=path!("") view=RunsPage ssr=SsrMode::Async />
                    <Route path=path!("operator") view=OperatorPage ssr=SsrMode::Async />
                    <Route path=path!("tokens") view=TokensPage ssr=SsrMode::Async />
                    <Route path=path!("schedules") view=SchedulesPage ssr=SsrMode::Async />
                    <Route path=path!("runs/:id") view=RunDetailPage ssr=SsrMode::Async />
                </ParentRoute>
            </Routes>
        </Router>
    }
}

#[component]
fn NotFound() -> impl IntoView {
    crate::error::respond_not_found();
    view! {
        <main class="mx-auto max-w-xl p-10 text-center">
            <h1 class="text-2xl font-semibold">"Page not found"</h1>
            <p class="mt-2 text-slate-600">"Nothing lives at this address."</p>
            <a class="mt-4 inline-block text-indigo-700 underline" href="/">
                "Go to your runs"
            </a>
        </main>
    }
}
