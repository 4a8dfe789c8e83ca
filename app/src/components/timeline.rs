//! A run's checkpoints drawn as bars on one time axis: how long each waited in a queue, how long
//! it ran, how many tries it took and which worker group ran it. Rendered on the server from
//! stored times only (no clock reads), so the page is the same before and after hydration.

use durable::model::{Checkpoint, CheckpointKind, CheckpointStatus, Millis, Run, Saga};
use leptos::prelude::*;

use crate::components::time::duration;

/// One bar segment, as percentages of the axis.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Segment {
    left: f64,
    width: f64,
}

/// The axis: from the run's creation to the last thing that happened to it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Axis {
    start: Millis,
    end: Millis,
}

impl Axis {
    fn of(run: &Run, checkpoints: &[Checkpoint]) -> Self {
        let last = checkpoints
            .iter()
            .flat_map(|c| [c.enqueued_at, c.started_at, c.finished_at, c.wake_at])
            .flatten()
            .chain([run.updated_at, run.finished_at.unwrap_or(run.updated_at)])
            .max()
            .unwrap_or(run.created_at);
        Axis {
            start: run.created_at,
            // A zero-length axis would divide by zero; one millisecond keeps bars drawable.
            end: last.max(run.created_at + 1),
        }
    }

    /// `from..to` on this axis; `to` defaults to the axis end (still going). A segment never
    /// gets thinner than a hairline, so instant steps stay visible.
    fn segment(&self, from: Millis, to: Option<Millis>) -> Segment {
        let span = (self.end - self.start) as f64;
        let from = from.clamp(self.start, self.end);
        let to = to.unwrap_or(self.end).clamp(from, self.end);
        let left = (from - self.start) as f64 / span * 100.0;
        let width = ((to - from) as f64 / span * 100.0).max(0.6);
        Segment {
            left: left.min(99.4),
            width: width.min(100.0 - left.min(99.4)),
        }
    }

    fn ticks(&self) -> [(f64, String); 3] {
        let span = self.end - self.start;
        [
            (0.0, "0".to_owned()),
            (50.0, duration(span / 2)),
            (100.0, duration(span)),
        ]
    }
}

/// What one checkpoint's row shows.
struct Bar {
    queued: Option<Segment>,
    ran: Option<Segment>,
    waited: Option<Segment>,
    summary: String,
}

fn bar(axis: &Axis, cp: &Checkpoint) -> Bar {
    let open = |end: Option<Millis>| match cp.status {
        CheckpointStatus::Completed | CheckpointStatus::Failed => end,
        _ => None,
    };
    // Timers, signal waits and children run nothing here: their bar is the wait itself.
    if matches!(
        cp.kind,
        CheckpointKind::Sleep | CheckpointKind::Signal | CheckpointKind::Child
    ) {
        let from = cp.started_at.or(cp.enqueued_at).unwrap_or(axis.start);
        let mut parts = Vec::new();
        if let Some(f) = cp.finished_at {
            parts.push(format!("waited {}", duration(f - from)));
        } else {
            parts.push("waiting".to_owned());
        }
        return Bar {
            queued: None,
            ran: None,
            waited: Some(axis.segment(from, open(cp.finished_at))),
            summary: parts.join(" · "),
        };
    }
    let queued = cp
        .enqueued_at
        .map(|q| axis.segment(q, cp.started_at.or(open(cp.finished_at))));
    let ran = cp.started_at.map(|s| axis.segment(s, open(cp.finished_at)));
    let mut parts = Vec::new();
    if let (Some(q), Some(s)) = (cp.enqueued_at, cp.started_at) {
        parts.push(format!("queued {}", duration(s - q)));
    }
    if let (Some(s), Some(f)) = (cp.started_at, cp.finished_at) {
        parts.push(format!("ran {}", duration(f - s)));
    }
    if cp.attempts > 1 {
        parts.push(format!("{} tries", cp.attempts));
    }
    if let Some(group) = &cp.worker_group {
        parts.push(format!("on {group}"));
    }
    if let Some(route) = &cp.route {
        parts.push(route.to_string());
    }
    if !matches!(
        cp.status,
        CheckpointStatus::Completed | CheckpointStatus::Failed
    ) {
        parts.push(cp.status.as_str().to_owned());
    }
    Bar {
        queued,
        ran,
        waited: None,
        summary: parts.join(" · "),
    }
}

fn style(s: Segment) -> String {
    format!("left: {:.2}%; width: {:.2}%", s.left, s.width)
}

/// The timeline of `checkpoints` for `run`.
#[component]
pub fn Timeline(run: Run, checkpoints: Vec<Checkpoint>) -> impl IntoView {
    let axis = Axis::of(&run, &checkpoints);
    let rows = checkpoints
        .iter()
        .map(|cp| {
            let b = bar(&axis, cp);
            let color = match cp.status {
                CheckpointStatus::Failed => "bg-red-500",
                CheckpointStatus::Completed => "bg-emerald-500",
                _ => "bg-blue-500",
            };
            let label = format!("#{} {} {}", cp.seq, cp.kind.as_str(), cp.name);
            // A compensation says which step it undoes; a step says what would undo it.
            let saga = match &cp.saga {
                Some(Saga::Undoes(seq)) => Some(format!("compensates #{seq}")),
                Some(Saga::Undo { step, .. }) => Some(format!("undone by {step}")),
                None => None,
            };
            let compensation = matches!(cp.saga, Some(Saga::Undoes(_)));
            let summary = match &saga {
                Some(saga) => format!("{saga} · {}", b.summary),
                None => b.summary.clone(),
            };
            view! {
                <li class="grid grid-cols-[minmax(0,9rem)_1fr] items-center gap-2 sm:grid-cols-[minmax(0,14rem)_1fr]" data-testid="timeline-row" data-seq=cp.seq data-compensation=compensation.then_some("true")>
                    <span class="truncate font-mono text-xs text-slate-700" title=label.clone()>{label.clone()}</span>
                    <div class="relative h-5 rounded bg-slate-100" title=b.summary.clone()>
                        {b.queued.map(|s| view! { <span class="absolute inset-y-1 rounded-sm bg-amber-300" style=style(s) data-part="queued"></span> })}
                        {b.waited.map(|s| view! { <span class="absolute inset-y-1.5 rounded-sm bg-slate-400" style=style(s) data-part="waited"></span> })}
                        {b.ran.map(|s| view! { <span class=format!("absolute inset-y-0.5 rounded-sm {color}") style=style(s) data-part="ran"></span> })}
                    </div>
                    <span></span>
                    <span class=if compensation { "-mt-1 text-[11px] font-medium text-amber-700" } else { "-mt-1 text-[11px] text-slate-500" }>{summary}</span>
                </li>
            }
        })
        .collect_view();
    let ticks = axis.ticks();
    view! {
        <div class="rounded-lg border border-slate-200 bg-white p-3" data-testid="timeline">
            <div class="mb-2 flex flex-wrap gap-3 text-[11px] text-slate-600">
                <span><span class="mr-1 inline-block h-2 w-3 rounded-sm bg-amber-300"></span>"queue wait"</span>
                <span><span class="mr-1 inline-block h-2 w-3 rounded-sm bg-emerald-500"></span>"ran, completed"</span>
                <span><span class="mr-1 inline-block h-2 w-3 rounded-sm bg-red-500"></span>"ran, failed"</span>
                <span><span class="mr-1 inline-block h-2 w-3 rounded-sm bg-blue-500"></span>"in progress"</span>
                <span><span class="mr-1 inline-block h-2 w-3 rounded-sm bg-slate-400"></span>"timer, signal or child wait"</span>
            </div>
            <ol class="flex flex-col gap-1">{rows}</ol>
            <div class="relative mt-1 grid grid-cols-[minmax(0,9rem)_1fr] gap-2 sm:grid-cols-[minmax(0,14rem)_1fr]">
                <span class="text-[11px] text-slate-500">"since start"</span>
                <div class="relative h-4 border-t border-slate-300 text-[11px] text-slate-500">
                    {ticks
                        .into_iter()
                        .map(|(at, text)| {
                            let align = if at >= 100.0 { "translate-x-[-100%]" } else if at > 0.0 { "translate-x-[-50%]" } else { "" };
                            view! { <span class=format!("absolute top-0.5 {align}") style=format!("left: {at}%")>{text}</span> }
                        })
                        .collect_view()}
                </div>
            </div>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_fractions_of_the_axis_and_never_vanish() {
        let axis = Axis {
            start: 1_000,
            end: 2_000,
        };
        assert_eq!(
            axis.segment(1_250, Some(1_750)),
            Segment {
                left: 25.0,
                width: 50.0
            }
        );
        // Still running: the bar reaches the end of the axis.
        assert_eq!(axis.segment(1_500, None).width, 50.0);
        // An instant step is a hairline, not nothing.
        assert!(axis.segment(1_500, Some(1_500)).width > 0.0);
        // Out-of-range times are clamped inside the axis.
        let s = axis.segment(500, Some(9_000));
        assert_eq!((s.left, s.width), (0.0, 100.0));
        let last = axis.segment(2_000, Some(2_000));
        assert!(last.left + last.width <= 100.0);
    }
}
