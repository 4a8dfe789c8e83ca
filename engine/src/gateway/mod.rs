//! The isolation boundary between tenants and the control plane: signed tenant tokens, from
//! which every request derives its tenant (never from its body), and the responder that answers
//! store-less tenant pods' run requests.

mod responder;
mod token;

pub use responder::RunRequestResponder;
pub use token::{TenantToken, TokenError, TokenSigner};
