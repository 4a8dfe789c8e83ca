//! The future a durable operation returns.
//!
//! An operation takes its position (`seq`) in the run when it is *created*, not when it is
//! first polled. So the order the workflow writes its operations in decides their positions,
//! whatever order a combinator polls them in: `select(step, timer)` replays alike after the step
//! is done, though `select` then never polls the timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::{FusedFuture, Ready, ready};

use super::turn_state::TurnState;

/// A durable operation of a workflow ([`step`](super::WorkflowContext::step),
/// [`sleep`](super::WorkflowContext::sleep), [`wait_signal`](super::WorkflowContext::wait_signal),
/// ...). Its position in the run was taken, and its command issued, when it was created;
/// awaiting it gives its recorded outcome, or suspends this branch of the workflow until a later
/// turn, when the outcome is recorded.
///
/// Create the operations a workflow races or joins in a fixed order (`let a = ctx.step(..);
/// let b = ctx.sleep(..);`) and hand them to any combinator.
#[must_use = "an operation's position and command are taken when it is created; await it"]
pub struct Operation<T> {
    state: State<T>,
}

enum State<T> {
    /// Its outcome is known in this turn.
    Ready(Ready<T>),
    /// It resolves in a later turn; the first poll counts it as awaited by the workflow.
    Suspended {
        turn: Arc<Mutex<TurnState>>,
        counted: bool,
    },
}

impl<T> Operation<T> {
    /// An operation whose outcome this turn already knows (replayed, or run in place).
    pub(crate) fn ready(value: T) -> Self {
        Operation {
            state: State::Ready(ready(value)),
        }
    }

    /// An operation the run must wait for; awaiting it ends this branch's part of the turn.
    pub(crate) fn suspended(turn: &Arc<Mutex<TurnState>>) -> Self {
        Operation {
            state: State::Suspended {
                turn: Arc::clone(turn),
                counted: false,
            },
        }
    }

    /// The same operation with its outcome turned by `f`.
    pub(crate) fn map<U>(self, f: impl FnOnce(T) -> U) -> Operation<U> {
        match self.state {
            State::Ready(value) => Operation::ready(f(value.into_inner())),
            State::Suspended { turn, counted } => Operation {
                state: State::Suspended { turn, counted },
            },
        }
    }
}

// Nothing in an operation is pinned: the value is moved out whole and the context is a handle.
impl<T> Unpin for Operation<T> {}

impl<T> Future for Operation<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match &mut self.state {
            State::Ready(value) => Pin::new(value).poll(cx),
            State::Suspended { turn, counted } => {
                if !*counted {
                    *counted = true;
                    turn.lock().unwrap_or_else(|p| p.into_inner()).awaiting += 1;
                }
                Poll::Pending
            }
        }
    }
}

impl<T> FusedFuture for Operation<T> {
    /// A suspended operation never ends within its turn; a ready one ends once polled.
    fn is_terminated(&self) -> bool {
        match &self.state {
            State::Ready(value) => value.is_terminated(),
            State::Suspended { .. } => false,
        }
    }
}
