//! Password hashing for the login form and the CLI's user commands: argon2id with a random
//! salt, stored as a PHC string.

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, SaltString};

/// Hashes a password with argon2id and a random salt (PHC string), so a leaked table reveals
/// no password.
pub fn hash_password(password: &str) -> Result<String, argon2::password_hash::Error> {
    let salt = SaltString::generate(&mut rand::rngs::OsRng);
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)?
        .to_string())
}

/// The most memory one check may take, in KiB blocks (a stored hash asking for more is
/// refused rather than allocated): 256 MiB, thirteen times argon2's default.
const MOST_BLOCKS: usize = 256 * 1024;

/// Checks a password against a PHC hash (a malformed hash never verifies), computing in
/// `memory`, grown to what the hash asks for and kept for the next check. Argon2 fills its whole memory once per check; allocated afresh each time,
/// the allocator keeps what each thread freed (about 100 MiB per thread, measured), where a
/// thread that keeps its own block holds exactly what the hash's parameters need.
fn verify_in(memory: &mut Vec<argon2::Block>, password: &str, hash: &str) -> bool {
    use argon2::{Algorithm, Params, Version};

    let Ok(parsed) = PasswordHash::new(hash) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (parsed.salt, parsed.hash) else {
        return false;
    };
    let Ok(algorithm) = Algorithm::try_from(parsed.algorithm) else {
        return false;
    };
    let version = match parsed.version.map(Version::try_from) {
        None => Version::default(),
        Some(Ok(version)) => version,
        Some(Err(_)) => return false,
    };
    let Ok(params) = Params::try_from(&parsed) else {
        return false;
    };
    let blocks = params.block_count();
    if blocks > MOST_BLOCKS {
        return false;
    }
    if memory.len() < blocks {
        memory.resize(blocks, argon2::Block::default());
    }
    let mut salt_bytes = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut salt_bytes) else {
        return false;
    };
    let mut computed = vec![0u8; expected.len()];
    let hashed = Argon2::new(algorithm, version, params).hash_password_into_with_memory(
        password.as_bytes(),
        salt,
        &mut computed,
        &mut memory[..blocks],
    );
    // `Output`'s equality is constant-time.
    hashed.is_ok()
        && argon2::password_hash::Output::new(&computed).is_ok_and(|computed| computed == expected)
}

/// An argon2id hash of a random password nobody knows, checked for unknown emails so that login
/// timing does not reveal which emails exist.
fn dummy_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| {
        let random: [u8; 16] = rand::random();
        hash_password(&format!("{random:?}")).unwrap_or_default()
    })
}

/// Password checks, a few at a time, on threads of their own. Each argon2 check fills about
/// 19 MiB for tens of milliseconds; unbounded, a burst of logins (no account needed) makes the
/// server hold gigabytes and starve everything else of CPU. And on the runtime's blocking pool
/// a check lands on whichever thread is idle, each of which then keeps what it freed in its own
/// allocator arena. So `at_once` threads do every check, each in one block of memory it keeps;
/// checks beyond them wait in a short line, and a login that finds the line full is turned
/// away at once.
#[derive(Debug)]
pub struct PasswordChecks {
    jobs: std::sync::mpsc::Sender<Check>,
    /// Checks running or waiting; a check leaves when its thread has done it.
    inside: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The most running or waiting at once.
    capacity: usize,
}

/// One check for a password thread.
struct Check {
    password: String,
    hash: Option<String>,
    answer: tokio::sync::oneshot::Sender<bool>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Check")
    }
}

impl PasswordChecks {
    /// `at_once` threads check passwords (at least one); `line` more checks may wait for them.
    /// The threads end when this is dropped.
    pub fn new(at_once: usize, line: usize) -> Self {
        use std::sync::atomic::Ordering;

        let at_once = at_once.max(1);
        let (jobs, queue) = std::sync::mpsc::channel::<Check>();
        let queue = std::sync::Arc::new(std::sync::Mutex::new(queue));
        let inside = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for n in 0..at_once {
            let queue = queue.clone();
            let inside = inside.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("durable-passwords-{n}"))
                .spawn(move || {
                    // This thread's argon2 memory, reused by every check it does.
                    let mut memory = Vec::new();
                    loop {
                        // The lock is held only while this thread waits for the next check.
                        let next = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
                        let Ok(check) = next else {
                            return;
                        };
                        let hash = check.hash.as_deref().unwrap_or_else(|| dummy_hash());
                        let ok = verify_in(&mut memory, &check.password, hash);
                        inside.fetch_sub(1, Ordering::SeqCst);
                        // The login may have gone; the check is done either way.
                        let _ = check.answer.send(ok);
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "could not start a password-check thread");
            }
        }
        PasswordChecks {
            jobs,
            inside,
            capacity: at_once + line,
        }
    }

    /// Sized for this machine: one thread per core (at most four), and a line of sixteen per
    /// thread, so a waiting login hears back within about a second.
    pub fn for_this_machine() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let at_once = cores.min(4);
        PasswordChecks::new(at_once, at_once * 16)
    }

    /// Whether `password` matches `hash` (the dummy hash when `hash` is `None`, so an unknown
    /// email costs what a known one does); `None` when the line is full and nothing was
    /// checked.
    pub async fn verify(&self, password: String, hash: Option<String>) -> Option<bool> {
        use std::sync::atomic::Ordering;

        if self.inside.fetch_add(1, Ordering::SeqCst) >= self.capacity {
            self.inside.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        let (answer, answered) = tokio::sync::oneshot::channel();
        let check = Check {
            password,
            hash,
            answer,
        };
        if self.jobs.send(check).is_err() {
            // No thread is left to check it.
            self.inside.fetch_sub(1, Ordering::SeqCst);
            return Some(false);
        }
        // A check whose thread died verified nothing.
        Some(answered.await.unwrap_or(false))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_line_turns_checks_away_unchecked() {
        let hash = hash_password("right").expect("hash");
        let checks = Arc::new(PasswordChecks::new(1, 2));
        // Three checks fill the thread and the line; whatever comes while they are inside is
        // turned away, unchecked.
        checks
            .inside
            .fetch_add(3, std::sync::atomic::Ordering::SeqCst);
        for _ in 0..9 {
            assert_eq!(
                checks.verify("wrong".into(), Some(hash.clone())).await,
                None
            );
        }
        checks
            .inside
            .fetch_sub(3, std::sync::atomic::Ordering::SeqCst);
        // Room again: checks run, and an unknown email's never matches.
        assert_eq!(
            checks.verify("wrong".into(), Some(hash.clone())).await,
            Some(false)
        );
        assert_eq!(checks.verify("right".into(), Some(hash)).await, Some(true));
        assert_eq!(checks.verify("right".into(), None).await, Some(false));
        assert_eq!(checks.inside.load(std::sync::atomic::Ordering::SeqCst), 0);
    }
}
