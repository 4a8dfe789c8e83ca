//! Routing rules: the session tenant's ordered list (first match wins, the last matches
//! everything), which pool each step goes to; an admin adds, removes and reorders rules, a
//! viewer reads them; anyone asks "where would this step go?" of the list as saved. Every
//! change sends the whole list with the version it was read at, so two admins editing at once
//! cannot overwrite each other unseen. The forms post without the wasm too.

use crate::data;
use leptos::prelude::*;
use leptos_meta::Title;
use serde::{Deserialize, Serialize};

use crate::AppError;
use crate::components::answer::{answer_line, last_answer};

/// One rule as the page shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleRow {
    /// Its position, from 1.
    pub position: usize,
    /// What it matches, in words (`workflow demo.order, step order.charge`).
    pub matches: String,
    /// Where it sends (`gpu`, or `default` for the tenant's own workers).
    pub pool: String,
    /// Its fallback pools, comma-separated.
    pub fallback: String,
    /// The priority it gives.
    pub priority: Option<i64>,
    /// Whether it matches everything (the last rule).
    pub catch_all: bool,
}

/// The rules screen's data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoutingPage {
    /// The rules, in order; empty until the tenant sets some.
    pub rules: Vec<RuleRow>,
    /// The version they were read at, sent back with every change.
    pub version: u64,
    /// The pools a rule may name (`default` first).
    pub pools: Vec<String>,
    /// Whether the session may change them.
    pub can_act: bool,
}

#[cfg(feature = "ssr")]
mod rules {
    //! Reading the forms' fields into rules, and the list's edits.

    use std::collections::BTreeMap;

    use durable::model::{DEFAULT_POOL, PoolName, RoutingRules, Rule, RuleMatch};
    use serde_json::Value;

    use crate::AppError;

    /// `key=value` pairs separated by commas or new lines; a value that parses as JSON is
    /// that value (`true`, `3`, `"x"`), else the text.
    pub fn pairs(raw: &str, what: &str) -> Result<BTreeMap<String, Value>, AppError> {
        raw.split([',', '\n'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => {
                    let v = v.trim();
                    let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.into()));
                    Ok((k.trim().to_owned(), value))
                }
                None => Err(AppError::Invalid(format!(
                    "{what} `{p}` must be written key=value"
                ))),
            })
            .collect()
    }

    /// The match a form describes; every blank field matches anything.
    pub fn matching(
        workflow: &str,
        step: &str,
        tag: &str,
        attributes: &str,
        input: &str,
    ) -> Result<RuleMatch, AppError> {
        let text = |s: &str| (!s.trim().is_empty()).then(|| s.trim().to_owned());
        Ok(RuleMatch {
            workflow: text(workflow),
            step: text(step),
            tag: text(tag),
            attributes: pairs(attributes, "attribute")?,
            input: pairs(input, "input condition")?,
        })
    }

    /// The rule a form describes.
    pub fn rule(
        matches: RuleMatch,
        pool: &str,
        fallback: &str,
        priority: &str,
    ) -> Result<Rule, AppError> {
        let invalid = |e: &dyn std::fmt::Display| AppError::Invalid(e.to_string());
        let fallback = fallback
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| PoolName::parse(f).map_err(|e| invalid(&e)))
            .collect::<Result<Vec<_>, _>>()?;
        let priority =
            match priority.trim() {
                "" => None,
                p => Some(p.parse::<i64>().map_err(|_| {
                    AppError::Invalid(format!("priority `{p}` is not a whole number"))
                })?),
            };
        let pool = match pool.trim() {
            "" => DEFAULT_POOL.to_owned(),
            p => p.to_owned(),
        };
        Ok(Rule {
            matches,
            pool,
            fallback,
            priority,
        })
    }

    /// `rules` with `rule` added: before the catch-all, or as the catch-all when it matches
    /// everything; a first rule gets a catch-all to the tenant's own workers after it.
    pub fn added(rules: Option<RoutingRules>, rule: Rule) -> RoutingRules {
        let mut list = rules.unwrap_or_default().rules;
        let catch_all = list.last().is_some_and(|r| r.matches.is_catch_all());
        if rule.matches.is_catch_all() {
            if catch_all {
                list.pop();
            }
            list.push(rule);
        } else {
            let at = if catch_all {
                list.len() - 1
            } else {
                list.len()
            };
            list.insert(at, rule);
            if !catch_all {
                list.push(Rule {
                    matches: RuleMatch::default(),
                    pool: DEFAULT_POOL.to_owned(),
                    fallback: Vec::new(),
                    priority: None,
                });
            }
        }
        RoutingRules { rules: list }
    }
}

/// The session tenant's rules and pools.
#[server(endpoint = "list_routing")]
pub async fn list_routing() -> Result<RoutingPage, AppError> {
    crate::ssr::reply(
        async move {
            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Read, None).await?;
            let (rules, version) = view.routing_rules().await?;
            let pools = std::iter::once(durable::model::DEFAULT_POOL.to_owned())
                .chain(view.pools().await?.into_iter().map(|p| p.name.to_string()))
                .collect();
            let rules = rules
                .map(|r| r.rules)
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(i, rule)| {
                    let m = &rule.matches;
                    let mut said = Vec::new();
                    if let Some(w) = &m.workflow {
                        said.push(format!("workflow {w}"));
                    }
                    if let Some(s) = &m.step {
                        said.push(format!("step {s}"));
                    }
                    if let Some(t) = &m.tag {
                        said.push(format!("tag {t}"));
                    }
                    said.extend(
                        m.attributes
                            .iter()
                            .map(|(k, v)| format!("attribute {k}={v}")),
                    );
                    said.extend(m.input.iter().map(|(k, v)| format!("input {k}={v}")));
                    RuleRow {
                        position: i + 1,
                        catch_all: said.is_empty(),
                        matches: if said.is_empty() {
                            "everything else".to_owned()
                        } else {
                            said.join(", ")
                        },
                        pool: rule.pool.clone(),
                        fallback: rule
                            .fallback
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", "),
                        priority: rule.priority,
                    }
                })
                .collect();
            Ok(RoutingPage {
                rules,
                version,
                pools,
                can_act: view.user().role.can_act(),
            })
        }
        .await,
    )
}

/// The session tenant's rules at `version`, or a refusal saying they changed since.
#[cfg(feature = "ssr")]
async fn rules_at(
    view: &crate::ssr::SessionView,
    version: u64,
) -> Result<Option<durable::model::RoutingRules>, AppError> {
    let (rules, now) = view.routing_rules().await?;
    if now != version {
        return Err(AppError::Invalid(
            "the rules changed since this page was loaded; reload it and make the change again"
                .into(),
        ));
    }
    Ok(rules)
}

/// A rule form's fields as typed (`fields[workflow]`, …): blank matches anything.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RuleFields {
    workflow: String,
    step: String,
    tag: String,
    attributes: String,
    input: String,
    pool: String,
    fallback: String,
    priority: String,
}

/// Adds a rule before the catch-all (a rule matching everything replaces the catch-all).
/// Admins only.
#[server(endpoint = "add_rule")]
pub async fn add_rule(version: u64, fields: RuleFields) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, None).await?;
            let f = &fields;
            let matches = rules::matching(&f.workflow, &f.step, &f.tag, &f.attributes, &f.input)?;
            let rule = rules::rule(matches, &f.pool, &f.fallback, &f.priority)?;
            let current = rules_at(&view, version).await?;
            let version = view.put_routing_rules(rules::added(current, rule)).await?;
            Ok(format!("rule added; the rules are at version {version}"))
        }
        .await,
    )
}

/// Removes rule `position` (from 1); the catch-all stays. Admins only.
#[server(endpoint = "remove_rule")]
pub async fn remove_rule(version: u64, position: usize) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, None).await?;
            let mut rules = rules_at(&view, version).await?.unwrap_or_default();
            let at = position.wrapping_sub(1);
            match rules.rules.get(at) {
                None => return Err(AppError::Invalid(format!("there is no rule {position}"))),
                Some(r) if r.matches.is_catch_all() => {
                    return Err(AppError::Invalid(
                        "the last rule matches everything and stays; to send everything else elsewhere, add a rule with every match field blank".into(),
                    ));
                }
                Some(_) => {
                    rules.rules.remove(at);
                }
            }
            let version = view.put_routing_rules(rules).await?;
            Ok(format!("rule {position} removed; the rules are at version {version}"))
        }
        .await,
    )
}

/// Moves rule `position` (from 1) one place up (`up`) or down, never past the catch-all.
/// Admins only.
#[server(endpoint = "move_rule")]
pub async fn move_rule(version: u64, position: usize, up: bool) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Act, None).await?;
            let mut rules = rules_at(&view, version).await?.unwrap_or_default();
            let at = position.wrapping_sub(1);
            let other = if up {
                at.checked_sub(1)
            } else {
                at.checked_add(1)
            };
            let movable = |i: usize| {
                rules
                    .rules
                    .get(i)
                    .is_some_and(|r| !r.matches.is_catch_all())
            };
            match other {
                Some(other) if movable(at) && movable(other) => rules.rules.swap(at, other),
                _ => {
                    return Err(AppError::Invalid(format!(
                        "rule {position} cannot move {}",
                        if up { "up" } else { "down" }
                    )));
                }
            }
            let version = view.put_routing_rules(rules).await?;
            Ok(format!("rule moved; the rules are at version {version}"))
        }
        .await,
    )
}

/// Where a step (or, without a step, a workflow turn) of a run like the one described would
/// go under the rules as saved.
#[server(endpoint = "test_route")]
pub async fn test_route(
    workflow: String,
    step: String,
    tags: String,
    attributes: String,
    input: String,
) -> Result<String, AppError> {
    crate::ssr::reply(
        async move {
            use durable::model::RouteTarget;
            use serde_json::Value;

            use crate::ssr::{Need, SessionView};

            let view = SessionView::open(Need::Read, None).await?;
            if workflow.trim().is_empty() {
                return Err(AppError::Invalid("name the run's workflow".into()));
            }
            let tags: Vec<String> = tags
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect();
            let attributes = rules::pairs(&attributes, "attribute")?
                .into_iter()
                .collect();
            let input: Option<Value> =
                match input.trim() {
                    "" => None,
                    raw => Some(serde_json::from_str(raw).map_err(|e| {
                        AppError::Invalid(format!("the input is not valid JSON: {e}"))
                    })?),
                };
            let step = step.trim();
            let target = RouteTarget {
                workflow: workflow.trim(),
                step: (!step.is_empty()).then_some(step),
                tags: &tags,
                attributes: &attributes,
                input: input.as_ref(),
            };
            let preview = view.preview_route(&target).await?;
            let mut said = format!("→ {}: {}", preview.partition, preview.route);
            if !preview.fallback.is_empty() {
                let pools: Vec<String> = preview.fallback.iter().map(ToString::to_string).collect();
                said.push_str(&format!(
                    "; falls back to {} while it has no live worker",
                    pools.join(", ")
                ));
            }
            if let Some(p) = preview.priority {
                said.push_str(&format!("; priority {p}"));
            }
            Ok(said)
        }
        .await,
    )
}

/// The rules screen.
#[component]
pub fn RoutingPage() -> impl IntoView {
    let add = ServerAction::<AddRule>::new();
    let remove = ServerAction::<RemoveRule>::new();
    let reorder = ServerAction::<MoveRule>::new();
    let tester = ServerAction::<TestRoute>::new();
    let page = data::resource(
        move || {
            (
                add.version().get(),
                remove.version().get(),
                reorder.version().get(),
            )
        },
        |_| list_routing(),
    );
    let answer = last_answer(vec![add.value(), remove.value(), reorder.value()]);
    let outcome = answer_line(answer, "rule");
    view! {
        <Title text="Routing · durable" />
        <h1 class="text-xl font-semibold">"Routing rules"</h1>
        <p class="mt-1 text-sm text-slate-600">
            "Where each step runs when its code names no pool: the first rule that matches wins, and the last matches everything. "
            "A rule may fall back to other pools while its pool has no live worker."
        </p>
        <Transition fallback=|| view! { <p class="mt-4 text-sm text-slate-500">"Loading rules…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) => {
                        let can_act = page.can_act;
                        let (version, pools) = (page.version, page.pools.clone());
                        view! {
                            {outcome}
                            <RuleTable page=page.clone() remove reorder />
                            <Show when=move || can_act>
                                <RuleForm add version pools=pools.clone() />
                            </Show>
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
        <RouteTester tester />
    }
}

#[component]
fn RuleTable(
    page: RoutingPage,
    remove: ServerAction<RemoveRule>,
    reorder: ServerAction<MoveRule>,
) -> impl IntoView {
    if page.rules.is_empty() {
        return view! {
            <p class="mt-4 text-sm text-slate-600" data-testid="rules-empty">
                "No rules yet: every step runs where its code says, else on your tenant's own workers. Add a rule below."
            </p>
        }
        .into_any();
    }
    let (can_act, version) = (page.can_act, page.version);
    let button = "rounded px-1.5 text-slate-600 hover:bg-slate-100";
    let rows = page
        .rules
        .into_iter()
        .map(|rule| {
            let position = rule.position;
            let actions = (can_act && !rule.catch_all).then(|| {
                view! {
                    <div class="flex justify-end gap-1">
                        <ActionForm action=reorder>
                            <input type="hidden" name="version" value=version />
                            <input type="hidden" name="position" value=position />
                            <input type="hidden" name="up" value="true" />
                            <button type="submit" class=button aria-label=format!("Move rule {position} up") data-testid="rule-up">"↑"</button>
                        </ActionForm>
                        <ActionForm action=reorder>
                            <input type="hidden" name="version" value=version />
                            <input type="hidden" name="position" value=position />
                            <input type="hidden" name="up" value="false" />
                            <button type="submit" class=button aria-label=format!("Move rule {position} down") data-testid="rule-down">"↓"</button>
                        </ActionForm>
                        <ActionForm action=remove>
                            <input type="hidden" name="version" value=version />
                            <input type="hidden" name="position" value=position />
                            <button type="submit" class="text-red-700 hover:underline" data-testid="rule-remove">"Remove"</button>
                        </ActionForm>
                    </div>
                }
            });
            view! {
                <tr class="border-t border-slate-100 align-top" data-testid="rule-row">
                    <td class="px-3 py-2 tabular-nums text-slate-500">{position}</td>
                    <td class="px-3 py-2" data-testid="rule-match">{rule.matches}</td>
                    <td class="px-3 py-2 font-medium" data-testid="rule-pool">{rule.pool}</td>
                    <td class="px-3 py-2">{rule.fallback}</td>
                    <td class="px-3 py-2 tabular-nums">{rule.priority.map(|p| p.to_string())}</td>
                    <td class="px-3 py-2">{actions}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <table class="mt-4 w-full rounded-lg border border-slate-200 bg-white text-sm">
            <thead class="text-left text-slate-500">
                <tr>
                    <th class="px-3 py-2">"#"</th>
                    <th class="px-3 py-2">"Matches"</th>
                    <th class="px-3 py-2">"Pool"</th>
                    <th class="px-3 py-2">"Fallback"</th>
                    <th class="px-3 py-2">"Priority"</th>
                    <th class="px-3 py-2"></th>
                </tr>
            </thead>
            <tbody>{rows}</tbody>
        </table>
    }
    .into_any()
}

#[component]
fn RuleForm(add: ServerAction<AddRule>, version: u64, pools: Vec<String>) -> impl IntoView {
    let field = "mt-1 rounded-md border border-slate-300 px-2 py-1";
    let text = move |name: &'static str, label: &'static str, hint: &'static str| {
        view! {
            <label class="flex flex-col text-sm">
                {label}
                <input name=format!("fields[{name}]") placeholder=hint class=field data-testid=format!("rule-{name}") />
            </label>
        }
    };
    view! {
        <ActionForm action=add>
            <input type="hidden" name="version" value=version />
            <h2 class="mt-6 text-base font-semibold">"Add a rule"</h2>
            <p class="text-xs text-slate-500">"Blank fields match anything; a rule with every field blank replaces the last rule."</p>
            <div class="mt-2 grid gap-3 rounded-lg border border-slate-200 bg-white p-4 sm:grid-cols-4">
                {text("workflow", "Workflow", "demo.order")}
                {text("step", "Step", "order.charge")}
                {text("tag", "Tag", "urgent")}
                {text("attributes", "Attributes", "region=eu")}
                {text("input", "Input conditions", "/order/region=eu")}
                <label class="flex flex-col text-sm">
                    "Pool"
                    <select name="fields[pool]" class=field data-testid="rule-pool-choice">
                        {pools.into_iter().map(|p| view! { <option value=p.clone()>{p.clone()}</option> }).collect_view()}
                    </select>
                </label>
                {text("fallback", "Fallback pools", "gpu-b, gpu-c")}
                {text("priority", "Priority", "5")}
                <div class="sm:col-span-4">
                    <button type="submit" class="rounded-md bg-indigo-600 px-3 py-1.5 text-sm text-white hover:bg-indigo-700" data-testid="rule-add">
                        "Add rule"
                    </button>
                </div>
            </div>
        </ActionForm>
    }
}

/// "Where would this step go?": the rules as saved, asked about a run like the one described.
#[component]
fn RouteTester(tester: ServerAction<TestRoute>) -> impl IntoView {
    let field = "mt-1 rounded-md border border-slate-300 px-2 py-1";
    let answer = move || {
        tester.value().get().map(|done| match done {
            Ok(said) => view! {
                <p class="mt-3 text-sm font-medium text-slate-800" role="status" data-testid="route-answer">{said}</p>
            }
            .into_any(),
            Err(e) => view! {
                <p class="mt-3 text-sm text-red-700" role="alert" data-testid="route-answer-error">{e.to_string()}</p>
            }
            .into_any(),
        })
    };
    view! {
        <ActionForm action=tester>
            <h2 class="mt-8 text-base font-semibold">"Where would this step go?"</h2>
            <div class="mt-2 grid gap-3 rounded-lg border border-slate-200 bg-white p-4 sm:grid-cols-5">
                <label class="flex flex-col text-sm">
                    "Workflow"
                    <input name="workflow" required placeholder="demo.order" class=field data-testid="test-workflow" />
                </label>
                <label class="flex flex-col text-sm">
                    "Step (blank: a workflow turn)"
                    <input name="step" placeholder="order.charge" class=field data-testid="test-step" />
                </label>
                <label class="flex flex-col text-sm">
                    "Tags"
                    <input name="tags" placeholder="urgent, vip" class=field data-testid="test-tags" />
                </label>
                <label class="flex flex-col text-sm">
                    "Attributes"
                    <input name="attributes" placeholder="region=eu" class=field data-testid="test-attributes" />
                </label>
                <label class="flex flex-col text-sm">
                    "Input (JSON)"
                    <input name="input" placeholder="{\"order\": {\"region\": \"eu\"}}" class=field data-testid="test-input" />
                </label>
                <div class="sm:col-span-5">
                    <button type="submit" class="rounded-md border border-indigo-600 px-3 py-1.5 text-sm text-indigo-700 hover:bg-indigo-50" data-testid="test-route">
                        "Where would it go?"
                    </button>
                </div>
            </div>
        </ActionForm>
        {answer}
    }
}
