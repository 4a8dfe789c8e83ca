//! API tokens, for a tenant's admins: issue one (shown once, then kept only as a hash), see each
//! token's scope and state, revoke one. The tenant is always the session user's; operators
//! manage tokens with `durable token` or the API. The forms work before the wasm loads.

use crate::data;
use durable::model::ApiToken;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::AppError;

/// The session's tenant, for an admin of one (a viewer, or an operator bound to no tenant,
/// manages no tokens here).
#[cfg(feature = "ssr")]
async fn admins_tenant() -> Result<durable::model::Namespace, AppError> {
    use durable::model::Role;

    let user = crate::ssr::session_user().await?;
    match (user.role, user.tenant) {
        (Role::Admin, Some(tenant)) => Ok(tenant),
        (Role::Operator, _) => Err(AppError::Invalid(
            "operators manage tokens with `durable token` or the API (/api/v1/tenants/NAME/tokens)"
                .into(),
        )),
        _ => Err(AppError::Forbidden),
    }
}

/// The session tenant's tokens, newest first.
#[server(endpoint = "list_tokens")]
pub async fn list_tokens() -> Result<Vec<ApiToken>, AppError> {
    crate::ssr::reply(
        async move {
            let tenant = admins_tenant().await?;
            let state = crate::ssr::app_state()?;
            state
                .accounts
                .tokens(Some(&tenant))
                .await
                .map_err(crate::ssr::store_error)
        }
        .await,
    )
}

/// Issues a token for the session's tenant; the token, which is shown this once.
#[server(endpoint = "issue_token")]
pub async fn issue_token(
    name: String,
    scope: String,
    expires_in_days: String,
) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::TokenScope;
            use durable::runtime::{Clock, SystemClock};

            let tenant = admins_tenant().await?;
            let name = ApiToken::check_name(&name).map_err(AppError::Invalid)?;
            let scope = match scope.as_str() {
                "read" => TokenScope::Read,
                "read-write" => TokenScope::ReadWrite,
                other => {
                    return Err(AppError::Invalid(format!(
                        "`{other}` is not a scope: choose read or read-write"
                    )));
                }
            };
            let now = SystemClock.now();
            let expires_at = match expires_in_days.trim() {
                "" | "never" => None,
                days => match days.parse::<i64>() {
                    Ok(days @ 1..=3650) => Some(now + days * 86_400_000),
                    _ => {
                        return Err(AppError::Invalid(format!(
                            "expiry `{days}` must be a number of days from 1 to 3650, or never"
                        )));
                    }
                },
            };
            let (stored, token) =
                durable::gateway::issue_api_token(Some(tenant), name, scope, expires_at, now);
            let state = crate::ssr::app_state()?;
            tracing::info!(token = %stored.token.id, tenant = ?stored.token.tenant, "API token issued from the dashboard");
            state
                .accounts
                .create_token(stored)
                .await
                .map_err(crate::ssr::store_error)?;
            Ok(token)
        }
        .await,
    )
}

/// Revokes one of the session tenant's tokens.
#[server(endpoint = "revoke_token")]
pub async fn revoke_token(id: String) -> Result<(), AppError> {
    crate::ssr::reply(
        async move {
            use durable::runtime::{Clock, SystemClock};

            let tenant = admins_tenant().await?;
            let state = crate::ssr::app_state()?;
            let revoked = state
                .accounts
                .revoke_token(&id, Some(&tenant), SystemClock.now())
                .await
                .map_err(crate::ssr::store_error)?;
            if !revoked {
                return Err(AppError::Invalid(
                    "no live token of your tenant has that id; reload the list".into(),
                ));
            }
            tracing::info!(token = %id, %tenant, "API token revoked from the dashboard");
            Ok(())
        }
        .await,
    )
}

/// The tokens screen.
#[component]
pub fn TokensPage() -> impl IntoView {
    let issue = ServerAction::<IssueToken>::new();
    let revoke = ServerAction::<RevokeToken>::new();
    let tokens = data::resource(
        move || (issue.version().get(), revoke.version().get()),
        |_| list_tokens(),
    );
    let issued = move || issue.value().get().and_then(Result::ok);
    let error = move || {
        issue
            .value()
            .get()
            .and_then(Result::err)
            .or_else(|| revoke.value().get().and_then(Result::err))
            .map(|e| e.to_string())
    };
    view! {
        <Title text="API tokens · durable" />
        <h1 class="text-xl font-semibold">"API tokens"</h1>
        <p class="mt-1 text-sm text-slate-600">
            "Programs use these with " <code>"Authorization: Bearer <token>"</code>
            " on /api/v1. A token is shown once, when it is issued; revoke one and it stops working at its next request."
        </p>
        <ActionForm action=issue>
            <div class="mt-4 flex flex-wrap items-end gap-3 rounded-lg border border-slate-200 bg-white p-4">
                <label class="flex flex-col text-sm">
                    "Name"
                    <input
                        name="name"
                        required
                        maxlength="100"
                        placeholder="billing-service"
                        class="mt-1 rounded-md border border-slate-300 px-2 py-1"
                        data-testid="token-name"
                    />
                </label>
                <label class="flex flex-col text-sm">
                    "Scope"
                    <select name="scope" class="mt-1 rounded-md border border-slate-300 px-2 py-1" data-testid="token-scope">
                        <option value="read-write">"read and write"</option>
                        <option value="read">"read only"</option>
                    </select>
                </label>
                <label class="flex flex-col text-sm">
                    "Expires"
                    <select name="expires_in_days" class="mt-1 rounded-md border border-slate-300 px-2 py-1">
                        <option value="never">"never"</option>
                        <option value="7">"in 7 days"</option>
                        <option value="30">"in 30 days"</option>
                        <option value="90">"in 90 days"</option>
                    </select>
                </label>
                <button type="submit" class="rounded-md bg-indigo-600 px-3 py-1.5 text-sm text-white hover:bg-indigo-700" data-testid="token-issue">
                    "Issue token"
                </button>
            </div>
        </ActionForm>
        {move || {
            issued()
                .map(|token| {
                    view! {
                        <div class="mt-3 rounded-md border border-amber-300 bg-amber-50 p-3 text-sm" role="status">
                            <p class="font-medium">"Copy this token now: it is not shown again."</p>
                            <code class="mt-1 block break-all" data-testid="token-issued">{token}</code>
                        </div>
                    }
                })
        }}
        {move || {
            error()
                .map(|e| {
                    view! {
                        <p class="mt-3 text-sm text-red-700" role="alert" data-testid="token-error">{e}</p>
                    }
                })
        }}
        <Suspense fallback=|| view! { <p class="mt-4 text-sm text-slate-500">"Loading tokens…"</p> }>
            {move || Suspend::new(async move {
                match tokens.await {
                    Ok(list) => view! { <TokenTable list revoke /> }.into_any(),
                    Err(e) => view! {
                        <p class="mt-4 text-sm text-red-700" role="alert">{e.to_string()}</p>
                    }
                    .into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn TokenTable(list: Vec<ApiToken>, revoke: ServerAction<RevokeToken>) -> impl IntoView {
    if list.is_empty() {
        return view! {
            <p class="mt-4 text-sm text-slate-600" data-testid="tokens-empty">
                "No tokens yet. Issue one above for each program that calls the API."
            </p>
        }
        .into_any();
    }
    let rows = list
        .into_iter()
        .map(|token| {
            let state = match (token.revoked_at, token.expires_at) {
                (Some(_), _) => "revoked",
                (None, Some(_)) => "expires",
                (None, None) => "live",
            };
            let live = token.revoked_at.is_none();
            let id = token.id.clone();
            let shown_id = token.id.clone();
            view! {
                <tr class="border-t border-slate-100" data-testid="token-row" data-token-id=token.id>
                    <td class="px-3 py-2">{token.name}</td>
                    <td class="px-3 py-2 font-mono text-xs">{shown_id}</td>
                    <td class="px-3 py-2">{token.scope.as_str()}</td>
                    <td class="px-3 py-2" data-testid="token-state">{state}</td>
                    <td class="px-3 py-2 text-right">
                        {live
                            .then(|| {
                                view! {
                                    <ActionForm action=revoke>
                                        <input type="hidden" name="id" value=id.clone() />
                                        <button type="submit" class="text-red-700 hover:underline" data-testid="token-revoke">
                                            "Revoke"
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
                    <th class="px-3 py-2">"Name"</th>
                    <th class="px-3 py-2">"Id"</th>
                    <th class="px-3 py-2">"Scope"</th>
                    <th class="px-3 py-2">"State"</th>
                    <th class="px-3 py-2"></th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}
