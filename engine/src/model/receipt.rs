//! The broker's hold on a message a process took: a message stays the taker's until it is
//! settled, so a taker that dies first loses nothing (its messages go back to the queue).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How a taken message is settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settle {
    /// Done with: the broker forgets it.
    Done,
    /// Not done: the broker queues it again, for any consumer.
    GiveBack,
}

type Settler = Box<dyn FnOnce(Settle) + Send + Sync>;

/// Carried with a message (a step result, a task) from the broker that delivered it: when the
/// last copy is dropped, the message is settled as [`Settle::Done`], unless
/// [`Receipt::give_back`] was called. Receipts are not part of a message's value: they never
/// serialize and always compare equal. A message that came from no broker (in-process) has an
/// empty one.
#[derive(Clone, Default)]
pub struct Receipt(Option<Arc<Hold>>);

struct Hold {
    settle: Option<Settler>,
    given_back: AtomicBool,
}

impl Receipt {
    /// A receipt that calls `settle` once, when its last copy drops.
    pub fn new(settle: impl FnOnce(Settle) + Send + Sync + 'static) -> Self {
        Receipt(Some(Arc::new(Hold {
            settle: Some(Box::new(settle)),
            given_back: AtomicBool::new(false),
        })))
    }

    /// Settles the message as not done when the last copy drops: the caller could not act on
    /// it (its store is down, say), and another consumer, or this one later, should.
    pub fn give_back(&self) {
        if let Some(hold) = &self.0 {
            hold.given_back.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a broker holds the message for its taker.
    pub fn is_held(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let how = match *self.given_back.get_mut() {
            true => Settle::GiveBack,
            false => Settle::Done,
        };
        if let Some(settle) = self.settle.take() {
            settle(how);
        }
    }
}

impl fmt::Debug for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_held() {
            "Receipt(held)"
        } else {
            "Receipt"
        })
    }
}

impl PartialEq for Receipt {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn settles_once_when_the_last_copy_drops() {
        let (tx, rx) = mpsc::channel();
        let receipt = Receipt::new(move |how| tx.send(how).expect("send"));
        let copy = receipt.clone();
        drop(receipt);
        assert!(rx.try_recv().is_err(), "a copy still holds it");
        drop(copy);
        assert_eq!(rx.try_recv(), Ok(Settle::Done));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_receipt_given_back_settles_so() {
        let (tx, rx) = mpsc::channel();
        let receipt = Receipt::new(move |how| tx.send(how).expect("send"));
        receipt.clone().give_back();
        drop(receipt);
        assert_eq!(rx.try_recv(), Ok(Settle::GiveBack));
        // An empty receipt settles nothing.
        Receipt::default().give_back();
    }
}
