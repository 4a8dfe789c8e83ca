//! `durable token …`: API tokens on the database directly (every server sees an issue or a
//! revocation at its next request), and the wire's HMAC tenant tokens for the SDKs.

use anyhow::bail;
use clap::{Args, Subcommand};
use durable::gateway::issue_api_token;
use durable::model::{ApiToken, Namespace, TokenScope};

use crate::{database, secret};

/// `durable token …`
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Issue an API token (`Authorization: Bearer <token>`) for a tenant, or an operator token;
    /// it is printed once and kept only as a hash.
    Issue {
        #[command(flatten)]
        whose: Whose,
        /// What the token is for, shown when tokens are listed.
        #[arg(long, default_value = "cli")]
        name: String,
        /// Reads only: lists, runs and events, no starts or verbs.
        #[arg(long, conflicts_with = "operator")]
        read_only: bool,
        /// When it stops working by itself: a number and a unit (`90s`, `30m`, `12h`, `30d`).
        #[arg(long, value_parser = parse_lifetime)]
        expires_in: Option<i64>,
        /// The wire's HMAC tenant token instead, which an SDK worker or pod signs its messages
        /// on Redis with (it cannot be revoked alone: rotate DURABLE_TENANT_SECRET).
        #[arg(long, requires = "tenant", conflicts_with_all = ["read_only", "expires_in"])]
        wire: bool,
    },
    /// List a tenant's API tokens (or the operator tokens), newest first.
    List {
        #[command(flatten)]
        whose: Whose,
    },
    /// Revoke an API token by its id (as listed): refused from its next request on.
    Revoke {
        /// The token's id.
        id: String,
    },
}

/// Whose tokens a command is about: one tenant's (`--tenant`) or the operator's (`--operator`).
#[derive(Debug, Args)]
pub struct Whose {
    /// The tenant the tokens act for.
    #[arg(
        long,
        required_unless_present = "operator",
        conflicts_with = "operator"
    )]
    tenant: Option<String>,
    /// The operator's tokens instead: they read and set every tenant's plan, and reach no
    /// tenant's runs.
    #[arg(long)]
    operator: bool,
}

impl Whose {
    /// The tenant, checked; `None` for the operator.
    fn tenant(self) -> anyhow::Result<Option<Namespace>> {
        Ok(self.tenant.map(|t| Namespace::tenant(&t)).transpose()?)
    }
}

/// Runs a `durable token` command against `database_url`.
pub async fn run(database_url: &str, command: TokenCommand) -> anyhow::Result<()> {
    let db = database::open_store(database_url).await?;
    let accounts = &*db.accounts;
    match command {
        TokenCommand::Issue {
            whose, wire: true, ..
        } => {
            let tenant = whose.tenant()?;
            let signer = secret::token_signer(accounts, secret::Fallback::Kept).await?;
            if let Some(tenant) = tenant {
                println!("{}", signer.sign(&tenant));
            }
            Ok(())
        }
        TokenCommand::Issue {
            whose,
            name,
            read_only,
            expires_in,
            wire: false,
        } => {
            let name = ApiToken::check_name(&name).map_err(anyhow::Error::msg)?;
            let tenant = whose.tenant()?;
            let scope = match (&tenant, read_only) {
                (None, _) => TokenScope::Operator,
                (Some(_), true) => TokenScope::Read,
                (Some(_), false) => TokenScope::ReadWrite,
            };
            let now = secret::now_ms();
            let expires_at = expires_in.map(|ms| now.saturating_add(ms));
            let (stored, token) = issue_api_token(tenant, name, scope, expires_at, now);
            accounts.create_token(stored).await?;
            println!("{token}");
            Ok(())
        }
        TokenCommand::List { whose } => {
            let tenant = whose.tenant()?;
            let now = secret::now_ms();
            for token in accounts.tokens(tenant.as_ref()).await? {
                println!("{}", listed(&token, now));
            }
            Ok(())
        }
        TokenCommand::Revoke { id } => {
            if accounts.revoke_token(&id, None, secret::now_ms()).await? {
                println!("revoked {id}");
                Ok(())
            } else {
                bail!("no live token `{id}`: list them with `durable token list --tenant NAME`")
            }
        }
    }
}

/// One line of `durable token list`: id, scope, state, name.
fn listed(token: &ApiToken, now: i64) -> String {
    let state = match (token.revoked_at, token.expires_at) {
        (Some(_), _) => "revoked".to_owned(),
        (None, Some(at)) if at <= now => "expired".to_owned(),
        (None, Some(at)) => format!("expires in {}", shown_lifetime(at - now)),
        (None, None) => "live".to_owned(),
    };
    format!(
        "{}\t{}\t{}\t{}",
        token.id,
        token.scope.as_str(),
        state,
        token.name
    )
}

/// `90s`, `30m`, `12h` or `30d`, in milliseconds.
fn parse_lifetime(raw: &str) -> Result<i64, String> {
    let refuse = || format!("`{raw}` is not a lifetime: write a number and s, m, h or d (`30d`)");
    let split = raw.len().checked_sub(1).ok_or_else(refuse)?;
    let (number, unit) = raw.split_at(split);
    let n: i64 = number.parse().map_err(|_| refuse())?;
    let unit_ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(refuse()),
    };
    if n <= 0 || n > 3650 * 86_400_000 / unit_ms {
        return Err(format!("`{raw}` is out of range: from 1s to 3650d"));
    }
    Ok(n * unit_ms)
}

/// `ms` in its largest whole unit, rounded up: a token issued for 30 days lists as `30d`.
fn shown_lifetime(ms: i64) -> String {
    let (unit, suffix) = match ms {
        ms if ms >= 86_400_000 => (86_400_000, "d"),
        ms if ms >= 3_600_000 => (3_600_000, "h"),
        ms if ms >= 60_000 => (60_000, "m"),
        _ => (1_000, "s"),
    };
    format!("{}{suffix}", (ms + unit - 1) / unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_read_as_a_person_writes_them() {
        assert_eq!(parse_lifetime("90s"), Ok(90_000));
        assert_eq!(parse_lifetime("30d"), Ok(30 * 86_400_000));
        for bad in ["", "d", "10", "10w", "-1h", "0m", "99999d"] {
            assert!(parse_lifetime(bad).is_err(), "{bad}");
        }
        assert_eq!(shown_lifetime(3 * 3_600_000 - 5), "3h");
        assert_eq!(shown_lifetime(30 * 86_400_000 - 20), "30d");
    }
}
