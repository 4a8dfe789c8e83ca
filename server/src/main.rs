//! `durable`: the workflow engine server, its dashboard and its admin commands.
#![recursion_limit = "512"]

mod auth;
mod cli;
mod database;
mod demo;
mod error;
mod live;
mod metrics;
mod public_url;
mod publish;
mod roles;
mod routes;
mod schedules;
mod secret;
mod sessions;
mod state;
mod tokens;
mod users;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,sqlx=warn,tower_sessions=warn".into()),
        )
        .with_writer(std::io::stderr);
    // One JSON object per line for a log pipeline: each with the fields of the spans it was
    // logged in (a run's tenant, id and workflow).
    match std::env::var("DURABLE_LOG_FORMAT").as_deref() {
        Ok("json") => logs
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
        Ok("text") | Err(std::env::VarError::NotPresent) => logs.init(),
        Ok(other) => {
            eprintln!("error: DURABLE_LOG_FORMAT is `{other}`; use `json` or `text` (the default)");
            return std::process::ExitCode::from(2);
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            eprintln!("error: DURABLE_LOG_FORMAT is not valid UTF-8; use `json` or `text`");
            return std::process::ExitCode::from(2);
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
