//! The isolation boundary between tenants and the control plane. For now: signed tenant tokens,
//! from which every API request derives its tenant (never from the request body).

mod token;

pub use token::{TenantToken, TokenError, TokenSigner};
