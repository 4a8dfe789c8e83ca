//! The dashboard's accounts: session epochs and counted failed logins.

use std::sync::Arc;

use super::support::ns;
use crate::store::{Accounts, NewUser};

/// Dashboard accounts: "log out everywhere" moves the session epoch on, and failed logins are
/// counted per key within the window and forgotten on request.
pub async fn accounts_track_sessions_and_failed_logins(accounts: Arc<dyn Accounts>) {
    let user = accounts
        .create_user(
            NewUser {
                email: "a@acme.test".into(),
                tenant: Some(ns("acme")),
                role: crate::model::Role::Admin,
                password_hash: "x".into(),
            },
            1,
        )
        .await
        .expect("user");
    assert_eq!(user.session_epoch, 0);
    assert_eq!(
        accounts.bump_session_epoch(user.id).await.expect("bump"),
        Some(1)
    );
    let reread = accounts
        .user_by_id(user.id)
        .await
        .expect("read")
        .expect("user");
    assert_eq!(reread.session_epoch, 1);
    assert_eq!(
        accounts.bump_session_epoch(9_999).await.expect("bump"),
        None
    );

    let email = "email:a@acme.test".to_owned();
    let ip = "ip:10.0.0.1".to_owned();
    for at in [100, 200, 300] {
        accounts
            .record_login_failure(&[email.clone(), ip.clone()], at)
            .await
            .expect("record");
    }
    accounts
        .record_login_failure(std::slice::from_ref(&ip), 400)
        .await
        .expect("record");
    let both = [email.clone(), ip.clone()];
    assert_eq!(accounts.login_failures(&both, 0).await.expect("count"), 4);
    assert_eq!(accounts.login_failures(&both, 250).await.expect("count"), 2);
    assert_eq!(
        accounts
            .login_failures(std::slice::from_ref(&email), 0)
            .await
            .expect("count"),
        3
    );
    accounts.clear_login_failures(&email).await.expect("clear");
    assert_eq!(
        accounts
            .login_failures(std::slice::from_ref(&email), 0)
            .await
            .expect("count"),
        0
    );
    assert_eq!(
        accounts
            .login_failures(std::slice::from_ref(&ip), 0)
            .await
            .expect("count"),
        4,
        "clearing one key leaves the others"
    );
}
