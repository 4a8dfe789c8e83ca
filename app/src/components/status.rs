use durable::model::RunStatus;
use leptos::prelude::*;

/// Tailwind classes for a status, with contrast that stays readable.
pub fn status_classes(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Pending => "bg-slate-200 text-slate-800",
        RunStatus::Running => "bg-blue-100 text-blue-800",
        RunStatus::Suspended => "bg-amber-100 text-amber-900",
        RunStatus::Blocked => "bg-orange-100 text-orange-900",
        RunStatus::Cancelling => "bg-purple-100 text-purple-900",
        RunStatus::Completed => "bg-emerald-100 text-emerald-900",
        RunStatus::Failed | RunStatus::Dead | RunStatus::CompensationFailed => {
            "bg-red-100 text-red-800"
        }
        RunStatus::Compensated => "bg-yellow-100 text-yellow-900",
        RunStatus::Cancelled => "bg-zinc-200 text-zinc-800",
        RunStatus::Continued => "bg-teal-100 text-teal-900",
    }
}

/// A run status as a pill.
#[component]
pub fn StatusBadge(status: RunStatus) -> impl IntoView {
    view! {
        <span
            class=format!(
                "inline-flex items-center rounded-full px-2 py-0.5 text-xs font-medium {}",
                status_classes(status),
            )
            data-status=status.as_str()
        >
            {status.as_str()}
        </span>
    }
}
