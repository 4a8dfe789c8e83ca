//! `durable user …`: an operator's hold on dashboard accounts, on the database directly (every
//! server sees a change at the account's next request): add one, set its password, disable or
//! enable it, and clear the failed logins that locked it. Each change but `unlock` ends the
//! account's sessions.

use std::io::{BufRead, IsTerminal};

use anyhow::{Context, bail};
use clap::Subcommand;
use durable::model::{Namespace, Role};
use durable::store::{AccountChange, Accounts, NewUser};

use crate::{database, secret};

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
    /// Set a user's password (generated and printed, or read from stdin with
    /// `--password-stdin`), ending its sessions and clearing its failed logins.
    Passwd {
        /// Login email.
        #[arg(long)]
        email: String,
        /// Read the password from the first line of stdin.
        #[arg(long)]
        password_stdin: bool,
    },
    /// Disable a user: it cannot log in, and its sessions end.
    Disable {
        /// Login email.
        #[arg(long)]
        email: String,
    },
    /// Enable a disabled user again.
    Enable {
        /// Login email.
        #[arg(long)]
        email: String,
    },
    /// Clear the failed logins that lock an email out (its address's count stays).
    Unlock {
        /// Login email.
        #[arg(long)]
        email: String,
    },
}

/// Runs a `durable user` command against `database_url`.
pub async fn run(database_url: &str, command: UserCommand) -> anyhow::Result<()> {
    let db = database::open_store(database_url).await?;
    let accounts = &*db.accounts;
    match command {
        UserCommand::Add {
            tenant,
            role,
            email,
            password_stdin,
        } => add(accounts, tenant, role, &email, password_stdin).await,
        UserCommand::Passwd {
            email,
            password_stdin,
        } => {
            let email = email_arg(&email)?;
            let (password, generated) = password(password_stdin)?;
            let change = AccountChange {
                password_hash: Some(hash(&password)?),
                ..AccountChange::default()
            };
            changed(accounts, &email, change, "password set; its sessions ended").await?;
            accounts
                .clear_login_failures(&app::ssr::login_failures_key(&email))
                .await?;
            if generated {
                println!("password: {password}");
            }
            Ok(())
        }
        UserCommand::Disable { email } => {
            let change = AccountChange {
                disabled: Some(true),
                ..AccountChange::default()
            };
            changed(
                accounts,
                &email_arg(&email)?,
                change,
                "disabled; its sessions ended",
            )
            .await
        }
        UserCommand::Enable { email } => {
            let change = AccountChange {
                disabled: Some(false),
                ..AccountChange::default()
            };
            changed(accounts, &email_arg(&email)?, change, "enabled").await
        }
        UserCommand::Unlock { email } => {
            let email = email_arg(&email)?;
            if accounts.user_by_email(&email).await?.is_none() {
                bail!("no user `{email}`; list the users you added, or check the spelling");
            }
            accounts
                .clear_login_failures(&app::ssr::login_failures_key(&email))
                .await?;
            println!("{email}: failed logins cleared");
            Ok(())
        }
    }
}

async fn add(
    accounts: &dyn Accounts,
    tenant: Option<String>,
    role: Role,
    email: &str,
    password_stdin: bool,
) -> anyhow::Result<()> {
    let tenant = match (role, tenant) {
        (Role::Operator, None) => None,
        (Role::Operator, Some(_)) => bail!("an operator sees every namespace; drop --tenant"),
        (_, None) => bail!("a {role} belongs to one tenant; pass --tenant NAME"),
        (_, Some(t)) => Some(Namespace::tenant(&t)?),
    };
    let email = email_arg(email)?;
    let (password, generated) = password(password_stdin)?;
    let user = accounts
        .create_user(
            NewUser {
                email,
                tenant,
                role,
                password_hash: hash(&password)?,
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

/// Applies `change` to `email` and says `done`, or names the missing user.
async fn changed(
    accounts: &dyn Accounts,
    email: &str,
    change: AccountChange,
    done: &str,
) -> anyhow::Result<()> {
    match accounts.change_account(email, change).await? {
        Some(user) => {
            println!("{}: {done}", user.email);
            Ok(())
        }
        None => bail!("no user `{email}`; list the users you added, or check the spelling"),
    }
}

/// The email as the login form normalises it, refused unless it looks like one.
fn email_arg(raw: &str) -> anyhow::Result<String> {
    let email = raw.trim().to_lowercase();
    if !email.contains('@') || email.len() > 254 || email.chars().any(char::is_control) {
        bail!("`{}` is not an email address", email.escape_debug());
    }
    Ok(email)
}

/// The password to set: read from stdin, or generated (and then printed by the caller).
fn password(from_stdin: bool) -> anyhow::Result<(String, bool)> {
    if from_stdin {
        Ok((read_password_line()?, false))
    } else {
        Ok((secret::generate_password(), true))
    }
}

fn hash(password: &str) -> anyhow::Result<String> {
    app::ssr::hash_password(password)
        .map_err(|e| anyhow::anyhow!("hashing the password failed: {e}"))
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
