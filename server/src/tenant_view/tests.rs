//! Trying to cross the line through a [`TenantView`]: the view of acme's token must answer a
//! globex run exactly like a missing one, to every read and verb, and leave it untouched; the
//! extractor takes the tenant from the verified token only. Also a guard that the API handlers
//! reach runs through the view alone.

use std::time::Duration;

use app::ssr::AppState;
use axum::extract::FromRequestParts;
use axum::http::Request;
use durable::gateway::{TokenSigner, issue_api_token};
use durable::model::{Namespace, RunId, RunQuery, RunStatus, Scope, TokenScope};
use durable::store::SignalSent;
use durable::testing::TwoTenants;
use durable::{Control, StartRun};
use leptos::prelude::LeptosOptions;
use metrics_exporter_prometheus::PrometheusBuilder;
use serde_json::json;

use super::{TenantView, TenantViews};
use crate::error::ApiError;
use crate::live::LiveHub;
use crate::metrics::Metrics;
use crate::state::{ServerState, Shutdown};

fn ns(name: &str) -> Namespace {
    Namespace::parse(name).expect("namespace")
}

/// Two tenants' waiting runs on one engine, and the server state over it.
struct World {
    runs: TwoTenants,
    state: ServerState,
    acme: RunId,
    globex: RunId,
}

impl World {
    async fn new() -> World {
        let runs = TwoTenants::new().await;
        let options = LeptosOptions::builder().output_name("durable").build();
        let (_stop, stop_rx) = tokio::sync::watch::channel(false);
        let state = ServerState {
            app: AppState::new(options, runs.engine.clone(), runs.sqlite.clone()),
            tenant_views: TenantViews::new(runs.engine.clone()),
            signer: TokenSigner::new(vec![42u8; 32]).expect("signer"),
            shutdown: Shutdown(stop_rx),
            live: LiveHub::new(runs.transport.clone()),
            public_url: None,
            metrics: Metrics::new(
                PrometheusBuilder::new().build_recorder().handle(),
                runs.engine.store().clone(),
                Scope::All,
            ),
        };
        World {
            acme: runs.acme.clone(),
            globex: runs.globex.clone(),
            runs,
            state,
        }
    }

    /// The view an API request carrying `authorization` (and a query naming globex, which must
    /// not matter) gets, or why it gets none.
    async fn extract(&self, authorization: &str) -> Result<TenantView, ApiError> {
        let request = Request::builder()
            .uri("/api/v1/runs?namespace=globex&tenant=globex")
            .header("authorization", authorization)
            .header("x-tenant", "globex")
            .body(())
            .expect("request");
        let (mut parts, ()) = request.into_parts();
        TenantView::from_request_parts(&mut parts, &self.state).await
    }

    fn view_for(&self, tenant: &str) -> TenantView {
        self.state.tenant_views.build(ns(tenant))
    }

    async fn stop(self) {
        self.runs.stop().await;
    }
}

/// The namespaces of every run `view` lists.
async fn listed(view: &TenantView) -> Vec<String> {
    let query = RunQuery {
        limit: 200,
        ..RunQuery::default()
    };
    let page = view.list_runs(&query).await.expect("list");
    let mut namespaces: Vec<String> = page
        .runs
        .iter()
        .map(|r| r.namespace.as_str().to_owned())
        .collect();
    namespaces.sort();
    namespaces.dedup();
    namespaces
}

#[tokio::test]
async fn a_tenant_view_cannot_read_or_act_on_another_tenants_run() {
    let world = World::new().await;
    let acme = world.view_for("acme");
    let globex = &world.globex;
    let before = world.runs.run(globex).await;

    assert_eq!(listed(&acme).await, ["acme"]);
    assert_eq!(acme.get_run(globex).await.expect("get"), None);
    assert!(
        acme.checkpoints(globex)
            .await
            .expect("checkpoints")
            .is_empty()
    );
    assert!(matches!(acme.cancel(globex).await, Ok(Control::NotFound)));
    assert!(matches!(acme.retry(globex).await, Ok(Control::NotFound)));
    assert!(matches!(
        acme.continue_run(globex).await,
        Ok(Control::NotFound)
    ));
    assert!(matches!(
        acme.redispatch(globex).await,
        Ok((Control::NotFound, 0))
    ));
    assert!(matches!(
        acme.signal(globex, "approve", json!({ "by": "acme" }))
            .await,
        Ok(SignalSent::NotFound)
    ));
    assert!(matches!(
        acme.retry_with_input(globex, json!({ "x": 1 })).await,
        Ok(Control::NotFound)
    ));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after = world.runs.run(globex).await;
    assert_eq!(after.status, RunStatus::Suspended);
    assert_eq!(
        after.updated_at, before.updated_at,
        "globex's run was not written"
    );

    // Its own run it reaches: the line is the tenant, not the verbs.
    assert!(acme.get_run(&world.acme).await.expect("get").is_some());
    let sent = acme.signal(&world.acme, "approve", json!(true)).await;
    assert!(matches!(sent, Ok(SignalSent::Delivered(_))), "{sent:?}");
    world.runs.wait_for(&world.acme, RunStatus::Completed).await;
    world.stop().await;
}

#[tokio::test]
async fn a_start_lands_in_the_tokens_tenant_whatever_the_request_names() {
    let world = World::new().await;
    let run = world
        .view_for("acme")
        .start_run(StartRun {
            workflow: "approval".into(),
            input: json!({}),
            namespace: Some(ns("globex")),
            ..StartRun::default()
        })
        .await
        .expect("start");
    assert_eq!(run.namespace, ns("acme"));
    world.stop().await;
}

#[tokio::test]
async fn the_view_comes_from_the_verified_token_only() {
    let world = World::new().await;
    let accounts = world.state.app.accounts.clone();
    let (stored, token) = issue_api_token(Some(ns("acme")), "test", TokenScope::ReadWrite, None, 1);
    let id = stored.token.id.clone();
    accounts
        .create_token(stored)
        .await
        .expect("store the token");
    let view = world
        .extract(&format!("Bearer {token}"))
        .await
        .expect("a view for a valid token");
    assert_eq!(view.scope(), &Scope::Only(ns("acme")));
    assert_eq!(listed(&view).await, ["acme"]);

    // Another secret for the same id, the wire's HMAC tokens (ours and a forged one), and
    // malformed headers: none gets a view.
    let (_, other_secret) = issue_api_token(Some(ns("acme")), "x", TokenScope::ReadWrite, None, 1);
    let guessed = format!("dtk_{id}_{}", &other_secret[other_secret.len() - 64..]);
    let wire = world.state.signer.sign(&ns("acme"));
    let forged = TokenSigner::new(vec![7u8; 32])
        .expect("signer")
        .sign(&ns("globex"));
    for authorization in [
        format!("Bearer {guessed}"),
        format!("Bearer {wire}"),
        format!("Bearer {forged}"),
        "Bearer globex".to_owned(),
        token.clone(),
        String::new(),
    ] {
        assert!(
            matches!(
                world.extract(&authorization).await,
                Err(ApiError::Unauthorized(_))
            ),
            "{authorization:?} must not get a view"
        );
    }
    // Revoked, the token gets nothing from its next request on.
    assert!(
        accounts
            .revoke_token(&id, Some(&ns("acme")), 2)
            .await
            .expect("revoke")
    );
    assert!(matches!(
        world.extract(&format!("Bearer {token}")).await,
        Err(ApiError::Unauthorized(_))
    ));
    world.stop().await;
}

/// The API's handlers reach runs through a [`TenantView`] alone: none takes the whole server
/// state, names the engine, builds a store view or picks a scope. (The engine is private to
/// `TenantViews` and `AppState` anyway; this keeps a handler from being handed it back.)
#[test]
fn api_handlers_reach_runs_only_through_the_tenant_view() {
    for (file, source) in [
        ("routes/api.rs", include_str!("../routes/api.rs")),
        ("routes/runs.rs", include_str!("../routes/runs.rs")),
        ("routes/params.rs", include_str!("../routes/params.rs")),
        ("routes/sse.rs", include_str!("../routes/sse.rs")),
        ("routes/health.rs", include_str!("../routes/health.rs")),
    ] {
        for banned in [
            "State<ServerState>",
            ".engine",
            "Engine",
            "ScopedStore",
            "Scope::",
        ] {
            assert!(
                !source.contains(banned),
                "{file} names `{banned}`; take a `TenantView` (or the one part of the state needed)"
            );
        }
    }
}
