//! The broker's hold on a message a process took: a message stays the taker's until it is
//! settled, so a taker that dies first loses nothing (its messages go back to the queue).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// How a taken message is settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settle {
    /// Done with: the broker forgets it.
    Done,
    /// Not done: the broker queues it again, for any consumer.
    GiveBack,
}

type Settler = Box<dyn FnOnce(Settle) + Send + Sync>;

/// What becomes of the message when the last copy drops.
const DONE: u8 = 0;
const GIVE_BACK: u8 = 1;
const NOTHING: u8 = 2;

/// Carried with a message (a step result, a task) from the broker that delivered it: when the
/// last copy is dropped, the message is settled as the receipt was made to, unless
/// [`Receipt::done`], [`Receipt::give_back`] or [`Receipt::settled`] said otherwise. A task is
/// given back unless it was answered (so a worker that stops, panics or is cancelled loses
/// nothing); a result is done once the control plane is through with it, whatever became of it
/// (applying one twice changes nothing, and a result the store cannot take is given back
/// explicitly). Receipts are not part of a message's value: they never serialize and always
/// compare equal. A message that came from no broker (in-process) has an empty one.
#[derive(Clone, Default)]
pub struct Receipt(Option<Arc<Hold>>);

struct Hold {
    /// The broker's key of the message and the id of this take of it.
    taken: (String, String),
    settle: Option<Settler>,
    then: AtomicU8,
}

impl Receipt {
    /// The receipt of take `take` of message `key`, which calls `settle` once, when its last
    /// copy drops: with `unless_told` if nothing else was said.
    pub fn new(
        key: String,
        take: String,
        unless_told: Settle,
        settle: impl FnOnce(Settle) + Send + Sync + 'static,
    ) -> Self {
        let then = match unless_told {
            Settle::Done => DONE,
            Settle::GiveBack => GIVE_BACK,
        };
        Receipt(Some(Arc::new(Hold {
            taken: (key, take),
            settle: Some(Box::new(settle)),
            then: AtomicU8::new(then),
        })))
    }

    /// Settles the message as done when the last copy drops: it was acted on.
    pub fn done(&self) {
        self.tell(DONE);
    }

    /// Settles the message as not done when the last copy drops: the caller could not act on
    /// it (its store is down, say), and another consumer, or this one later, should.
    pub fn give_back(&self) {
        self.tell(GIVE_BACK);
    }

    /// What the last copy's drop does, unless the message was settled elsewhere already.
    fn tell(&self, then: u8) {
        if let Some(hold) = &self.0 {
            let _ = hold
                .then
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                    (now != NOTHING).then_some(then)
                });
        }
    }

    /// Says the message was settled otherwise (together with the answer it led to, say, or
    /// not at all because it is no longer this taker's): dropping the receipt does nothing.
    pub fn settled(&self) {
        if let Some(hold) = &self.0 {
            hold.then.store(NOTHING, Ordering::Release);
        }
    }

    /// The broker's key of the message and the id of this take, if a broker holds it.
    pub fn taken(&self) -> Option<(&str, &str)> {
        self.0
            .as_ref()
            .map(|h| (h.taken.0.as_str(), h.taken.1.as_str()))
    }

    /// Whether a broker holds the message for its taker.
    pub fn is_held(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let how = match *self.then.get_mut() {
            DONE => Settle::Done,
            GIVE_BACK => Settle::GiveBack,
            _ => return,
        };
        if let Some(settle) = self.settle.take() {
            settle(how);
        }
    }
}

impl fmt::Debug for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.taken() {
            Some((key, take)) => write!(f, "Receipt({key} take {take})"),
            None => f.write_str("Receipt"),
        }
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

    fn held(unless_told: Settle) -> (Receipt, mpsc::Receiver<Settle>) {
        let (tx, rx) = mpsc::channel();
        let receipt = Receipt::new("job".into(), "t1".into(), unless_told, move |how| {
            tx.send(how).expect("send")
        });
        (receipt, rx)
    }

    #[test]
    fn settles_once_when_the_last_copy_drops() {
        let (receipt, rx) = held(Settle::Done);
        let copy = receipt.clone();
        drop(receipt);
        assert!(rx.try_recv().is_err(), "a copy still holds it");
        assert_eq!(copy.taken(), Some(("job", "t1")));
        drop(copy);
        assert_eq!(rx.try_recv(), Ok(Settle::Done));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_receipt_given_back_done_or_settled_elsewhere_says_so() {
        let (receipt, rx) = held(Settle::Done);
        receipt.clone().give_back();
        drop(receipt);
        assert_eq!(rx.try_recv(), Ok(Settle::GiveBack));
        // A task is given back unless it was answered.
        let (receipt, rx) = held(Settle::GiveBack);
        drop(receipt);
        assert_eq!(rx.try_recv(), Ok(Settle::GiveBack));
        let (receipt, rx) = held(Settle::GiveBack);
        receipt.done();
        drop(receipt);
        assert_eq!(rx.try_recv(), Ok(Settle::Done));
        let (receipt, rx) = held(Settle::GiveBack);
        receipt.settled();
        receipt.give_back();
        drop(receipt);
        assert!(rx.try_recv().is_err(), "settled elsewhere: nothing on drop");
        // An empty receipt settles nothing.
        Receipt::default().give_back();
    }
}
