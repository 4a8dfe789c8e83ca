//! The child-run tree of a run's family, drawn from `parent_run_id` links: the root at the top,
//! every child under its parent, the run being viewed highlighted.

use std::collections::HashMap;

use durable::model::{Run, RunId};
use leptos::prelude::*;

use crate::components::status::StatusBadge;

/// Children of each run, in creation order.
fn children_of(family: &[Run]) -> HashMap<RunId, Vec<Run>> {
    let mut children: HashMap<RunId, Vec<Run>> = HashMap::new();
    for run in family {
        if let Some(parent) = &run.parent_run_id {
            children
                .entry(parent.clone())
                .or_default()
                .push(run.clone());
        }
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    }
    children
}

fn node(run: &Run, children: &HashMap<RunId, Vec<Run>>, current: &RunId, depth: usize) -> AnyView {
    let here = &run.id == current;
    let kids = children.get(&run.id).cloned().unwrap_or_default();
    let label = format!("{} v{}", run.workflow, run.workflow_version);
    let id = run.id.to_string();
    let link = if here {
        view! { <span class="font-mono text-xs font-semibold" aria-current="page">{id}</span> }
            .into_any()
    } else {
        view! {
            <a class="font-mono text-xs text-indigo-700 hover:underline" href=format!("/runs/{id}")>
                {id.clone()}
            </a>
        }
        .into_any()
    };
    // Deep trees stop indenting at some point so they stay readable at 390 px.
    let pad = if depth == 0 {
        ""
    } else {
        "ml-3 border-l border-slate-200 pl-3 sm:ml-4"
    };
    view! {
        <li class=pad data-testid="tree-node" data-run-id=run.id.to_string()>
            <div class=if here { "flex flex-wrap items-center gap-2 rounded bg-indigo-50 px-1 py-0.5" } else { "flex flex-wrap items-center gap-2 px-1 py-0.5" }>
                {link}
                <span class="text-xs text-slate-600">{label}</span>
                <StatusBadge status=run.status />
            </div>
            {(!kids.is_empty())
                .then(|| {
                    view! {
                        <ul>
                            {kids
                                .iter()
                                .map(|k| node(k, children, current, depth + 1))
                                .collect_view()}
                        </ul>
                    }
                })}
        </li>
    }
    .into_any()
}

/// The tree of `family` (a root and the runs started under it), marking `current`.
#[component]
pub fn RunTree(family: Vec<Run>, current: RunId, truncated: bool) -> impl IntoView {
    let children = children_of(&family);
    let roots: Vec<Run> = family
        .iter()
        .filter(|r| {
            r.parent_run_id.is_none()
                || !family
                    .iter()
                    .any(|p| Some(&p.id) == r.parent_run_id.as_ref())
        })
        .cloned()
        .collect();
    view! {
        <ul class="rounded-lg border border-slate-200 bg-white p-3 text-sm" data-testid="run-tree">
            {roots.iter().map(|r| node(r, &children, &current, 0)).collect_view()}
        </ul>
        {truncated.then(|| view! {
            <p class="mt-1 text-xs text-slate-500">"Showing the newest 200 runs of this family; the runs list filtered by the root's id shows them all."</p>
        })}
    }
}
