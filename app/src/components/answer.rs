//! What a page with several forms says after a submission: the answer of whichever form
//! answered last, not of the first that ever answered.

use leptos::prelude::*;

use crate::AppError;

/// A form's answer: its message, or why it was refused.
pub type Answer = Option<Result<String, AppError>>;

/// The answer of whichever of `answers` (each form's action value) changed last.
pub fn last_answer(answers: Vec<MappedSignal<Answer>>) -> RwSignal<Answer> {
    let last = RwSignal::new(None);
    for answer in answers {
        Effect::new(move |_| {
            if let Some(answer) = answer.get() {
                last.set(Some(answer));
            }
        });
    }
    last
}

/// What a page shows of `answer` under its forms: the message (test id `<prefix>-saved`), or
/// the refusal (`<prefix>-error`).
pub fn answer_line(
    answer: RwSignal<Answer>,
    prefix: &'static str,
) -> impl Fn() -> Option<AnyView> + Copy + Send + Sync + 'static {
    move || {
        answer.get().map(|done| match done {
            Ok(message) => view! {
                <p class="mt-3 text-sm text-emerald-800" role="status" data-testid=format!("{prefix}-saved")>
                    {message}
                </p>
            }
            .into_any(),
            Err(e) => view! {
                <p class="mt-3 text-sm text-red-700" role="alert" data-testid=format!("{prefix}-error")>
                    {e.to_string()}
                </p>
            }
            .into_any(),
        })
    }
}
