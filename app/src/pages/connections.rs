//! Connections: the session tenant's credentials for its steps. Every field but the secret
//! values is shown; a secret shows only that it is set, and when. An admin creates a connection
//! or changes one (a secret is typed once, into a password field, and never shown again),
//! removes a secret or deletes the connection; a viewer sees them. The forms post without the
//! wasm too.

use crate::data;
use leptos::prelude::*;
use leptos_meta::Title;
use serde::{Deserialize, Serialize};

use crate::AppError;
use crate::components::answer::{answer_line, last_answer};

/// One connection as the page shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionRow {
    /// Its name.
    pub name: String,
    /// `http` or `secret`.
    pub kind: String,
    /// `http`: its base URL.
    pub base_url: String,
    /// `http`: its readable headers, `Name: value`.
    pub headers: Vec<String>,
    /// Its secret fields and when each was set (epoch milliseconds).
    pub secrets: Vec<(String, i64)>,
}

/// The connections screen's data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionsPage {
    /// The tenant's connections, by name.
    pub connections: Vec<ConnectionRow>,
    /// Whether the session may change them.
    pub can_act: bool,
}

/// The session tenant's connections, without their secret values.
#[server(endpoint = "list_connections")]
pub async fn list_connections() -> Result<ConnectionsPage, AppError> {
    crate::ssr::reply(
        async move {
            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Read, None).await?;
            let connections = view
                .connections()
                .await?
                .into_iter()
                .map(|c| ConnectionRow {
                    name: c.name.to_string(),
                    kind: c.kind.as_str().to_owned(),
                    base_url: c.base_url.unwrap_or_default(),
                    headers: c.headers.iter().map(|(k, v)| format!("{k}: {v}")).collect(),
                    secrets: c.secrets.into_iter().map(|(k, f)| (k, f.set_at)).collect(),
                })
                .collect();
            Ok(ConnectionsPage {
                connections,
                can_act: view.user().role.can_act(),
            })
        }
        .await,
    )
}

/// Creates or changes a connection of the session tenant's: `headers` one `Name: value` per
/// line; `secret_name` and `secret_value`, when both are given, set one secret (the others are
/// kept). Admins only.
#[server(endpoint = "save_connection")]
pub async fn save_connection(
    name: String,
    kind: String,
    base_url: String,
    headers: String,
    secret_name: String,
    secret_value: String,
) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use std::collections::BTreeMap;

            use durable::model::{ConnectionKind, ConnectionName, ConnectionSpec};

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, None).await?;
            let invalid = |e: &dyn std::fmt::Display| AppError::Invalid(e.to_string());
            let name = ConnectionName::parse(name.trim()).map_err(|e| invalid(&e))?;
            let kind = match kind.as_str() {
                "secret" => ConnectionKind::Secret,
                _ => ConnectionKind::Http,
            };
            let headers = headers
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(|l| match l.split_once(':') {
                    Some((k, v)) => Ok((k.trim().to_owned(), v.trim().to_owned())),
                    None => Err(AppError::Invalid(format!(
                        "header `{l}` must be written `Name: value`"
                    ))),
                })
                .collect::<Result<BTreeMap<_, _>, _>>()?;
            let mut secrets = BTreeMap::new();
            match (secret_name.trim(), secret_value.as_str()) {
                ("", "") => {}
                ("", _) => {
                    return Err(AppError::Invalid(
                        "name the secret you typed a value for".into(),
                    ));
                }
                (_, "") => {
                    return Err(AppError::Invalid(format!(
                        "type a value for secret `{}`, or leave its name blank",
                        secret_name.trim()
                    )));
                }
                (field, value) => {
                    secrets.insert(field.to_owned(), Some(value.to_owned()));
                }
            }
            let http = kind == ConnectionKind::Http;
            let spec = ConnectionSpec {
                kind,
                base_url: (http && !base_url.trim().is_empty()).then(|| base_url.trim().to_owned()),
                headers: if http { headers } else { BTreeMap::new() },
                secret_headers: if http {
                    secrets.clone()
                } else {
                    BTreeMap::new()
                },
                values: if http { BTreeMap::new() } else { secrets },
            };
            let created = view.put_connection(name.clone(), spec).await?;
            let verb = if created { "created" } else { "saved" };
            Ok(format!("connection {name} {verb}"))
        }
        .await,
    )
}

/// Removes one secret of a connection of the session tenant's. Admins only.
#[server(endpoint = "unset_connection_secret")]
pub async fn unset_connection_secret(name: String, secret: String) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use std::collections::BTreeMap;

            use durable::model::{ConnectionKind, ConnectionName, ConnectionSpec};

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, None).await?;
            let name =
                ConnectionName::parse(&name).map_err(|e| AppError::Invalid(e.to_string()))?;
            let Some(current) = view.connection(&name).await? else {
                return Err(AppError::Invalid(format!(
                    "there is no connection {name}; reload the list"
                )));
            };
            let removed = BTreeMap::from([(secret.clone(), None)]);
            let http = current.kind == ConnectionKind::Http;
            let spec = ConnectionSpec {
                kind: current.kind,
                base_url: current.base_url,
                headers: current.headers,
                secret_headers: if http {
                    removed.clone()
                } else {
                    BTreeMap::new()
                },
                values: if http { BTreeMap::new() } else { removed },
            };
            view.put_connection(name.clone(), spec).await?;
            Ok(format!("secret {secret} of connection {name} removed"))
        }
        .await,
    )
}

/// Deletes a connection of the session tenant's. Admins only.
#[server(endpoint = "delete_connection")]
pub async fn delete_connection(name: String) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::ConnectionName;

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, None).await?;
            let name =
                ConnectionName::parse(&name).map_err(|e| AppError::Invalid(e.to_string()))?;
            if !view.delete_connection(&name).await? {
                return Err(AppError::Invalid(format!(
                    "there is no connection {name}; reload the list"
                )));
            }
            Ok(format!("connection {name} deleted"))
        }
        .await,
    )
}

/// What the form's fields say, kept outside the list's transition: a refused save can be
/// corrected rather than typed again, and "Edit" fills them from a row.
#[derive(Clone, Copy)]
struct Typed {
    name: RwSignal<String>,
    kind: RwSignal<String>,
    base_url: RwSignal<String>,
    headers: RwSignal<String>,
}

/// The connections screen.
#[component]
pub fn ConnectionsPage() -> impl IntoView {
    let save = ServerAction::<SaveConnection>::new();
    let unset = ServerAction::<UnsetConnectionSecret>::new();
    let remove = ServerAction::<DeleteConnection>::new();
    let typed = Typed {
        name: RwSignal::new(String::new()),
        kind: RwSignal::new("http".to_owned()),
        base_url: RwSignal::new(String::new()),
        headers: RwSignal::new(String::new()),
    };
    let connections = data::resource(
        move || {
            (
                save.version().get(),
                unset.version().get(),
                remove.version().get(),
            )
        },
        |_| list_connections(),
    );
    let answer = last_answer(vec![save.value(), unset.value(), remove.value()]);
    let outcome = answer_line(answer, "connection");
    view! {
        <Title text="Connections · durable" />
        <h1 class="text-xl font-semibold">"Connections"</h1>
        <p class="mt-1 text-sm text-slate-600">
            "A connection holds what a step needs to reach a service: a base URL and headers for "
            <code>"durable.http"</code>
            ", or named secret values a step reads with "
            <code>"ctx.connection(\"name\")"</code>
            ". Secrets are encrypted at rest, never shown again once saved, and kept out of every run's history."
        </p>
        <Transition fallback=|| view! { <p class="mt-4 text-sm text-slate-500">"Loading connections…"</p> }>
            {move || Suspend::new(async move {
                match connections.await {
                    Ok(page) => {
                        let can_act = page.can_act;
                        view! {
                            <Show when=move || can_act>
                                <ConnectionForm save typed />
                            </Show>
                            {outcome}
                            <ConnectionTable page=page.clone() unset remove typed />
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

/// Creates a connection or changes one (the same name changes it).
#[component]
fn ConnectionForm(save: ServerAction<SaveConnection>, typed: Typed) -> impl IntoView {
    let field = "mt-1 rounded-md border border-slate-300 px-2 py-1";
    let http = move || typed.kind.get() != "secret";
    view! {
        <ActionForm action=save>
            <div class="mt-4 grid gap-3 rounded-lg border border-slate-200 bg-white p-4 sm:grid-cols-2">
                <label class="flex flex-col text-sm">
                    "Name"
                    <input
                        name="name"
                        required
                        maxlength="63"
                        pattern="[a-z0-9][a-z0-9_\\-]*"
                        title="lowercase letters, digits, _ and -"
                        placeholder="stripe"
                        class=field
                        data-testid="connection-name"
                        prop:value=move || typed.name.get()
                        on:input=move |ev| typed.name.set(event_target_value(&ev))
                    />
                </label>
                <label class="flex flex-col text-sm">
                    "Kind"
                    <select
                        name="kind"
                        class=field
                        data-testid="connection-kind"
                        prop:value=move || typed.kind.get()
                        on:change=move |ev| typed.kind.set(event_target_value(&ev))
                    >
                        <option value="http">"HTTP API (base URL and headers)"</option>
                        <option value="secret">"Secret values"</option>
                    </select>
                </label>
                <label class="flex flex-col text-sm" class:hidden=move || !http()>
                    "Base URL"
                    <input
                        name="base_url"
                        type="url"
                        placeholder="https://api.example.com/v1/"
                        class=field
                        data-testid="connection-base-url"
                        prop:value=move || typed.base_url.get()
                        on:input=move |ev| typed.base_url.set(event_target_value(&ev))
                    />
                </label>
                <label class="flex flex-col text-sm" class:hidden=move || !http()>
                    "Headers (readable, one `Name: value` per line)"
                    <textarea
                        name="headers"
                        rows="2"
                        placeholder="Accept: application/json"
                        class=field
                        data-testid="connection-headers"
                        prop:value=move || typed.headers.get()
                        on:input=move |ev| typed.headers.set(event_target_value(&ev))
                    ></textarea>
                </label>
                <label class="flex flex-col text-sm">
                    {move || if http() { "Secret header name" } else { "Secret name" }}
                    <input
                        name="secret_name"
                        placeholder=move || if http() { "Authorization" } else { "api_key" }
                        class=field
                        data-testid="connection-secret-name"
                    />
                </label>
                <label class="flex flex-col text-sm">
                    "Secret value (write-only; blank keeps the stored one)"
                    <input
                        name="secret_value"
                        type="password"
                        autocomplete="off"
                        class=field
                        data-testid="connection-secret-value"
                    />
                </label>
                <div class="sm:col-span-2">
                    <button type="submit" class="rounded-md bg-indigo-600 px-3 py-1.5 text-sm text-white hover:bg-indigo-700" data-testid="connection-save">
                        "Save connection"
                    </button>
                </div>
            </div>
        </ActionForm>
    }
}

#[component]
fn ConnectionTable(
    page: ConnectionsPage,
    unset: ServerAction<UnsetConnectionSecret>,
    remove: ServerAction<DeleteConnection>,
    typed: Typed,
) -> impl IntoView {
    if page.connections.is_empty() {
        return view! {
            <p class="mt-4 text-sm text-slate-600" data-testid="connections-empty">
                "No connections yet. Create one above, with "
                <code>"PUT /api/v1/connections/{name}"</code>
                ", or with "
                <code>"durable connection put"</code>
                "."
            </p>
        }
        .into_any();
    }
    let can_act = page.can_act;
    let rows = page
        .connections
        .into_iter()
        .map(|c| {
            let secrets = c
                .secrets
                .iter()
                .map(|(field, set_at)| {
                    let (name, field) = (c.name.clone(), field.clone());
                    let when = crate::components::time::utc(*set_at);
                    view! {
                        <li class="flex items-center gap-2" data-testid="connection-secret">
                            <code>{field.clone()}</code>
                            <span class="text-slate-500">{format!("set {when}")}</span>
                            {can_act
                                .then(|| {
                                    view! {
                                        <ActionForm action=unset>
                                            <input type="hidden" name="name" value=name.clone() />
                                            <input type="hidden" name="secret" value=field.clone() />
                                            <button type="submit" class="text-xs text-red-700 hover:underline" data-testid="connection-unset">
                                                "Remove"
                                            </button>
                                        </ActionForm>
                                    }
                                })}
                        </li>
                    }
                })
                .collect_view();
            let edit = {
                let row = c.clone();
                move |_| {
                    typed.name.set(row.name.clone());
                    typed.kind.set(row.kind.clone());
                    typed.base_url.set(row.base_url.clone());
                    typed.headers.set(row.headers.join("\n"));
                }
            };
            let name = c.name.clone();
            view! {
                <tr class="border-t border-slate-100 align-top" data-testid="connection-row">
                    <td class="px-3 py-2 font-medium" data-testid="connection-row-name">{c.name.clone()}</td>
                    <td class="px-3 py-2">{c.kind.clone()}</td>
                    <td class="px-3 py-2">
                        <code data-testid="connection-row-url">{c.base_url.clone()}</code>
                        <ul class="mt-1 text-xs text-slate-600">
                            {c.headers.iter().map(|h| view! { <li><code>{h.clone()}</code></li> }).collect_view()}
                        </ul>
                    </td>
                    <td class="px-3 py-2"><ul>{secrets}</ul></td>
                    <td class="px-3 py-2 text-right">
                        {can_act
                            .then(|| {
                                view! {
                                    <button type="button" class="mr-3 text-indigo-700 hover:underline" on:click=edit.clone() data-testid="connection-edit">
                                        "Edit"
                                    </button>
                                    <ActionForm action=remove>
                                        <input type="hidden" name="name" value=name.clone() />
                                        <button type="submit" class="text-red-700 hover:underline" data-testid="connection-delete">
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
                    <th class="px-3 py-2">"Connection"</th>
                    <th class="px-3 py-2">"Kind"</th>
                    <th class="px-3 py-2">"Base URL and headers"</th>
                    <th class="px-3 py-2">"Secrets"</th>
                    <th class="px-3 py-2"></th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}
