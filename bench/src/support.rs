//! What the benchmarks that drive the real `durable` binary share: finding it, child processes
//! that die with the benchmark, health checks, and memory and CPU readings.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The release server binary: `$DURABLE_BIN`, else `$CARGO_TARGET_DIR/release/durable`.
pub fn server_binary() -> Result<PathBuf, BoxError> {
    if let Ok(bin) = std::env::var("DURABLE_BIN") {
        return Ok(bin.into());
    }
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let bin = Path::new(&target).join("release/durable");
    if bin.exists() {
        Ok(bin)
    } else {
        Err(format!(
            "{} is missing: build it with `make build-release` or set DURABLE_BIN",
            bin.display()
        )
        .into())
    }
}

/// A child process, killed when dropped.
pub struct Proc(Child);

impl Proc {
    /// Starts `bin args` with `envs` (and no inherited DATABASE_URL). It logs warnings, or what
    /// `DURABLE_BENCH_LOG` asks for (a `RUST_LOG` filter) to look into a run.
    pub fn spawn(bin: &Path, args: &[&str], envs: &[(&str, &str)]) -> Result<Self, BoxError> {
        let log = std::env::var("DURABLE_BENCH_LOG").unwrap_or_else(|_| "warn".to_owned());
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", log)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        Ok(Proc(child))
    }

    /// Resident set size, from /proc.
    pub fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.0.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// CPU time the process has used so far (see [`cpu_time`]).
    pub fn cpu(&self) -> Duration {
        cpu_time(self.0.id())
    }
}

/// CPU time (user and system) process `pid` has used so far, from `/proc/<pid>/stat`; zero
/// where it cannot be read. Linux counts it in ticks of 1/100 s (`USER_HZ`).
pub fn cpu_time(pid: u32) -> Duration {
    let ticks = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
            let rest = stat.rsplit_once(')')?.1;
            let mut fields = rest.split_whitespace().skip(11);
            let user: u64 = fields.next()?.parse().ok()?;
            let system: u64 = fields.next()?.parse().ok()?;
            Some(user + system)
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `bin args` to completion and returns its trimmed stdout.
pub fn run(bin: &Path, args: &[&str], envs: &[(&str, &str)]) -> Result<String, BoxError> {
    let mut cmd = Command::new(bin);
    cmd.args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(format!(
            "durable {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

/// Waits (30 s at most) until `base/healthz` answers.
pub async fn wait_healthy(http: &reqwest::Client, base: &str) -> Result<(), BoxError> {
    for _ in 0..300 {
        if let Ok(r) = http.get(format!("{base}/healthz")).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("the server did not become healthy within 30 s".into())
}

/// A free local port.
pub fn free_port() -> Result<u16, BoxError> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
