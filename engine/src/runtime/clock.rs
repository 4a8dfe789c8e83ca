//! Engine time: where the engine reads the time and how it waits for it to pass.
//!
//! Everything durable is stamped and compared in engine time: timers, step timeouts and retry
//! backoffs (checkpoints with a `wake_at`), run leases and driver heartbeats. The engine reads
//! it from its [`Clock`], and waits for it with [`Clock::sleep_until`], so a test that swaps in
//! a [`TestClock`] moves every one of them by advancing the clock, without waiting.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::model::Millis;

/// What [`Clock::sleep_until`] returns.
pub type ClockSleep<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Where the engine reads the time, and waits for it, so tests can control it instead of
/// sleeping.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now(&self) -> Millis;

    /// Resolves once [`Clock::now`] has reached `at` (at once if it has already).
    fn sleep_until(&self, at: Millis) -> ClockSleep<'_>;
}

/// The wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as Millis)
            .unwrap_or_default()
    }

    fn sleep_until(&self, at: Millis) -> ClockSleep<'_> {
        let ms = u64::try_from(at.saturating_sub(self.now())).unwrap_or(0);
        Box::pin(tokio::time::sleep(Duration::from_millis(ms)))
    }
}

#[cfg(any(test, feature = "test-util"))]
pub use test_clock::TestClock;

#[cfg(any(test, feature = "test-util"))]
mod test_clock {
    use std::time::Duration;

    use tokio::sync::watch;

    use super::{Clock, ClockSleep, SystemClock};
    use crate::model::Millis;

    /// A clock that moves only when told to, in the style of Temporal's time-skipping test
    /// environment: hand it to the engine ([`crate::Engine::with_clock`]) and to its step
    /// [`crate::runtime::Worker`], then [`TestClock::advance`] it past a timer, a backoff, a
    /// step timeout or a lease, and whatever waits for that time wakes at once.
    ///
    /// Start it near the real now ([`TestClock::starting_now`]) when the engine shares a store
    /// or a broker with anything on the wall clock (another process, rows written before, a
    /// Redis transport's job stamps): those times are compared with the engine's.
    ///
    /// Standing still, it stops only what waits for engine time: what waits for the world
    /// (results, another process's runs, a peer joining, a remote worker's silence) still
    /// happens at the pace of the wall clock.
    ///
    /// A jump is a jump for everyone: advanced past a lease while a turn runs, the engine sees
    /// that turn as stalled that long and takes the run over, as it would from a process that
    /// froze; advanced by more than a lease at once, a peer whose heartbeat could not keep up
    /// looks gone. Advance while runs wait, or in steps their heartbeats can follow.
    #[derive(Debug)]
    pub struct TestClock {
        now: watch::Sender<Millis>,
    }

    impl TestClock {
        /// A clock standing at `at` (epoch ms).
        pub fn new(at: Millis) -> Self {
            TestClock {
                now: watch::Sender::new(at),
            }
        }

        /// A clock standing at the wall clock's now.
        pub fn starting_now() -> Self {
            Self::new(SystemClock.now())
        }

        /// Moves the clock forward by `by`, waking everything that waited for a time it
        /// passed. Returns the new now.
        pub fn advance(&self, by: Duration) -> Millis {
            let by = Millis::try_from(by.as_millis()).unwrap_or(Millis::MAX);
            let mut now = 0;
            self.now.send_modify(|t| {
                *t = t.saturating_add(by);
                now = *t;
            });
            now
        }

        /// Sets the clock to `at`, waking everything that waited for a time up to `at`. Moving
        /// it back wakes nothing (and the engine's leases and timers then last longer).
        pub fn set(&self, at: Millis) {
            self.now.send_replace(at);
        }
    }

    impl Default for TestClock {
        fn default() -> Self {
            Self::starting_now()
        }
    }

    impl Clock for TestClock {
        fn now(&self) -> Millis {
            *self.now.borrow()
        }

        fn sleep_until(&self, at: Millis) -> ClockSleep<'_> {
            let mut now = self.now.subscribe();
            Box::pin(async move {
                // Only fails once the sender is gone, and `self` holds it for the borrow.
                let _ = now.wait_for(|t| *t >= at).await;
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::FutureExt;

    use super::{Clock, SystemClock, TestClock};

    #[test]
    fn a_test_clock_moves_only_when_told() {
        let clock = TestClock::new(1_000);
        assert_eq!(clock.now(), 1_000);
        assert_eq!(clock.advance(Duration::from_millis(250)), 1_250);
        assert_eq!(clock.now(), 1_250);
        clock.set(5_000);
        assert_eq!(clock.now(), 5_000);
        clock.set(4_000);
        assert_eq!(clock.now(), 4_000, "set may move it back");
    }

    #[test]
    fn a_test_clock_starts_near_the_wall_clock() {
        let before = SystemClock.now();
        let clock = TestClock::starting_now();
        let after = SystemClock.now();
        assert!((before..=after).contains(&clock.now()));
    }

    #[tokio::test]
    async fn a_sleep_on_a_test_clock_ends_when_the_clock_reaches_its_time() {
        let clock = Arc::new(TestClock::new(0));
        // Due already: ready at once.
        assert!(clock.sleep_until(0).now_or_never().is_some());
        assert!(clock.sleep_until(-5).now_or_never().is_some());
        let mut soon = clock.sleep_until(100);
        let mut later = clock.sleep_until(10_000);
        assert!((&mut soon).now_or_never().is_none());
        clock.advance(Duration::from_millis(99));
        assert!((&mut soon).now_or_never().is_none(), "99 ms is not 100");
        // Woken from another task, as the engine's loops are.
        let advancer = {
            let clock = clock.clone();
            tokio::spawn(async move { clock.advance(Duration::from_millis(1)) })
        };
        tokio::time::timeout(Duration::from_secs(5), soon)
            .await
            .expect("woken when the clock reached its time");
        assert_eq!(advancer.await.expect("joined"), 100);
        assert!(
            (&mut later).now_or_never().is_none(),
            "a later sleep waits on"
        );
        clock.set(20_000);
        tokio::time::timeout(Duration::from_secs(5), later)
            .await
            .expect("woken by a jump past its time");
    }

    #[tokio::test(start_paused = true)]
    async fn the_system_clock_sleeps_in_tokio_time() {
        let clock = SystemClock;
        let start = tokio::time::Instant::now();
        clock.sleep_until(clock.now() + 300).await;
        let slept = start.elapsed();
        assert!(slept >= Duration::from_millis(250), "{slept:?}");
        // Already due: no wait.
        let start = tokio::time::Instant::now();
        clock.sleep_until(clock.now() - 1_000).await;
        assert!(start.elapsed() < Duration::from_millis(5));
    }
}
