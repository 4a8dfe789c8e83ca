//! Worker pools: the session tenant's pools, each with the partition its workers serve (the
//! command that starts one) and the workers live on it; an admin creates a pool, changes its
//! labels or deletes it, a viewer sees them. The forms post without the wasm too.

use crate::data;
use leptos::prelude::*;
use leptos_meta::Title;
use serde::{Deserialize, Serialize};

use crate::AppError;
use crate::components::answer::{answer_line, last_answer};

/// One pool as the page shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolRow {
    /// Its name.
    pub name: String,
    /// The partition its workers serve (`acme.gpu`).
    pub partition: String,
    /// Its labels, `key=value`.
    pub labels: Vec<(String, String)>,
    /// The live workers on it, by what they serve.
    pub workers: Vec<WorkersRow>,
    /// Whether it is an operator's shared pool granted to the tenant.
    pub shared: bool,
    /// Its steps sent and not yet answered (waiting or running).
    pub waiting: u64,
}

/// The live workers on a pool serving one step or workflow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkersRow {
    /// The step or workflow they serve.
    pub name: String,
    /// How many are live.
    pub workers: u32,
    /// The capabilities they announced beyond the v1 baseline every worker has (what a
    /// step's `requires` can ask for).
    pub capabilities: Vec<String>,
    /// Their SDKs, `name version`.
    pub sdks: Vec<String>,
}

/// A shared pool as the operator's section shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedRow {
    /// Its name.
    pub name: String,
    /// Its labels, `key=value`.
    pub labels: Vec<(String, String)>,
    /// The tenants it is granted to.
    pub grants: Vec<String>,
}

/// The pools screen's data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolsPage {
    /// The tenant's pools, by name.
    pub pools: Vec<PoolRow>,
    /// Whether the session may create, change and delete them.
    pub can_act: bool,
    /// The tenant, for the worker command.
    pub tenant: String,
    /// The shared pools, for an operator bound to no tenant; `None` for everyone else.
    pub shared: Option<Vec<SharedRow>>,
}

/// The session tenant's pools with their live workers.
#[server(endpoint = "list_pools")]
pub async fn list_pools() -> Result<PoolsPage, AppError> {
    crate::ssr::reply(
        async move {
            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Read, None).await?;
            let tenant = view.own_tenant().to_string();
            let pools = view
                .pool_statuses()
                .await?
                .into_iter()
                .map(|status| PoolRow {
                    workers: status
                        .workers
                        .into_iter()
                        .map(|w| WorkersRow {
                            name: w.name,
                            workers: w.workers,
                            capabilities: w
                                .capabilities
                                .into_iter()
                                .filter(|c| !durable::model::V1_CAPABILITIES.contains(&c.as_str()))
                                .collect(),
                            sdks: w.sdks,
                        })
                        .collect(),
                    partition: status.partition,
                    labels: status.pool.labels.into_iter().collect(),
                    name: status.pool.name.to_string(),
                    shared: status.pool.shared,
                    waiting: status.waiting,
                })
                .collect();
            let operator =
                view.user().role == durable::model::Role::Operator && view.user().tenant.is_none();
            let shared = if operator {
                Some(
                    view.shared_pools()
                        .await?
                        .into_iter()
                        .map(|p| SharedRow {
                            name: p.name.to_string(),
                            labels: p.labels.into_iter().collect(),
                            grants: p.grants.iter().map(ToString::to_string).collect(),
                        })
                        .collect(),
                )
            } else {
                None
            };
            Ok(PoolsPage {
                pools,
                can_act: view.user().role.can_act(),
                tenant,
                shared,
            })
        }
        .await,
    )
}

/// Creates a pool of the session tenant's, or replaces its labels (`labels`: one `key=value`
/// per line or comma). Admins only.
#[server(endpoint = "save_pool")]
pub async fn save_pool(name: String, labels: String) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::PoolName;

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, None).await?;
            let name =
                PoolName::parse(name.trim()).map_err(|e| AppError::Invalid(e.to_string()))?;
            let put = view.put_pool(name, labels_of(&labels)?).await?;
            let verb = if put.created { "created" } else { "saved" };
            Ok(format!(
                "pool {} {verb}: its workers serve partition {}",
                put.pool.name,
                put.pool.partition()
            ))
        }
        .await,
    )
}

/// Reads `labels` (one `key=value` per line or comma).
#[cfg(feature = "ssr")]
fn labels_of(labels: &str) -> Result<std::collections::BTreeMap<String, String>, AppError> {
    labels
        .split(['\n', ','])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| match l.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_owned(), v.trim().to_owned())),
            None => Err(AppError::Invalid(format!(
                "label `{l}` must be written key=value"
            ))),
        })
        .collect()
}

/// Creates a shared pool, or replaces its labels. Operators only.
#[server(endpoint = "save_shared_pool")]
pub async fn save_shared_pool(name: String, labels: String) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::PoolName;

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Operate, None).await?;
            let name =
                PoolName::parse(name.trim()).map_err(|e| AppError::Invalid(e.to_string()))?;
            let created = view
                .put_shared_pool(name.clone(), labels_of(&labels)?)
                .await?;
            let verb = if created { "created" } else { "saved" };
            Ok(format!(
                "shared pool {name} {verb}: its workers are durable worker --pool {name}"
            ))
        }
        .await,
    )
}

/// Grants a shared pool to a tenant, or with `revoke` takes it back. Operators only.
#[server(endpoint = "change_grant")]
pub async fn change_grant(name: String, tenant: String, revoke: bool) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::{Namespace, PoolName};

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Operate, None).await?;
            let invalid = |e: &dyn std::fmt::Display| AppError::Invalid(e.to_string());
            let name = PoolName::parse(name.trim()).map_err(|e| invalid(&e))?;
            let tenant = Namespace::tenant(tenant.trim()).map_err(|e| invalid(&e))?;
            if !view.grant_shared_pool(&name, &tenant, revoke).await? {
                return Err(AppError::Invalid(format!(
                    "shared pool {name} is not granted to {tenant}; reload the list"
                )));
            }
            Ok(if revoke {
                format!("shared pool {name} taken back from {tenant}")
            } else {
                format!("shared pool {name} granted to {tenant}")
            })
        }
        .await,
    )
}

/// Deletes a shared pool no tenant holds. Operators only.
#[server(endpoint = "delete_shared_pool")]
pub async fn delete_shared_pool(name: String) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::PoolName;

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Operate, None).await?;
            let name = PoolName::parse(&name).map_err(|e| AppError::Invalid(e.to_string()))?;
            if !view.delete_shared_pool(&name).await? {
                return Err(AppError::Invalid(format!(
                    "there is no shared pool {name}; reload the list"
                )));
            }
            Ok(format!("shared pool {name} deleted"))
        }
        .await,
    )
}

/// Deletes a pool of the session tenant's. Admins only.
#[server(endpoint = "delete_pool")]
pub async fn delete_pool(name: String) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::PoolName;

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, None).await?;
            let name = PoolName::parse(&name).map_err(|e| AppError::Invalid(e.to_string()))?;
            if !view.delete_pool(&name).await? {
                return Err(AppError::Invalid(format!(
                    "there is no pool {name}; reload the list"
                )));
            }
            Ok(format!("pool {name} deleted"))
        }
        .await,
    )
}

/// The pools screen.
#[component]
pub fn PoolsPage() -> impl IntoView {
    let save = ServerAction::<SavePool>::new();
    let remove = ServerAction::<DeletePool>::new();
    let save_shared = ServerAction::<SaveSharedPool>::new();
    let grant = ServerAction::<ChangeGrant>::new();
    let remove_shared = ServerAction::<DeleteSharedPool>::new();
    // Outside the list's transition: what was typed survives the reload after a save, so a
    // refused one can be corrected rather than typed again.
    let typed = (RwSignal::new(String::new()), RwSignal::new(String::new()));
    let pools = data::resource(
        move || {
            (
                save.version().get(),
                remove.version().get(),
                save_shared.version().get(),
                grant.version().get(),
                remove_shared.version().get(),
            )
        },
        |_| list_pools(),
    );
    let answer = last_answer(vec![
        save.value(),
        remove.value(),
        save_shared.value(),
        grant.value(),
        remove_shared.value(),
    ]);
    let outcome = answer_line(answer, "pool");
    view! {
        <Title text="Pools · durable" />
        <h1 class="text-xl font-semibold">"Worker pools"</h1>
        <p class="mt-1 text-sm text-slate-600">
            "A pool is a partition of your own that a group of workers serves: the GPU machines, the EU ones. "
            "A step goes to a pool when its code names it ("
            <code>"StepOptions::pool(\"gpu\")"</code>
            ") or a "
            <a class="text-indigo-700 underline" href="/routing">"routing rule"</a>
            " sends it there; otherwise to your tenant's own workers."
        </p>
        <Transition fallback=|| view! { <p class="mt-4 text-sm text-slate-500">"Loading pools…"</p> }>
            {move || Suspend::new(async move {
                match pools.await {
                    Ok(page) => {
                        let can_act = page.can_act;
                        view! {
                            <Show when=move || can_act>
                                <PoolForm save typed />
                            </Show>
                            {outcome}
                            <PoolTable page=page.clone() remove />
                            {page
                                .shared
                                .clone()
                                .map(|shared| view! { <SharedPools shared save_shared grant remove_shared /> })}
                        }
                            .into_any()
                    }
                    Err(e) => view! {
                        <p class="mt-4 text-sm text-red-700" role="alert">{e.to_string()}</p>
                    }
                    .into_any(),
                }
            })}
        </Transition>
    }
}

/// Creates a pool or changes one's labels (the same name replaces them); `typed` holds what
/// its two fields say.
#[component]
fn PoolForm(
    save: ServerAction<SavePool>,
    typed: (RwSignal<String>, RwSignal<String>),
) -> impl IntoView {
    let (name, labels) = typed;
    view! {
        <ActionForm action=save>
            <div class="mt-4 flex flex-wrap items-end gap-3 rounded-lg border border-slate-200 bg-white p-4">
                <label class="flex flex-col text-sm">
                    "Name"
                    <input
                        name="name"
                        required
                        maxlength="63"
                        pattern="[a-z0-9][a-z0-9_\\-]*"
                        title="lowercase letters, digits, _ and -"
                        placeholder="gpu"
                        class="mt-1 rounded-md border border-slate-300 px-2 py-1"
                        data-testid="pool-name"
                        prop:value=move || name.get()
                        on:input=move |ev| name.set(event_target_value(&ev))
                    />
                </label>
                <label class="flex flex-col text-sm">
                    "Labels"
                    <input
                        name="labels"
                        placeholder="region=eu, gpu=a100"
                        class="mt-1 w-64 rounded-md border border-slate-300 px-2 py-1"
                        data-testid="pool-labels"
                        prop:value=move || labels.get()
                        on:input=move |ev| labels.set(event_target_value(&ev))
                    />
                </label>
                <button type="submit" class="rounded-md bg-indigo-600 px-3 py-1.5 text-sm text-white hover:bg-indigo-700" data-testid="pool-save">
                    "Save pool"
                </button>
            </div>
        </ActionForm>
    }
}

#[component]
fn PoolTable(page: PoolsPage, remove: ServerAction<DeletePool>) -> impl IntoView {
    if page.pools.is_empty() {
        return view! {
            <p class="mt-4 text-sm text-slate-600" data-testid="pools-empty">
                "No pools yet. Without one, every step runs on your tenant's own workers ("
                <code>{format!("durable worker --tenant {}", page.tenant)}</code>
                ")."
            </p>
        }
        .into_any();
    }
    let can_act = page.can_act;
    let tenant = page.tenant.clone();
    let rows = page
        .pools
        .into_iter()
        .map(|pool| {
            let command = if pool.shared {
                "a shared pool: the operator runs its workers".to_owned()
            } else {
                format!("durable worker --tenant {tenant} --pool {}", pool.name)
            };
            let shared = pool.shared;
            let labels = pool
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ");
            let workers = if pool.workers.is_empty() {
                view! { <span class="text-amber-800" data-testid="pool-no-workers">"no live worker"</span> }
                    .into_any()
            } else {
                pool.workers
                    .iter()
                    .map(|w| {
                        let announced = w
                            .sdks
                            .iter()
                            .chain(w.capabilities.iter())
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ");
                        view! {
                            <li data-testid="pool-worker">
                                {format!("{}: {}", w.name, w.workers)}
                                {(!announced.is_empty()).then(|| view! {
                                    <div class="text-xs text-slate-500" data-testid="pool-worker-announced">{announced}</div>
                                })}
                            </li>
                        }
                    })
                    .collect_view()
                    .into_any()
            };
            let name = pool.name.clone();
            view! {
                <tr class="border-t border-slate-100 align-top" data-testid="pool-row">
                    <td class="px-3 py-2 font-medium" data-testid="pool-row-name">
                        {pool.name.clone()}
                        {shared.then(|| view! { <span class="ml-2 rounded bg-slate-100 px-1.5 text-xs text-slate-600" data-testid="pool-shared">"shared"</span> })}
                    </td>
                    <td class="px-3 py-2">
                        <code data-testid="pool-partition">{pool.partition}</code>
                        <div class="mt-1 text-xs text-slate-500"><code>{command}</code></div>
                    </td>
                    <td class="px-3 py-2" data-testid="pool-labels-shown">{labels}</td>
                    <td class="px-3 py-2"><ul>{workers}</ul></td>
                    <td class="px-3 py-2 tabular-nums" data-testid="pool-waiting">{pool.waiting}</td>
                    <td class="px-3 py-2 text-right">
                        {(can_act && !shared)
                            .then(|| {
                                view! {
                                    <ActionForm action=remove>
                                        <input type="hidden" name="name" value=name.clone() />
                                        <button type="submit" class="text-red-700 hover:underline" data-testid="pool-delete">
                                            "Delete"
                                        </button>
                                    </ActionForm>
                                }
                            })}
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="mt-4 w-full rounded-lg border border-slate-200 bg-white text-sm">
            <thead class="text-left text-slate-500">
                <tr>
                    <th class="px-3 py-2">"Pool"</th>
                    <th class="px-3 py-2">"Partition"</th>
                    <th class="px-3 py-2">"Labels"</th>
                    <th class="px-3 py-2">"Live workers"</th>
                    <th class="px-3 py-2">"Steps out"</th>
                    <th class="px-3 py-2"></th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

/// The operator's shared pools: each with its grants and worker command; create one, grant it
/// to a tenant or take it back, delete one no tenant holds.
#[component]
fn SharedPools(
    shared: Vec<SharedRow>,
    save_shared: ServerAction<SaveSharedPool>,
    grant: ServerAction<ChangeGrant>,
    remove_shared: ServerAction<DeleteSharedPool>,
) -> impl IntoView {
    let field = "mt-1 rounded-md border border-slate-300 px-2 py-1";
    let rows = shared
        .into_iter()
        .map(|pool| {
            let labels = pool
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ");
            let grants = pool
                .grants
                .iter()
                .map(|tenant| {
                    let (name, tenant) = (pool.name.clone(), tenant.clone());
                    view! {
                        <li class="flex items-center gap-2" data-testid="shared-grant">
                            {tenant.clone()}
                            <ActionForm action=grant>
                                <input type="hidden" name="name" value=name />
                                <input type="hidden" name="tenant" value=tenant />
                                <input type="hidden" name="revoke" value="true" />
                                <button type="submit" class="text-xs text-red-700 hover:underline" data-testid="shared-revoke">"Take back"</button>
                            </ActionForm>
                        </li>
                    }
                })
                .collect_view();
            let (grant_to, delete) = (pool.name.clone(), pool.name.clone());
            view! {
                <tr class="border-t border-slate-100 align-top" data-testid="shared-row">
                    <td class="px-3 py-2 font-medium" data-testid="shared-row-name">{pool.name.clone()}</td>
                    <td class="px-3 py-2"><code>{format!("durable worker --pool {}", pool.name)}</code></td>
                    <td class="px-3 py-2">{labels}</td>
                    <td class="px-3 py-2">
                        <ul>{grants}</ul>
                        <ActionForm action=grant>
                            <input type="hidden" name="name" value=grant_to />
                            <input type="hidden" name="revoke" value="false" />
                            <input name="tenant" required placeholder="tenant" class="w-28 rounded-md border border-slate-300 px-2 py-0.5 text-xs" data-testid="shared-grant-tenant" />
                            <button type="submit" class="ml-1 text-xs text-indigo-700 hover:underline" data-testid="shared-grant-save">"Grant"</button>
                        </ActionForm>
                    </td>
                    <td class="px-3 py-2 text-right">
                        <ActionForm action=remove_shared>
                            <input type="hidden" name="name" value=delete />
                            <button type="submit" class="text-red-700 hover:underline" data-testid="shared-delete">"Delete"</button>
                        </ActionForm>
                    </td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <h2 class="mt-8 text-base font-semibold">"Shared pools"</h2>
        <p class="text-sm text-slate-600">
            "One group of workers serving several tenants: each granted tenant's steps wait in a queue of their own, taken fairly by the tenants' plan weights."
        </p>
        <ActionForm action=save_shared>
            <div class="mt-3 flex flex-wrap items-end gap-3 rounded-lg border border-slate-200 bg-white p-4">
                <label class="flex flex-col text-sm">
                    "Name"
                    <input name="name" required maxlength="63" pattern="[a-z0-9][a-z0-9_\\-]*" placeholder="gpu" class=field data-testid="shared-name" />
                </label>
                <label class="flex flex-col text-sm">
                    "Labels"
                    <input name="labels" placeholder="gpu=a100" class=field data-testid="shared-labels" />
                </label>
                <button type="submit" class="rounded-md bg-indigo-600 px-3 py-1.5 text-sm text-white hover:bg-indigo-700" data-testid="shared-save">
                    "Save shared pool"
                </button>
            </div>
        </ActionForm>
        <table class="mt-4 w-full rounded-lg border border-slate-200 bg-white text-sm">
            <thead class="text-left text-slate-500">
                <tr>
                    <th class="px-3 py-2">"Shared pool"</th>
                    <th class="px-3 py-2">"Workers"</th>
                    <th class="px-3 py-2">"Labels"</th>
                    <th class="px-3 py-2">"Granted to"</th>
                    <th class="px-3 py-2"></th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
}
