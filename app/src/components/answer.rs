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
