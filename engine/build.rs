//! `sqlx::migrate!` embeds `migrations/` at compile time; without this, a new migration file
//! would not rebuild the crate and a stale binary would run without it.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
