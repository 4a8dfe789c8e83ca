use leptos::prelude::*;
use serde_json::Value;

/// A JSON value, pretty-printed in a scrollable block, with a button that copies it (once the
/// page is interactive; before that the text can be selected as usual).
#[component]
pub fn JsonBlock(value: Value, #[prop(optional, into)] testid: String) -> impl IntoView {
    let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
    let copy_text = text.clone();
    let (copied, set_copied) = signal(false);
    let copy = move |_| {
        #[cfg(feature = "hydrate")]
        if let Some(window) = web_sys::window() {
            let _ = window.navigator().clipboard().write_text(&copy_text);
            set_copied.set(true);
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (&copy_text, set_copied);
    };
    view! {
        <div class="relative">
            <pre
                class="max-h-80 overflow-auto rounded-md bg-slate-900 p-3 pr-16 text-xs leading-relaxed text-slate-100"
                data-testid=testid
            >
                {text}
            </pre>
            <button
                type="button"
                class="absolute right-2 top-2 rounded bg-slate-700 px-2 py-0.5 text-[11px] text-slate-100 hover:bg-slate-600 focus:outline-none focus:ring-2 focus:ring-indigo-400"
                on:click=copy
                aria-label="Copy this JSON"
            >
                {move || if copied.get() { "Copied" } else { "Copy" }}
            </button>
        </div>
    }
}
