//! Trying to cross the line through a [`SessionView`]: a view built for one tenant (or narrowed
//! to one namespace) must answer another tenant's run exactly like a missing one, to every read
//! and verb, and leave it untouched. Also the scope rule on its own, and a guard that no page
//! names the unscoped engine or store.

use std::time::Duration;

use durable::model::{Namespace, Role, Run, RunId, RunQuery, RunStatus, Scope};
use durable::store::{SignalSent, User};
use durable::testing::TwoTenants;
use durable::{Control, StartRun};
use leptos::prelude::LeptosOptions;
use serde_json::json;

use super::{AppState, SessionView, ViewRefused, session_scope};
use crate::AppError;

fn ns(name: &str) -> Namespace {
    Namespace::parse(name).expect("namespace")
}

fn user(email: &str, tenant: Option<&str>, role: Role) -> User {
    User {
        id: 1,
        email: email.into(),
        tenant: tenant.map(ns),
        role,
        password_hash: String::new(),
        session_epoch: 0,
        disabled: false,
    }
}

fn acme_admin() -> User {
    user("admin@acme.test", Some("acme"), Role::Admin)
}

fn operator() -> User {
    user("operator@durable.local", None, Role::Operator)
}

/// Two tenants' waiting runs on one engine, and the dashboard's state over it.
struct World {
    runs: TwoTenants,
    state: AppState,
    acme: RunId,
    globex: RunId,
}

impl World {
    async fn new() -> World {
        let runs = TwoTenants::new().await;
        let options = LeptosOptions::builder().output_name("durable").build();
        let state = AppState::new(options, runs.engine.clone(), runs.sqlite.clone());
        World {
            acme: runs.acme.clone(),
            globex: runs.globex.clone(),
            runs,
            state,
        }
    }

    /// The run as it is in the store, whatever its namespace.
    async fn run(&self, id: &RunId) -> Run {
        self.runs.run(id).await
    }

    async fn wait_for(&self, id: &RunId, status: RunStatus) {
        self.runs.wait_for(id, status).await;
    }

    fn view(&self, user: User, narrowing: Option<&str>) -> SessionView {
        SessionView::build(&self.state, user, narrowing).expect("a view")
    }

    async fn stop(self) {
        self.runs.stop().await;
    }
}

/// The namespaces of every run `view` lists.
async fn listed(view: &SessionView) -> Vec<String> {
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

/// Tries every read and verb of `view` on run `id`, which it must not see: each answers "not
/// found", and the run is left exactly as it was.
async fn cannot_reach(world: &World, view: &SessionView, id: &RunId) {
    let before = world.run(id).await;
    assert_eq!(view.get_run(id).await.expect("get"), None, "get {id}");
    assert!(view.checkpoints(id).await.expect("checkpoints").is_empty());
    let by_family = RunQuery {
        family: Some(id.clone()),
        ..RunQuery::default()
    };
    assert!(
        view.list_runs(&by_family)
            .await
            .expect("list")
            .runs
            .is_empty()
    );
    assert!(
        matches!(view.cancel(id).await, Ok(Control::NotFound)),
        "cancel"
    );
    assert!(
        matches!(view.retry(id).await, Ok(Control::NotFound)),
        "retry"
    );
    assert!(
        matches!(view.continue_run(id).await, Ok(Control::NotFound)),
        "continue"
    );
    assert!(
        matches!(view.redispatch(id).await, Ok((Control::NotFound, 0))),
        "redispatch"
    );
    assert!(
        matches!(
            view.signal(id, "approve", json!({ "by": "intruder" }))
                .await,
            Ok(SignalSent::NotFound)
        ),
        "signal"
    );
    assert!(
        matches!(
            view.retry_with_input(id, json!({ "x": 1 })).await,
            Ok(Control::NotFound)
        ),
        "retry with input"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after = world.run(id).await;
    assert_eq!(after.status, RunStatus::Suspended, "{id} was not touched");
    assert_eq!(after.updated_at, before.updated_at, "{id} was not written");
}

#[test]
fn the_scope_comes_from_the_user_and_only_an_operator_narrows_it() {
    let only = |name: &str| Ok(Scope::Only(ns(name)));
    let acme_viewer = user("viewer@acme.test", Some("acme"), Role::Viewer);
    assert_eq!(session_scope(&acme_admin(), None), only("acme"));
    assert_eq!(session_scope(&acme_admin(), Some("globex")), only("acme"));
    assert_eq!(session_scope(&acme_viewer, Some("globex")), only("acme"));
    assert_eq!(session_scope(&acme_admin(), Some("")), only("acme"));
    assert_eq!(session_scope(&operator(), None), Ok(Scope::All));
    assert_eq!(session_scope(&operator(), Some("  ")), Ok(Scope::All));
    assert_eq!(session_scope(&operator(), Some(" acme ")), only("acme"));
    // An operator row bound to a tenant (edited by hand) stays in it.
    let bound = user("op@acme.test", Some("acme"), Role::Operator);
    assert_eq!(session_scope(&bound, None), only("acme"));
    assert_eq!(session_scope(&bound, Some("globex")), only("acme"));
    assert!(matches!(
        session_scope(&operator(), Some("Not A Namespace")),
        Err(ViewRefused::BadNarrowing(_))
    ));
    let tenantless = user("admin@nowhere.test", None, Role::Admin);
    assert_eq!(
        session_scope(&tenantless, Some("acme")),
        Err(ViewRefused::NoTenant("admin@nowhere.test".into()))
    );
}

#[tokio::test]
async fn a_tenant_view_cannot_read_or_act_on_another_tenants_run() {
    let world = World::new().await;
    let acme = world.view(acme_admin(), None);
    assert_eq!(acme.scope(), &Scope::Only(ns("acme")));
    assert_eq!(listed(&acme).await, ["acme"]);
    assert!(acme.get_run(&world.acme).await.expect("get").is_some());
    cannot_reach(&world, &acme, &world.globex).await;

    // Its own run it can act on: the line is the tenant, not the verbs.
    let sent = acme.signal(&world.acme, "approve", json!(true)).await;
    assert!(matches!(sent, Ok(SignalSent::Delivered(_))), "{sent:?}");
    world.wait_for(&world.acme, RunStatus::Completed).await;
    world.stop().await;
}

#[tokio::test]
async fn a_tenant_user_naming_another_namespace_still_sees_only_its_own() {
    let world = World::new().await;
    let viewer = user("viewer@acme.test", Some("acme"), Role::Viewer);
    for asker in [acme_admin(), viewer] {
        let view = world.view(asker, Some("globex"));
        assert_eq!(view.scope(), &Scope::Only(ns("acme")));
        assert_eq!(listed(&view).await, ["acme"]);
        cannot_reach(&world, &view, &world.globex).await;
    }
    world.stop().await;
}

#[tokio::test]
async fn an_operator_narrowed_to_a_namespace_sees_only_it() {
    let world = World::new().await;
    assert_eq!(
        listed(&world.view(operator(), None)).await,
        ["acme", "globex"]
    );
    let narrowed = world.view(operator(), Some("acme"));
    assert_eq!(narrowed.scope(), &Scope::Only(ns("acme")));
    assert_eq!(listed(&narrowed).await, ["acme"]);
    assert!(narrowed.get_run(&world.acme).await.expect("get").is_some());
    cannot_reach(&world, &narrowed, &world.globex).await;
    world.stop().await;
}

#[tokio::test]
async fn a_start_lands_in_the_session_tenant_whatever_the_request_names() {
    let world = World::new().await;
    let forged = || StartRun {
        workflow: "approval".into(),
        input: json!({}),
        namespace: Some(ns("globex")),
        ..StartRun::default()
    };
    let acme = world.view(acme_admin(), Some("globex"));
    let run = acme.start_run(forged()).await.expect("start");
    assert_eq!(run.namespace, ns("acme"));
    // An operator bound to no tenant starts in the engine's own namespace, narrowed or not.
    let run = world
        .view(operator(), Some("globex"))
        .start_run(forged())
        .await
        .expect("start");
    assert_eq!(run.namespace, Namespace::default_ns());
    world.stop().await;
}

#[tokio::test]
async fn a_bad_narrowing_or_a_tenantless_non_operator_gets_no_view() {
    let world = World::new().await;
    let refused = |user: User, narrowing: Option<&str>| {
        SessionView::build(&world.state, user, narrowing)
            .err()
            .expect("refused")
    };
    assert!(matches!(
        refused(operator(), Some("Not A Namespace")),
        AppError::Invalid(message) if message.starts_with("namespace filter:")
    ));
    assert_eq!(
        refused(user("viewer@nowhere.test", None, Role::Viewer), None),
        AppError::Forbidden
    );
    world.stop().await;
}

/// The words no page may use: pages reach runs through a [`SessionView`] only. (The engine is
/// private to the view module, so `state.engine` does not compile in a page anyway; this also
/// keeps pages from importing the engine, a store or the operator's scope for themselves.)
#[test]
fn no_page_names_the_engine_a_store_or_the_operators_scope() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/pages");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("src/pages") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("a page's source");
        let words: Vec<&str> = source
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .collect();
        for banned in ["Engine", "Store", "ScopedStore"] {
            assert!(
                !words.contains(&banned),
                "{} names `{banned}`; reach runs through `SessionView` instead",
                path.display()
            );
        }
        assert!(
            !source.contains("Scope::All"),
            "{} names `Scope::All`; only the view module decides a scope",
            path.display()
        );
        checked += 1;
    }
    assert!(
        checked >= 5,
        "found only {checked} pages in {}",
        dir.display()
    );
}
