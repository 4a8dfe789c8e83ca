//! The command line: `serve`, `migrate`, `user add`, `token issue`.

use std::io::{BufRead, IsTerminal};
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use durable::model::{Namespace, Role};
use durable::store::{Accounts, NewUser};

use crate::roles;
use crate::secret;

/// A multi-tenant durable workflow engine with a live dashboard.
#[derive(Debug, Parser)]
#[command(name = "durable", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub db: DbArgs,
    /// What to do; `serve` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Where the state lives.
#[derive(Debug, Args)]
pub struct DbArgs {
    /// The database: `sqlite://PATH` (created if missing).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "sqlite://./data/durable.db",
        global = true
    )]
    pub database_url: String,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the standalone server: engine, embedded worker, dashboard and API in one process.
    Serve(ServeArgs),
    /// Apply database migrations and exit.
    Migrate,
    /// Manage dashboard users.
    #[command(subcommand)]
    User(UserCommand),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
}

/// `durable serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "DURABLE_BIND", default_value = "127.0.0.1:3000")]
    pub bind: SocketAddr,
    /// The namespace this engine polls; unset drives every namespace (the standalone default,
    /// since one process hosts every tenant of its dashboard).
    #[arg(long, env = "DURABLE_NAMESPACE")]
    pub namespace: Option<String>,
    /// How long a run stays leased to this process without renewal (seconds). A crashed
    /// process's runs are resumed after this long.
    #[arg(long, env = "DURABLE_LEASE_SECS", default_value_t = 30)]
    pub lease_secs: u64,
    /// Do not create demo users, workflows' demo runs on first start.
    #[arg(long, env = "DURABLE_NO_DEMO")]
    pub no_demo: bool,
}

impl ServeArgs {
    /// The options `durable` without a subcommand runs with: flags' defaults and environment.
    fn from_env() -> Self {
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            serve: ServeArgs,
        }
        Only::parse_from(["durable"]).serve
    }
}

/// `durable user …`
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user. The password is generated and printed, or read from stdin with
    /// `--password-stdin`.
    Add {
        /// The tenant the user belongs to (not for operators).
        #[arg(long)]
        tenant: Option<String>,
        /// viewer, admin or operator.
        #[arg(long)]
        role: Role,
        /// Login email.
        #[arg(long)]
        email: String,
        /// Read the password from the first line of stdin.
        #[arg(long)]
        password_stdin: bool,
    },
}

/// `durable token …`
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Print an API token for a tenant (`Authorization: Bearer <token>`).
    Issue {
        /// The tenant the token acts for.
        #[arg(long)]
        tenant: String,
    },
}

/// Runs the parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let command = cli
        .command
        .unwrap_or_else(|| Command::Serve(ServeArgs::from_env()));
    match command {
        Command::Serve(args) => {
            let namespace = args
                .namespace
                .as_deref()
                .map(Namespace::parse)
                .transpose()
                .context("invalid --namespace")?;
            roles::serve(roles::ServeConfig {
                database_url: cli.db.database_url,
                bind: args.bind,
                namespace,
                lease: Duration::from_secs(args.lease_secs.max(1)),
                demo: !args.no_demo,
            })
            .await
        }
        Command::Migrate => {
            roles::open_store(&cli.db.database_url).await?;
            println!("migrations applied to {}", cli.db.database_url);
            Ok(())
        }
        Command::User(UserCommand::Add {
            tenant,
            role,
            email,
            password_stdin,
        }) => {
            let tenant = match (role, tenant) {
                (Role::Operator, None) => None,
                (Role::Operator, Some(_)) => {
                    bail!("an operator sees every namespace; drop --tenant")
                }
                (_, None) => bail!("a {role} belongs to one tenant; pass --tenant NAME"),
                (_, Some(t)) => Some(Namespace::tenant(&t)?),
            };
            let email = email.trim().to_lowercase();
            if !email.contains('@') || email.len() > 254 {
                bail!("`{email}` is not an email address");
            }
            let (password, generated) = if password_stdin {
                (read_password_line()?, false)
            } else {
                (secret::generate_password(), true)
            };
            let store = roles::open_store(&cli.db.database_url).await?;
            let hash = app::ssr::hash_password(&password)
                .map_err(|e| anyhow::anyhow!("hashing the password failed: {e}"))?;
            let user = store
                .create_user(
                    NewUser {
                        email,
                        tenant,
                        role,
                        password_hash: hash,
                    },
                    secret::now_ms(),
                )
                .await?;
            println!(
                "added {} ({}{})",
                user.email,
                user.role,
                user.tenant.map(|t| format!(" of {t}")).unwrap_or_default()
            );
            if generated {
                println!("password: {password}");
            }
            Ok(())
        }
        Command::Token(TokenCommand::Issue { tenant }) => {
            let tenant = Namespace::tenant(&tenant)?;
            let store = roles::open_store(&cli.db.database_url).await?;
            let signer = secret::token_signer(&store).await?;
            println!("{}", signer.sign(&tenant));
            Ok(())
        }
    }
}

fn read_password_line() -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("password: ");
    }
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .context("reading the password from stdin")?;
    let password = line.trim_end_matches(['\r', '\n']).to_owned();
    if password.chars().count() < 8 {
        bail!("the password must have at least 8 characters");
    }
    Ok(password)
}
