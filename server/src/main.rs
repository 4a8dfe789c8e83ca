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
mod roles;
mod routes;
mod secret;
mod sessions;
mod state;
mod telemetry;
mod tenant_view;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    let _telemetry = match telemetry::init() {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
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
