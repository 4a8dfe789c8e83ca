use leptos::prelude::*;
use serde_json::Value;

/// A JSON value, pretty-printed in a scrollable block.
#[component]
pub fn JsonBlock(value: Value, #[prop(optional, into)] testid: String) -> impl IntoView {
    let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
    view! {
        <pre
            class="max-h-80 overflow-auto rounded-md bg-slate-900 p-3 text-xs leading-relaxed text-slate-100"
            data-testid=testid
        >
            {text}
        </pre>
    }
}
