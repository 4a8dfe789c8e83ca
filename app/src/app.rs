use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::components::{ParentRoute, Route, Router, Routes};
use leptos_router::{Lazy, LazyRoute, SsrMode, lazy_route, path};

use crate::components::layout::Layout;
use crate::pages::connections::ConnectionsPage;
use crate::pages::login::LoginPage;
use crate::pages::operator::OperatorPage;
use crate::pages::pools::PoolsPage;
use crate::pages::routing::RoutingPage;
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
    view! {
        <Stylesheet id="leptos" href="/pkg/durable.css" />
        <Title text="durable" />
        <Router>
            <Routes fallback=|| view! { <NotFound /> }>
                <Route path=path!("/login") view={Lazy::<LoginRoute>::new()} />
                // Async: every page's data is read before the first byte is sent, so the HTML
                // holds it (a page works with JavaScript off, and a missing run is a real 404)
                // rather than arriving in streamed, script-inserted chunks.
                <ParentRoute path=path!("") view=Layout ssr=SsrMode::Async>
                    <Route path=path!("") view={Lazy::<RunsRoute>::new()} ssr=SsrMode::Async />
                    <Route path=path!("operator") view={Lazy::<OperatorRoute>::new()} ssr=SsrMode::Async />
                    <Route path=path!("tokens") view={Lazy::<TokensRoute>::new()} ssr=SsrMode::Async />
                    <Route path=path!("schedules") view={Lazy::<SchedulesRoute>::new()} ssr=SsrMode::Async />
                    <Route path=path!("pools") view={Lazy::<PoolsRoute>::new()} ssr=SsrMode::Async />
                    <Route path=path!("routing") view={Lazy::<RoutingRoute>::new()} ssr=SsrMode::Async />
                    <Route path=path!("connections") view={Lazy::<ConnectionsRoute>::new()} ssr=SsrMode::Async />
                    <Route path=path!("runs/:id") view={Lazy::<RunDetailRoute>::new()} ssr=SsrMode::Async />
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

/// Makes `$page` a lazily loaded route: its code (views, their data types' deserializers, the
/// forms' server functions) is a wasm chunk of its own that the browser fetches when it first
/// shows the page, rather than part of the bundle every page loads (`cargo leptos build
/// --split`; `bench/README.md`, "The hydrate bundle"). The page reads its own data, so the
/// first client-side visit fetches the chunk and then the data; the server-rendered first load
/// carries both.
macro_rules! lazy_page {
    ($route:ident, $page:ident) => {
        #[doc = concat!("[`", stringify!($page), "`] as a lazily loaded route.")]
        struct $route;

        #[lazy_route]
        impl LazyRoute for $route {
            fn data() -> Self {
                $route
            }

            fn view(_this: Self) -> AnyView {
                view! { <$page /> }.into_any()
            }
        }
    };
}

lazy_page!(LoginRoute, LoginPage);
lazy_page!(RunsRoute, RunsPage);
lazy_page!(OperatorRoute, OperatorPage);
lazy_page!(TokensRoute, TokensPage);
lazy_page!(SchedulesRoute, SchedulesPage);
lazy_page!(PoolsRoute, PoolsPage);
lazy_page!(RoutingRoute, RoutingPage);
lazy_page!(ConnectionsRoute, ConnectionsPage);
lazy_page!(RunDetailRoute, RunDetailPage);
